"""Scattering: scatter, scatter_add, scatter_reduce, select_scatter, slice_scatter, masked_scatter.

An index outside [-n, n) stops onnxruntime's ScatterElements with an error, as torch
raises; a negative index, which torch rejects, counts from the end (see indexing.py).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from pt2onnx.plugin import converter

from ._common import is_nan
from ._dims import INT64_MAX, expand_to, ints, normalize_dim, one_d, scalar_of, size, to_dtype, widen


def _scatter(op, x, axis, index, updates, reduction="none"):
    if op.rank_of(x) == 0:
        one = ints(op, [1])
        flat = _scatter(op, op.Reshape(x, one), 0, op.Reshape(index, one), op.Reshape(updates, one), reduction)
        return op.Reshape(flat, ints(op, []))
    if reduction == "none":
        return op.ScatterElements(x, index, updates, axis=axis)
    data = widen(op, x, "ScatterReduce")
    out = op.ScatterElements(data, index, to_dtype(op, updates, data.dtype), axis=axis, reduction=reduction)
    return to_dtype(op, out, x.dtype)


def _updates(op, src, index, axis):
    """``src`` cut to ``index``'s shape (torch lets src be larger)."""
    if op.rank_of(src) == 0:
        return src
    same = list(src.shape) == list(index.shape) and all(isinstance(d, int) for d in src.shape)
    if same:
        return src
    dims = list(range(op.rank_of(src)))
    return op.Slice(src, ints(op, [0] * len(dims)), op.Shape(index), ints(op, dims))


def _axis(op, x, dim):
    return normalize_dim(dim, op.rank_of(x))


@converter("aten::scatter.src")
def scatter_src(op, self, dim, index, src):
    axis = _axis(op, self, dim)
    return _scatter(op, self, axis, index, to_dtype(op, _updates(op, src, index, axis), self.dtype))


@converter("aten::scatter.value")
def scatter_value(op, self, dim, index, value):
    updates = expand_to(op, scalar_of(op, value, self.dtype), op.Shape(index))
    return _scatter(op, self, _axis(op, self, dim), index, updates)


@converter("aten::scatter_add.default", since=16)
def scatter_add(op, self, dim, index, src):
    """``ScatterElements`` reduces (``reduction="add"``) from opset 16: before, duplicate indices cannot add up."""
    axis = _axis(op, self, dim)
    return _scatter(op, self, axis, index, to_dtype(op, _updates(op, src, index, axis), self.dtype), "add")


@converter("aten::scatter.reduce", "aten::scatter.value_reduce", since=16)
def scatter_with_reduce(op, self, dim, index, src, *, reduce):
    """torch's older ``scatter(..., reduce="add" | "multiply")``: ScatterElements reduces from opset 16."""
    axis = _axis(op, self, dim)
    if isinstance(src, ir.Value):
        updates = to_dtype(op, _updates(op, src, index, axis), self.dtype)
    else:
        updates = expand_to(op, scalar_of(op, src, self.dtype), op.Shape(index))
    return _scatter(op, self, axis, index, updates, {"add": "add", "multiply": "mul"}[reduce])


_REDUCTIONS = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min"}


