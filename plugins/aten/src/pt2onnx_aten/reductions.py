"""Reductions: sum, mean, prod, amax/amin, any, argmax/argmin, max/min along a dim, var, cumsum.

``dim`` of None or [] means every dim; a 0-d tensor reduces over its (no) dims. Every
ONNX Reduce* op takes its axes as an input from opset 18, the oldest target. Half
precision accumulates in float32, as torch does on CPU.
"""

from __future__ import annotations

from pt2onnx.plugin import converter

from ._common import FLOATS, D, as_dtype, axes, compute, rank

_ACCUMULATE = frozenset({D.FLOAT, D.DOUBLE, D.INT32, D.INT64})
_EXTREMES = FLOATS | {D.INT8, D.INT32, D.INT64, D.UINT8}
_ARG = FLOATS | {D.INT8, D.INT32, D.INT64, D.UINT8}


def _reduce(op, onnx_op, x, dims, keepdim):
    reduce = getattr(op, onnx_op)
    if dims is None:
        return reduce(x, keepdims=int(keepdim))
    return reduce(x, op.constant(dims), keepdims=int(keepdim))


def _accumulate(op, onnx_op, self, dim, keepdim):
    dims = axes(dim, rank(self))
    return compute(op, lambda x: _reduce(op, onnx_op, x, dims, keepdim), [self], op.output_dtype, _ACCUMULATE)


@converter("aten::sum.dim_IntList")
def sum_dim(op, self, dim, keepdim=False, *, dtype=None):
    return _accumulate(op, "ReduceSum", self, dim, keepdim)


@converter("aten::sum.default")
def sum_(op, self, *, dtype=None):
    return _accumulate(op, "ReduceSum", self, None, False)


def _mean(op, self, dim, keepdim):
    dims = axes(dim, rank(self))
    reduced = [d for i, d in enumerate(self.shape) if dims is None or i in dims]
    if 0 not in reduced:
        return _accumulate(op, "ReduceMean", self, dims, keepdim)
    # The mean of nothing is 0 / 0 = NaN in torch; ReduceMean gives 0.
    return compute(
        op, lambda x: op.Div(_reduce(op, "ReduceSum", x, dims, keepdim), 0), [self], op.output_dtype, _ACCUMULATE
    )


@converter("aten::mean.dim")
def mean_dim(op, self, dim, keepdim=False, *, dtype=None):
    return _mean(op, self, dim, keepdim)


@converter("aten::mean.default")
def mean(op, self, *, dtype=None):
    return _mean(op, self, None, False)


@converter("aten::prod.dim_int")
def prod_dim(op, self, dim, keepdim=False, *, dtype=None):
    return _accumulate(op, "ReduceProd", self, dim, keepdim)


@converter("aten::prod.default")
def prod(op, self, *, dtype=None):
    return _accumulate(op, "ReduceProd", self, None, False)


def _extreme(op, onnx_op, x, dims, keepdim):
    result = _reduce(op, onnx_op, x, dims, keepdim)
    if x.dtype not in FLOATS:
        return result
    # torch propagates NaN; onnxruntime's ReduceMax/ReduceMin skip it.
    # (ReduceMax runs on bool from opset 20 only: count as uint8.)
    has_nan = _reduce(op, "ReduceMax", op.Cast(op.IsNaN(x), to=D.UINT8), dims, keepdim)
    return op.Where(op.Cast(has_nan, to=D.BOOL), op.constant(float("nan"), x.dtype), result)


@converter("aten::amax.default")
def amax(op, self, dim=(), keepdim=False):
    dims = axes(dim, rank(self))
    return compute(op, lambda x: _extreme(op, "ReduceMax", x, dims, keepdim), [self], op.output_dtype, _EXTREMES)


@converter("aten::amin.default")
def amin(op, self, dim=(), keepdim=False):
    dims = axes(dim, rank(self))
    return compute(op, lambda x: _extreme(op, "ReduceMin", x, dims, keepdim), [self], op.output_dtype, _EXTREMES)


