"""Mixture of experts: ``transformers::grouped_mm_fallback`` in standard ONNX.

transformers 5.x runs the experts of a mixture-of-experts layer (Mixtral, Qwen-MoE, ...)
as one grouped matrix product: the routed rows of ``input`` are sorted by expert, and
``offs`` holds the cumulative row count of each expert. Where ``torch._grouped_mm``
cannot be traced, the model calls the custom op ``transformers::grouped_mm_fallback``,
which torch.export keeps as one opaque node. This handler unrolls it over the experts
(their number is static: the weight's first dim): each expert multiplies its slice of
rows by its weight, and the slices are concatenated. Rows past the last offset stay zero,
as in the eager fallback.
"""

from __future__ import annotations

import onnx_ir as ir

from pt2onnx.plugin import Op

__all__ = ["grouped_mm_fallback"]

_INT64 = ir.DataType.INT64


def grouped_mm_fallback(op: Op, input: ir.Value, weight: ir.Value, offs: ir.Value) -> ir.Value:
    """``out[r] = input[r] @ weight[g]`` for the rows ``r`` of group ``g`` (``offs[g-1] <= r < offs[g]``)."""
    groups = weight.shape[0] if weight.shape is not None else None
    if not isinstance(groups, int):
        raise op.unsupported(
            "weight",
            f"shape {list(weight.shape) if weight.shape is not None else '?'}",
            "its first dim, the number of experts, is symbolic: the experts are unrolled, so it must be static",
            hint="export with the expert weights' first dim static (it is, when they are the model's parameters)",
        )
    dtype = op.output_dtype
    # onnxruntime's CPU MatMul has no bfloat16 kernel; torch accumulates bfloat16 products in float32 too.
    wide = ir.DataType.FLOAT if dtype == ir.DataType.BFLOAT16 else dtype
    data = op.Cast(input, to=wide) if wide != dtype else input
    weight = op.Cast(weight, to=wide) if wide != dtype else weight
    ends = op.Cast(offs, to=_INT64)
    starts = op.Concat(
        op.constant([0], _INT64), op.Slice(ends, op.constant([0], _INT64), op.constant([groups - 1], _INT64)), axis=0
    )
    axis = op.constant([0], _INT64)
    pieces = []
    # The last group's slice runs to the last row: its rows past the group's end (none unless
    # experts are sharded away) are zeroed below, as eager leaves them, with no Pad or empty
    # piece after the Concat (OpenVINO 2026.4 computed the experts 3e-4 off with either:
    # Inkling2, HunYuan v4; not reduced to a minimal model yet).
    everything = op.constant([2**62], _INT64)
    for g in range(groups):
        index = op.constant([g], _INT64)
        end = op.Gather(ends, index) if g < groups - 1 else everything
        rows = op.Slice(data, op.Gather(starts, index), end, axis)
        # Gather of one expert rather than Split(num_outputs=), which is opset 18.
        pieces.append(op.MatMul(rows, op.Gather(weight, op.constant(g, _INT64), axis=0)))
    out = op.Concat(*pieces, axis=0) if groups > 1 else pieces[0]
    # Shape's start/end are opset 15: Gather one size of the whole shape instead.
    row_index = op.Range(
        op.constant(0, _INT64), op.Squeeze(op.Gather(op.Shape(input), axis), axis), op.constant(1, _INT64)
    )
    last_end = op.Slice(ends, op.constant([-1], _INT64), op.constant([groups], _INT64))
    kept = op.Unsqueeze(op.Less(row_index, last_end), op.constant([1], _INT64))
    out = op.Where(kept, out, op.constant(0.0, wide))
    return op.Cast(out, to=dtype) if wide != dtype else out
