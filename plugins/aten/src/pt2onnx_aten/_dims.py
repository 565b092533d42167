"""Helpers on dims and sizes for the shape, indexing and scatter families."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir

from pt2onnx.plugin import Op

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def ints(op: Op, values: list[int]) -> ir.Value:
    """A 1-D INT64 constant."""
    return op.constant([int(v) for v in values], ir.DataType.INT64)


def static_dims(value: ir.Value) -> list[int | None]:
    """The sizes of ``value``: ints where static, None where symbolic."""
    assert value.shape is not None
    return [d if isinstance(d, int) else None for d in value.shape]


def size(op: Op, x: ir.Value, axis: int) -> ir.Value:
    """``x.shape[axis]`` as a 1-D INT64 tensor of one element (a constant when static)."""
    axis %= op.rank_of(x) or 1
    d = static_dims(x)[axis]
    if d is not None:
        return ints(op, [d])
    return shape_of(op, x, start=axis, end=axis + 1)


def one_d(op: Op, v: Any) -> ir.Value:
    """An int or 0-d/1-d INT64 Value as a 1-D INT64 tensor of one element."""
    if isinstance(v, ir.Value):
        v = v if v.dtype == ir.DataType.INT64 else op.Cast(v, to=ir.DataType.INT64)
        return op.Reshape(v, ints(op, [1]))
    return ints(op, [v])


def known_dtype(dtype: ir.DataType | None) -> ir.DataType:
    """``dtype``, which is mostly another Value's ``.dtype``: onnx_ir types that optional,
    and every Value translation makes has one. An unknown one is an error here, not a
    ``Cast`` without ``to`` in the model."""
    if dtype is None:
        raise TypeError("a converter needs the dtype of a Value whose dtype is unknown")
    return dtype


def scalar_of(op: Op, v: Any, dtype: ir.DataType | None) -> ir.Value:
    """A Python scalar or a 0-d Value as a 0-d Value of ``dtype``."""
    dtype = known_dtype(dtype)
    if isinstance(v, ir.Value):
        return v if v.dtype == dtype else op.Cast(v, to=dtype)
    if dtype == ir.DataType.BOOL:
        return op.constant(bool(v), dtype)
    # torch converts a float scalar to an integer dtype by truncation, as int() does.
    try:
        return op.constant(float(v) if dtype.is_floating_point() else int(v), dtype)
    except OverflowError as e:
        raise op.unsupported("value", v, f"not representable in {dtype.name} (torch refuses it too)") from e


def to_dtype(op: Op, x: ir.Value, dtype: ir.DataType | None) -> ir.Value:
    """``x`` cast to ``dtype`` when it is not already."""
    dtype = known_dtype(dtype)
    return x if x.dtype == dtype else op.Cast(x, to=dtype)


def normalize_dim(dim: int, rank: int) -> int:
    """A dim in ``[0, rank)`` (torch accepts -rank..rank-1; a 0-d tensor takes 0 and -1)."""
    return dim % rank if rank else 0


# onnxruntime's CPU kernels lack some types for some ops (measured with onnxruntime 1.31).
# Those ops only move or compare values, so computing them in a wider type and casting
# back is exact.
_WIDER = {
    ir.DataType.BFLOAT16: ir.DataType.FLOAT,
    ir.DataType.FLOAT16: ir.DataType.FLOAT,
    ir.DataType.INT8: ir.DataType.INT32,
    ir.DataType.INT16: ir.DataType.INT32,
    ir.DataType.UINT8: ir.DataType.INT32,
    ir.DataType.BOOL: ir.DataType.UINT8,
}
B, F16, I8, I16, U8, BOOL = (
    ir.DataType.BFLOAT16,
    ir.DataType.FLOAT16,
    ir.DataType.INT8,
    ir.DataType.INT16,
    ir.DataType.UINT8,
    ir.DataType.BOOL,
)
MISSING = {
    "Expand": {B},
    "Tile": {B},
    "Where": {B, I16, BOOL},
    "Trilu": {B, I8, I16, U8},
    "Pad": {B, I16},
    "TopK": {B, BOOL},
    "ScatterReduce": {B, F16, BOOL},
    "Div": {B},
}


def widen(op: Op, x: ir.Value, onnx_op: str) -> ir.Value:
    """``x`` cast to a type onnxruntime runs ``onnx_op`` on, if its own type is missing."""
    if x.dtype in MISSING[onnx_op]:
        return op.Cast(x, to=_WIDER[x.dtype])
    return x


def known_values(shape: ir.Value) -> list[int] | None:
    """The values of a 1-D INT64 ``shape`` when known at export: a constant, or the
    ``Shape`` of a value whose sizes are all static."""
    if shape.const_value is not None:
        return [int(v) for v in shape.const_value.numpy().reshape(-1)]
    node = shape.producer()
    if node is None or node.op_type != "Shape" or node.inputs[0] is None or node.inputs[0].shape is None:
        return None
    dims = [d for d in node.inputs[0].shape if isinstance(d, int)]
    if len(dims) != node.inputs[0].shape.rank():
        return None
    start, end = node.attributes.get("start"), node.attributes.get("end")
    return dims[slice(start.value if start else None, end.value if end else None)]


def expand_to(op: Op, x: ir.Value, shape: ir.Value) -> ir.Value:
    """``Expand(x, shape)`` in ``x``'s dtype."""
    target = known_values(shape)
    if target is not None and 0 in target:
        # An empty result. onnxruntime (1.32) drops an Expand of size-1 dims to a known
        # shape holding 0 as if it did nothing: expand to 1 there, then cut to 0.
        empty = [axis for axis, n in enumerate(target) if n == 0]
        full = expand_to(op, x, ints(op, [1 if n == 0 else n for n in target]))
        zeros = ints(op, [0] * len(empty))
        return op.Slice(full, zeros, zeros, ints(op, [axis - len(target) for axis in empty]))
    return to_dtype(op, op.Expand(widen(op, x, "Expand"), shape), x.dtype)