@converter("aten::any.default", "aten::any.dim", "aten::any.dims")
def any_(op, self, dim=None, keepdim=False):
    if dim is not None and not isinstance(dim, int) and len(dim) == 0:
        # Unlike the other reductions, any over an empty dim list reduces nothing.
        truth = as_dtype(op, self, D.BOOL)
        return op.Identity(truth) if op.output_dtype == D.BOOL else op.Cast(truth, to=op.output_dtype)
    # Count the true values: a sum is also right for zero-size dims (False).
    truth = op.Cast(as_dtype(op, self, D.BOOL), to=D.INT64)
    found = op.Greater(_reduce(op, "ReduceSum", truth, axes(dim, rank(self)), keepdim), 0)
    return as_dtype(op, found, op.output_dtype)


def _along_one_dim(op, self, dim, keepdim):
    """``self`` and the axis to reduce; flattened for dim=None and for 0-d tensors."""
    if dim is None or rank(self) == 0:
        return op.Reshape(self, op.constant([-1])), 0, False
    return self, dim % rank(self), keepdim


def _arg(op, onnx_op, self, dim, keepdim):
    x, axis, keep = _along_one_dim(op, self, dim, keepdim)
    index = compute(
        op, lambda v: getattr(op, onnx_op)(v, axis=axis, keepdims=int(keep)), [x], self.dtype, _ARG, cast_back=False
    )
    if dim is None and keepdim and rank(self) > 0:
        return op.Reshape(index, op.constant([1] * rank(self)))
    return index


@converter("aten::argmax.default")
def argmax(op, self, dim=None, keepdim=False):
    return _arg(op, "ArgMax", self, dim, keepdim)


@converter("aten::argmin.default")
def argmin(op, self, dim=None, keepdim=False):
    return _arg(op, "ArgMin", self, dim, keepdim)


def _extreme_along(op, reduce_op, arg_op, self, dim, keepdim):
    x, axis, keep = _along_one_dim(op, self, dim, keepdim)
    values = compute(op, lambda v: _extreme(op, reduce_op, v, [axis], keep), [x], self.dtype, _EXTREMES)
    return values, _arg(op, arg_op, self, dim, keepdim)


@converter("aten::max.dim")
def max_dim(op, self, dim, keepdim=False):
    return _extreme_along(op, "ReduceMax", "ArgMax", self, dim, keepdim)


@converter("aten::min.dim")
def min_dim(op, self, dim, keepdim=False):
    return _extreme_along(op, "ReduceMin", "ArgMin", self, dim, keepdim)


def _variance(op, self, dim, correction, keepdim):
    dims = axes(dim, rank(self))

    def var(x):
        mean = _reduce(op, "ReduceMean", x, dims, True)
        centered = op.Sub(x, mean)
        total = _reduce(op, "ReduceSum", op.Mul(centered, centered), dims, keepdim)
        shape = op.Shape(x)
        count = op.ReduceProd(shape if dims is None else op.Gather(shape, op.constant(dims)), keepdims=0)
        # torch divides by max(0, N - correction): inf or NaN when that is 0.
        divisor = op.Max(op.Sub(op.Cast(count, to=x.dtype), float(correction)), op.constant(0.0, x.dtype))
        return op.Div(total, divisor)

    return compute(op, var, [self], op.output_dtype, frozenset({D.FLOAT, D.DOUBLE}))


@converter("aten::var.correction")
def var_correction(op, self, dim=None, *, correction=None, keepdim=False):
    return _variance(op, self, dim, 1 if correction is None else correction, keepdim)


@converter("aten::var.dim")
def var_dim(op, self, dim, unbiased=True, keepdim=False):
    return _variance(op, self, dim, 1 if unbiased else 0, keepdim)


@converter("aten::cumsum.default")
def cumsum(op, self, dim, *, dtype=None):
    if rank(self) == 0:
        return as_dtype(op, op.Identity(self), op.output_dtype)
    axis = op.constant(dim % rank(self))
    return compute(op, lambda x: op.CumSum(x, axis), [self], op.output_dtype, _ACCUMULATE)