def _identity(dtype, reduce):
    """The value that leaves ``reduce`` unchanged, for positions that must forget ``self``."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype == ir.DataType.BOOL:
        return reduce == "amin"
    if dtype.is_floating_point():
        return float("-inf") if reduce == "amax" else float("inf")
    info = np.iinfo(dtype.numpy())
    return int(info.min) if reduce == "amax" else int(info.max)


@converter("aten::scatter_reduce.two", since=16)
def scatter_reduce(op, self, dim, index, src, reduce, *, include_self=True):
    """``ScatterElements`` reduces by add and mul from opset 16, by max and min from 18."""
    if reduce in ("amax", "amin") and op.opset < 18:
        raise op.unsupported(
            "reduce",
            reduce,
            f"ONNX ScatterElements reduces by max/min from opset 18 (target: {op.opset})",
            since=18,
        )
    axis = _axis(op, self, dim)
    updates = to_dtype(op, _updates(op, src, index, axis), self.dtype)
    data = self
    if not include_self:
        # Scattered positions start from the reduction's identity instead of self.
        fill = expand_to(op, scalar_of(op, _identity(self.dtype, reduce), self.dtype), op.Shape(index))
        data = _scatter(op, self, axis, index, fill)
    if reduce in ("amax", "amin") and self.dtype.is_floating_point():
        return _with_nans(op, data, axis, index, updates, _scatter(op, data, axis, index, updates, _REDUCTIONS[reduce]))
    if reduce != "mean":
        return _scatter(op, data, axis, index, updates, _REDUCTIONS[reduce])
    total = _scatter(op, data, axis, index, updates, "add")
    ones = expand_to(op, op.constant(1, ir.DataType.INT64), op.Shape(index))
    start = expand_to(op, op.constant(1, ir.DataType.INT64), op.Shape(self))
    if not include_self:
        start = _scatter(op, start, axis, index, expand_to(op, op.constant(0, ir.DataType.INT64), op.Shape(index)))
    count = _scatter(op, start, axis, index, ones, "add")
    if self.dtype.is_floating_point():
        total = widen(op, total, "Div")
        return to_dtype(op, op.Div(total, op.Cast(count, to=total.dtype)), self.dtype)
    # torch divides integer sums with floor rounding.
    wide_total = op.Cast(total, to=ir.DataType.INT64)
    floor = op.Div(op.Sub(wide_total, op.Mod(wide_total, count)), count)
    return op.Cast(floor, to=self.dtype)


def _with_nans(op, data, axis, index, updates, reduced):
    """``reduced`` with NaN wherever torch's amax/amin put one: where ``data`` or a NaN
    update scattered there holds NaN (onnxruntime's max/min reduction may drop a NaN,
    depending on the order it meets it)."""
    f32 = ir.DataType.FLOAT
    flags = op.Cast(is_nan(op, updates), to=f32)
    zeros = expand_to(op, op.constant(0.0, f32), op.Shape(data))
    nan_update = op.Cast(_scatter(op, zeros, axis, index, flags, "max"), to=ir.DataType.BOOL)
    wide = widen(op, reduced, "Where")
    out = op.Where(op.Or(is_nan(op, data), nan_update), op.constant(float("nan"), wide.dtype), wide)
    return to_dtype(op, out, data.dtype)


@converter("aten::select_scatter.default")
def select_scatter(op, self, src, dim, index):
    axis = _axis(op, self, dim)
    updates = to_dtype(op, op.Unsqueeze(src, ints(op, [axis])), self.dtype)
    position = index if isinstance(index, ir.Value) else op.constant(int(index), ir.DataType.INT64)
    indices = expand_to(op, op.Reshape(position, ints(op, [1] * op.rank_of(self))), op.Shape(updates))
    return op.ScatterElements(self, indices, updates, axis=axis)


@converter("aten::slice_scatter.default")
def slice_scatter(op, self, src, dim=0, start=None, end=None, step=1):
    if src.shape is not None and 0 in src.shape:
        # Writing nothing leaves self as it is (Swin3D's shifted-window masks write empty
        # regions). The write would carry an empty constant, which OpenVINO misreads as a
        # scalar (docs/runtime_issues.md).
        return self
    rank = op.rank_of(self)
    axis = _axis(op, self, dim)
    # The positions the slice covers, clamped exactly as Slice clamps them.
    n = op.Squeeze(size(op, self, axis), ints(op, [0]))
    positions = op.Range(op.constant(0, ir.DataType.INT64), n, op.constant(1, ir.DataType.INT64))
    positions = op.Slice(
        positions,
        one_d(op, 0 if start is None else start),
        one_d(op, INT64_MAX if end is None else end),
        ints(op, [0]),
        one_d(op, step),
    )
    shape = [1] * rank
    shape[axis] = -1
    indices = expand_to(op, op.Reshape(positions, ints(op, shape)), op.Shape(src))
    return op.ScatterElements(self, indices, to_dtype(op, src, self.dtype), axis=axis)


@converter("aten::masked_scatter.default")
def masked_scatter(op, self, mask, source):
    # The i-th true position of the (broadcast) mask takes source's i-th element.
    if list(self.shape) != list(mask.shape):
        self = expand_to(op, self, op.Shape(mask))  # torch broadcasts self and mask together (Expand is two-way)
    flat_mask = op.Reshape(expand_to(op, mask, op.Shape(self)), ints(op, [-1]))
    order = op.CumSum(op.Cast(flat_mask, to=ir.DataType.INT64), op.constant(0, ir.DataType.INT64))
    position = op.Max(op.Sub(order, ints(op, [1])), ints(op, [0]))
    flat_source = to_dtype(op, op.Reshape(source, ints(op, [-1])), self.dtype)
    # Pad source by one element so reading position 0 of an empty source is defined.
    padded = op.Concat(flat_source, op.Reshape(scalar_of(op, 0, self.dtype), ints(op, [1])), axis=0)
    taken = op.Gather(padded, position, axis=0)
    data = widen(op, op.Reshape(self, ints(op, [-1])), "Where")
    out = op.Where(flat_mask, to_dtype(op, taken, data.dtype), data)
    return op.Reshape(to_dtype(op, out, self.dtype), op.Shape(self), allowzero=1)
