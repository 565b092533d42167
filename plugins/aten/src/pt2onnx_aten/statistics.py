"""Statistics of a whole tensor or along dims: max/min of everything, var_mean, std_mean, median.

NaN propagates as in torch: the max, min and median of values holding a NaN are NaN (and
median's index is the first NaN's). median is the lower of the two middle values; its
index among equal values is the first one (ONNX TopK's order; torch leaves it unspecified).
"""

from __future__ import annotations

import math

from pt2onnx.plugin import converter

from ._common import FLOATS, D, as_dtype, axes, compute, is_nan, kernel_dtype, rank
from ._dims import reduce_over, shape_of

_EXTREMES = FLOATS | {D.INT8, D.INT32, D.INT64, D.UINT8}
_SORTABLE = frozenset({D.FLOAT, D.DOUBLE, D.INT32, D.INT64})


def _with_nan(op, x, reduced, axes_value, keepdims):
    """``reduced``, NaN wherever the values it reduced held a NaN."""
    if x.dtype not in FLOATS:
        return reduced
    flags = op.Cast(is_nan(op, x), to=D.UINT8)
    found = reduce_over(op, "ReduceMax", flags, axes_value, keepdims=keepdims)
    return op.Where(op.Cast(found, to=D.BOOL), op.constant(math.nan, x.dtype), reduced)


def _whole(op, onnx_op, self):
    reduce = lambda x: _with_nan(op, x, getattr(op, onnx_op)(x, keepdims=0), None, 0)  # noqa: E731
    return compute(op, reduce, [self], op.output_dtype, _EXTREMES)


@converter("aten::max.default")
def max_(op, self):
    return _whole(op, "ReduceMax", self)


@converter("aten::min.default")
def min_(op, self):
    return _whole(op, "ReduceMin", self)


def _var_mean(op, self, dim, correction, keepdim):
    dims = axes(dim, rank(self))

    def moments(x):
        reduce_axes = None if dims is None else op.constant(dims)

        def sum_(v, keep):
            return (
                op.ReduceSum(v, keepdims=keep) if reduce_axes is None else op.ReduceSum(v, reduce_axes, keepdims=keep)
            )

        shape = op.Shape(x)
        count = op.Cast(op.ReduceProd(shape if dims is None else op.Gather(shape, reduce_axes), keepdims=0), to=x.dtype)
        # sum / count rather than ReduceMean: the mean of nothing is NaN in torch.
        mean = op.Div(sum_(x, 1), count)
        centered = op.Sub(x, mean)
        divisor = op.Max(op.Sub(count, float(correction)), op.constant(0.0, x.dtype))
        var = op.Div(sum_(op.Mul(centered, centered), keepdim), divisor)
        if not keepdim:
            mean = op.Reshape(mean, op.Shape(var))
        return var, mean

    wide = kernel_dtype(op, op.output_dtype, frozenset({D.FLOAT, D.DOUBLE}))
    var, mean = moments(as_dtype(op, self, wide))
    return var, mean, wide


def _narrow(op, value, wide):
    return value if wide == op.output_dtype else op.Cast(value, to=op.output_dtype)


@converter("aten::var_mean.correction")
def var_mean(op, self, dim=None, *, correction=None, keepdim=False):
    var, mean, wide = _var_mean(op, self, dim, 1 if correction is None else correction, keepdim)
    return _narrow(op, var, wide), _narrow(op, mean, wide)


@converter("aten::std_mean.correction")
def std_mean(op, self, dim=None, *, correction=None, keepdim=False):
    var, mean, wide = _var_mean(op, self, dim, 1 if correction is None else correction, keepdim)
    return _narrow(op, op.Sqrt(var), wide), _narrow(op, mean, wide)


def _lower_median(op, x, axis, keepdim):
    """Value and index of the lower median of ``x`` along ``axis`` (NaN first if any)."""
    wide = kernel_dtype(op, x.dtype, _SORTABLE)
    v = as_dtype(op, x, wide)
    n = shape_of(op, v, start=axis, end=axis + 1)
    k = op.Add(op.Div(op.Sub(n, 1), 2), 1)  # (n - 1) // 2 + 1 smallest: n >= 1 here
    finite = v
    if wide.is_floating_point():
        # TopK orders NaN as it likes: sort them as +inf, then put NaN back where there was one.
        finite = op.Where(is_nan(op, v), op.constant(math.inf, wide), v)
    values, indices = op.TopK(finite, k, axis=axis, largest=0, sorted=1, _outputs=2)
    last = op.Sub(k, 1)
    value = op.Gather(values, op.Squeeze(last, op.constant([0])), axis=axis)
    index = op.Gather(indices, op.Squeeze(last, op.constant([0])), axis=axis)
    if wide.is_floating_point():
        nan = is_nan(op, v)
        has_nan = op.Cast(reduce_over(op, "ReduceMax", op.Cast(nan, to=D.UINT8), [axis], keepdims=0), to=D.BOOL)
        first_nan = op.ArgMax(op.Cast(nan, to=D.UINT8), axis=axis, keepdims=0, select_last_index=0)
        value = op.Where(has_nan, op.constant(math.nan, wide), value)
        index = op.Where(has_nan, first_nan, index)
    if keepdim:
        value, index = op.Unsqueeze(value, op.constant([axis])), op.Unsqueeze(index, op.constant([axis]))
    return as_dtype(op, value, x.dtype), index


@converter("aten::median.default")
def median(op, self):
    flat = op.Reshape(self, op.constant([-1]))
    value, _ = _lower_median(op, flat, 0, False)
    return value


@converter("aten::median.dim")
def median_dim(op, self, dim, keepdim=False):
    if rank(self) == 0:
        return op.Identity(self), op.constant(0, D.INT64)
    return _lower_median(op, self, dim % rank(self), keepdim)
