"""Helpers shared by the aten converter families."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir
import torch

from pt2onnx.plugin import Op

from ._dims import known_dtype, reduce_over


def as_dtype(op: Op, value: Any, dtype: ir.DataType | None) -> ir.Value:
    """``value`` (a Value or Python scalar) as a Value of ``dtype``, cast only if needed."""
    dtype = known_dtype(dtype)
    if isinstance(value, ir.Value):
        return value if value.dtype == dtype else op.Cast(value, to=dtype)
    # numpy's C cast: a scalar out of an integer dtype's range wraps around, as in torch.
    return op.constant(np.asarray(value).astype(dtype.numpy()), dtype)


def promote(op: Op, *values: Any) -> list[ir.Value]:
    """Operands of an arithmetic op, in the dtype torch computes the result in."""
    return [as_dtype(op, v, op.output_dtype) for v in values]


def int_list(value: Any, rank: int) -> list[int]:
    """An int or list of ints (torch allows both for kernel/stride/...) as ``rank`` ints."""
    if isinstance(value, int):
        return [value] * rank
    values = [int(v) for v in value]
    return values * rank if len(values) == 1 else values


# -- dtypes onnxruntime runs, and computing through a wider one ------------------------

D = ir.DataType
FLOATS = frozenset({D.FLOAT, D.DOUBLE, D.FLOAT16})
FLOAT32_16 = frozenset({D.FLOAT, D.FLOAT16})
#: The half-precision floats, which onnxruntime mostly computes in float32.
HALVES = frozenset({D.FLOAT16, D.BFLOAT16})
SIGNED = frozenset({D.INT8, D.INT16, D.INT32, D.INT64})
INTS = SIGNED | {D.UINT8}
NUMBERS = FLOATS | INTS
#: Where onnxruntime (CPU) lacks a kernel for a dtype, compute in the next one of this chain:
#: each step is exact for the values of the narrower dtype (results are cast back).
_WIDER = {
    D.BFLOAT16: D.FLOAT,
    D.FLOAT16: D.FLOAT,
    D.BOOL: D.UINT8,
    D.INT8: D.INT32,
    D.INT16: D.INT32,
    D.UINT8: D.INT32,
    D.INT32: D.INT64,
}


def kernel_dtype(op: Op, dtype: ir.DataType, supported: frozenset[ir.DataType], argument: str = "self") -> ir.DataType:
    """``dtype`` or the nearest wider dtype in ``supported``; raises when there is none."""
    wide: ir.DataType | None = dtype
    while wide is not None and wide not in supported:
        wide = _WIDER.get(wide)
    if wide is None:
        raise op.unsupported(
            argument,
            dtype.name,
            f"onnxruntime has no kernel for this dtype (runs {', '.join(sorted(d.name for d in supported))}) "
            "and no wider dtype computes it exactly",
            hint="cast the input to a supported dtype in the model",
        )
    return wide


def compute(
    op: Op,
    fn: Any,
    values: Any,
    dtype: ir.DataType,
    supported: frozenset[ir.DataType],
    *,
    cast_back: bool = True,
    argument: str = "self",
    scalar_other: bool = False,
) -> ir.Value:
    """``fn(*values)`` with the values in ``dtype``, run in a wider dtype if onnxruntime needs one.

    With ``cast_back`` the result is cast to ``dtype`` (leave it off for bool-valued ops).
    A tensor operand of another dtype is rounded to ``dtype`` on its way to the wider one,
    as torch casts every operand to the computation dtype (a float16 divisor of a bfloat16
    tensor is a bfloat16 value), and so is a Python scalar of an integer computation (-3
    is 253 to a uint8 tensor).

    ``scalar_other``: a 0-d second operand is read in the wider dtype unrounded, like a
    Python scalar, as torch's mul and div kernels read a scalar divisor or factor of a
    bfloat16/float16 tensor in float32 (``bf16 * 3.4e38`` stays finite where the rounded
    factor is inf).
    """
    wide = kernel_dtype(op, dtype, supported, argument)

    def operand(v: Any, *, scalar: bool = False) -> Any:
        if isinstance(v, ir.Value) and v.dtype != dtype and not (scalar and _is_wide_scalar(v, dtype, wide)):
            v = as_dtype(op, v, dtype)
        elif not isinstance(v, ir.Value) and dtype in INTS and wide != dtype:
            v = np.asarray(v).astype(dtype.numpy())
        return as_dtype(op, v, wide)

    result = fn(*[operand(v, scalar=scalar_other and i == 1) for i, v in enumerate(values)])
    return op.Cast(result, to=dtype) if cast_back and wide != dtype else result


def _is_wide_scalar(value: ir.Value, dtype: ir.DataType, wide: ir.DataType) -> bool:
    return (
        dtype in HALVES
        and wide == D.FLOAT
        and value.dtype in (D.FLOAT, D.DOUBLE)
        and value.shape is not None
        and value.shape.rank() == 0
    )


def meta_of(arg: Any) -> Any:
    """What torch's type promotion sees for an FX argument: a FakeTensor, or a Python scalar."""
    if not hasattr(arg, "meta"):
        return arg
    val = arg.meta.get("val")
    if isinstance(val, torch.SymBool):
        return True
    if isinstance(val, torch.SymFloat):
        return 1.0
    if isinstance(val, torch.SymInt):
        return 1
    return val