def reduce_over(
    op: Op, onnx_op: str, x: ir.Value, axes: list[int] | ir.Value | None, *, keepdims: int | bool
) -> ir.Value:
    """The Reduce* op ``onnx_op`` of ``x`` over ``axes`` (ints, a 1-D INT64 Value, or None
    for every axis) in the target opset's form: the axes an input from opset 18
    (``ReduceSum``: 13), an attribute before, where they must be known at export."""
    emit = getattr(op, onnx_op)
    if axes is None:
        return emit(x, keepdims=int(keepdims))
    if op.opset >= (13 if onnx_op == "ReduceSum" else 18):
        return emit(x, axes if isinstance(axes, ir.Value) else ints(op, axes), keepdims=int(keepdims))
    known = known_values(axes) if isinstance(axes, ir.Value) else [int(a) for a in axes]
    if known is None:
        raise op.unsupported(
            "dim",
            "computed in the graph",
            f"{onnx_op} takes its axes as an attribute before opset 18 (target: {op.opset})",
            since=18,
        )
    return emit(x, axes=known, keepdims=int(keepdims))


def shape_of(op: Op, x: ir.Value, *, start: int | None = None, end: int | None = None) -> ir.Value:
    """``x.shape[start:end]`` as a 1-D INT64 tensor: ``Shape`` takes ``start``/``end`` as
    attributes from opset 15, a ``Slice`` of the whole shape stands for them before."""
    bounds = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    if op.opset >= 15 or not bounds:
        return op.Shape(x, **bounds)
    sliced = op.Slice(op.Shape(x), ints(op, [start or 0]), ints(op, [INT64_MAX if end is None else end]))
    rank = op.rank_of(x)
    if rank is not None:  # what Shape's inference would know, for the ops downstream
        sliced.shape = ir.Shape([len(range(rank)[start:end])])
    return sliced
