"""The pt2onnx plugin: ``pt2onnx_quant::matmul_nbits`` as one ``com.microsoft::MatMulNBits`` node.

Entry point ``quant``: installing the pack is all an export needs; block it with
``disable=["quant"]`` (a model holding the op then fails to export, naming the op).
"""

from __future__ import annotations

from typing import Any

import torch

from pt2onnx.plugin import CustomOpRegistrar, Op, hookimpl

DOMAIN = "com.microsoft"
#: The input dtypes MatMulNBits has CPU kernels for (its scales take the same dtype).
DTYPES = (torch.float32, torch.float16)


def matmul_nbits(
    op: Op,
    x: Any,
    packed: Any,
    scales: Any,
    zero_points: Any,
    bias: Any,
    in_features: int,
    bits: int,
    block_size: int,
    accuracy_level: int = 0,
) -> Any:
    """MatMulNBits(A, B, scales, zero_points, g_idx, bias), every attribute from the op's arguments.

    The tensors are already in MatMulNBits' layout (:mod:`pt2onnx_quant.packing`); N is the
    output's last dim. A dtype MatMulNBits has no kernel for is refused with what to do.
    """
    output = op.output_meta  # torch's: the input's dtype, and N as the last dim
    if output.dtype not in DTYPES:
        raise op.unsupported(
            "x", output.dtype, "MatMulNBits computes in float32 or float16", hint="cast the model to float32"
        )
    if op.dtype_of(scales) != op.dtype_of(x):
        raise op.unsupported(
            "scales",
            op.dtype_of(scales),
            f"MatMulNBits takes scales of the input's dtype ({output.dtype})",
            hint="quantize the model after casting it",
        )
    attributes = {"K": in_features, "N": int(output.shape[-1]), "bits": bits, "block_size": block_size}
    if accuracy_level:
        # Left out when 0 (unset), as onnxruntime's quantizer does: not every runtime knows it.
        attributes["accuracy_level"] = accuracy_level
    inputs = [x, packed, scales, zero_points, None, bias] if bias is not None else [x, packed, scales, zero_points]
    return op.custom_node(DOMAIN, "MatMulNBits", inputs, attributes, num_outputs=1)


@hookimpl
def pt2onnx_register_custom_ops(register: CustomOpRegistrar) -> None:
    register.expand("pt2onnx_quant::matmul_nbits", matmul_nbits)
