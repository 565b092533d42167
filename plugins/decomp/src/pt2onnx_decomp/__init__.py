"""pt2onnx-decomp: which ops to keep whole when the program is re-traced, and extra decompositions.

The core already never decomposes an op some plugin converts. The ``KEEP`` list here
records, per op, the measured decision that its direct ONNX translation beats torch's
decomposition, so ``pt2onnx ops`` can show it and the choice does not silently depend
on which pack happens to convert the op.

The list comes from ``benchmarks/studies/kept_ops.py`` (results in ``benchmarks/results/kept_ops.md``):
node count and onnxruntime latency of the kept form against torch's default decomposition.
Kept: ``linear`` (MatMul+Add vs Reshape/Gemm/Reshape, same speed), ``rms_norm`` (one
RMSNormalization vs 10 nodes, ~2.8x faster), ``instance_norm`` (12 vs 16 nodes),
``scaled_dot_product_attention`` (one Attention vs 23 nodes, ~1.7x faster), ``pixel_shuffle``
(one DepthToSpace vs 5 nodes, ~2x faster), ``flatten`` (1 vs 2 nodes). Not kept, because
torch decomposes them into a core op converted to the very same ONNX: gelu, silu, softmax,
log_softmax, layer_norm, group_norm, batch_norm, conv2d, upsample_nearest2d,
upsample_bilinear2d, embedding, index_put, dropout.
"""

from __future__ import annotations

from pt2onnx.plugin import DecompositionRegistrar, hookimpl

KEEP = (
    "aten::linear",
    "aten::rms_norm",
    "aten::instance_norm",
    "aten::scaled_dot_product_attention",
    "aten::pixel_shuffle",
    "aten::flatten",
)


@hookimpl
def pt2onnx_register_decompositions(register: DecompositionRegistrar) -> None:
    register.keep(*KEEP)