def operand_dtype(op: Op, first: int = 0, second: int = 1) -> ir.DataType:
    """The dtype torch promotes the node's arguments ``first`` and ``second`` to (for ops whose
    output dtype is not the computation dtype, e.g. comparisons)."""
    args = op.node.args
    a = meta_of(args[first])
    b = meta_of(args[second]) if len(args) > second else None
    if b is None:
        return op.dtype(a.dtype)
    return op.dtype(torch.result_type(a, b))


def rank(value: Any) -> int:
    """The rank of a Value (0 for Python scalars)."""
    return value.shape.rank() if isinstance(value, ir.Value) and value.shape is not None else 0


def axes(dim: Any, rank_: int) -> list[int] | None:
    """Reduction axes of ``dim`` (int, list, or None/[] for all dims); None means all dims.

    A 0-d tensor reduces over dim 0/-1 in torch, which is all of its (no) dims.
    """
    if dim is None or rank_ == 0:
        return None
    dims = [dim] if isinstance(dim, int) else list(dim)
    return [d % rank_ for d in dims] or None


def truncate(op: Op, x: ir.Value) -> ir.Value:
    """``x`` rounded toward zero (ONNX has no Trunc)."""
    return op.Where(op.Less(x, 0), op.Ceil(x), op.Floor(x))


def batched(op: Op, x: ir.Value, spatial: int, emit: Any) -> Any:
    """``emit(x)`` for an ONNX op that wants (N, C, *spatial): torch also takes unbatched
    (C, *spatial) inputs, which get a batch dim of 1 around the op (every output loses it again)."""
    if rank(x) != spatial + 1:
        return emit(x)
    zero = op.constant([0])
    out = emit(op.Unsqueeze(x, zero))
    if isinstance(out, tuple):
        return tuple(op.Squeeze(o, zero) for o in out)
    return op.Squeeze(out, zero)


def is_inf(op: Op, x: ir.Value, **detect: int) -> ir.Value:
    """``IsInf(x, **detect)``: before opset 20, whose ``IsInf`` takes only float and double,
    16-bit floats are compared in float32, which holds their infinities and every finite value."""
    if op.opset < 20 and x.dtype in (ir.DataType.FLOAT16, ir.DataType.BFLOAT16):
        x = op.Cast(x, to=ir.DataType.FLOAT)
    return op.IsInf(x, **detect)


def is_nan(op: Op, x: ir.Value) -> ir.Value:
    """``IsNaN(x)``: before opset 20, where onnxruntime has no bfloat16 kernel for it,
    bfloat16 is tested in float32, which holds its NaNs and every other value."""
    if op.opset < 20 and x.dtype == ir.DataType.BFLOAT16:
        x = op.Cast(x, to=ir.DataType.FLOAT)
    return op.IsNaN(x)


def reduce_extreme(op: Op, onnx_op: str, x: ir.Value, axes: list[int] | None, keepdim: bool | int) -> ir.Value:
    """``ReduceMax``/``ReduceMin`` of ``x`` over ``axes`` with torch's NaN: a NaN among the
    reduced values gives NaN (onnxruntime's kernels skip it)."""
    result = reduce_over(op, onnx_op, x, axes, keepdims=keepdim)
    if x.dtype not in FLOATS:
        return result
    # ReduceMax runs on bool from opset 20 only: count as uint8.
    has_nan = reduce_over(op, "ReduceMax", op.Cast(is_nan(op, x), to=D.UINT8), axes, keepdims=keepdim)
    return op.Where(op.Cast(has_nan, to=D.BOOL), op.constant(float("nan"), x.dtype), result)
