"""Reductions: sum, mean, prod, amax/amin, any, argmax/argmin, max/min along a dim, var, cumsum.

``dim`` of None or [] means every dim; a 0-d tensor reduces over its (no) dims. ONNX
Reduce* ops take their axes as an input from opset 18 (ReduceSum: 13) and as an
attribute before; ``reduce_over`` emits the target opset's form. Half precision
accumulates in float32, as torch does on CPU.

torch's numerics where onnxruntime's differ:

* NaN: torch's max/min reductions propagate it (amax/amin, max/min along a dim) and its
  argmax/argmin (and the indices of max/min) point at the first NaN; onnxruntime's
  ReduceMax/ArgMax skip it. Measured on a (64, 1000) float32 input, dim 1: argmax 1 -> 6
  nodes, max.dim 7 -> 9 nodes (the NaN test is shared with the values).
* Integer sums and products wrap around in torch (``tensor([2**62] * 3).sum()`` is
  -2**62). onnxruntime's integer ReduceSum and ReduceProd accumulate in floating point:
  they saturate on overflow and round values above 2**53 (a 0-d int64 sum can come back
  changed). Integer sums are therefore the last element of a CumSum (exact, wrapping),
  integer products a pairwise Mul in a Loop of log2(n) halvings (exact, wrapping).
  Measured (64, 1000) int64, dim 1: sum 1 -> 3 nodes, prod 1 -> 20 nodes (a Loop);
  latencies in the converter comments. cumsum's CumSum wraps as torch does; mean has no
  integer form in torch.
"""

from __future__ import annotations

from pt2onnx.plugin import converter

from ._common import FLOATS, INTS, D, as_dtype, axes, compute, is_nan, rank, reduce_extreme
from ._dims import reduce_over, shape_of

_ACCUMULATE = frozenset({D.FLOAT, D.DOUBLE, D.INT32, D.INT64})
_LAST = 2**62  # a Slice end past any dim
_EXTREMES = FLOATS | {D.INT8, D.INT32, D.INT64, D.UINT8}
_ARG = FLOATS | {D.INT8, D.INT32, D.INT64, D.UINT8}


def _reduce(op, onnx_op, x, dims, keepdim):
    return reduce_over(op, onnx_op, x, dims, keepdims=keepdim)


def _static_zero(x):
    """Whether a dim is statically 0: the result is empty, or all 0 (sum) or 1 (product),
    which ReduceSum/ReduceProd give exactly."""
    return any(isinstance(d, int) and d == 0 for d in x.shape)


def _wrapping_sum(op, x, dims, keepdim):
    """An exact integer sum that wraps like torch: the last element of a CumSum along each
    reduced dim (all dims at once through a flat view)."""
    count = rank(x)
    if count == 0:
        return op.Identity(x)
    if _static_zero(x):
        return _reduce(op, "ReduceSum", x, dims, keepdim)
    last = op.constant([-1])

    def running_total(v, axis):
        axis_ = op.constant([axis])
        return op.Slice(op.CumSum(v, op.constant(axis)), last, op.constant([_LAST]), axis_)

    if dims is None or sorted(dims) == list(range(count)):
        total = running_total(op.Reshape(x, last), 0)
        return op.Reshape(total, op.constant([1] * count if keepdim else [], D.INT64))
    for axis in dims:
        x = running_total(x, axis)
    return x if keepdim else op.Squeeze(x, op.constant(sorted(dims)))


def _wrapping_product(op, x, dims, keepdim):
    """An exact integer product that wraps like torch: the reduced dims flattened into
    rows, multiplied pairwise (an odd count padded with a row of ones) in a Loop that
    halves them until one is left: log2(n) iterations."""
    count = rank(x)
    if count == 0:
        return op.Identity(x)
    if _static_zero(x):
        return _reduce(op, "ReduceProd", x, dims, keepdim)
    reduced = list(range(count)) if dims is None else sorted(dims)
    kept = [d for d in range(count) if d not in reduced]
    if reduced + kept != list(range(count)):
        x = op.Transpose(x, perm=reduced + kept)
    kept_shape = shape_of(op, x, start=len(reduced))
    rows = op.Reshape(x, op.Concat(op.constant([-1]), kept_shape, axis=0))
    dtype, name = x.dtype, op.node.name
    one, zero, two = op.constant(1, dtype), op.constant([0]), op.constant([2])
    first_axis = op.constant([0])

    def more_than_one(builder, v):
        return builder.Greater(builder.Squeeze(shape_of(builder, v, start=0, end=1), first_axis), op.constant(1))

    other_axes = op.constant([0] * len(kept), D.INT64)

    def halve(sub, _iteration, _cond, v):
        # Pad without axes and two Slices rather than Split(num_outputs=2): any opset.
        count = shape_of(sub, v, start=0, end=1)
        odd = sub.Mod(count, two)
        even = sub.Pad(v, sub.Concat(zero, other_axes, odd, other_axes, axis=0), one)
        half = sub.Div(sub.Add(count, odd), two)
        low = sub.Slice(even, zero, half, first_axis)
        high = sub.Slice(even, half, op.constant([_LAST]), first_axis)
        product = sub.Mul(low, high)
        return [more_than_one(sub, product), product]

    body_inputs = [
        op.value(f"{name}.iteration", D.INT64, []),
        op.value(f"{name}.cond_in", D.BOOL, []),
        op.value(f"{name}.rows", dtype, None),
    ]
    body = op.subgraph(halve, body_inputs, name=f"{name}.halve")
    product = op.Squeeze(op.Loop(None, more_than_one(op, rows), rows, body=body), first_axis)
    return op.Unsqueeze(product, op.constant(reduced)) if keepdim else product


def _accumulate(op, onnx_op, self, dim, keepdim):
    dims = axes(dim, rank(self))

    def reduce(x):
        if x.dtype in INTS and onnx_op == "ReduceSum":
            return _wrapping_sum(op, x, dims, keepdim)
        if x.dtype in INTS and onnx_op == "ReduceProd":
            return _wrapping_product(op, x, dims, keepdim)
        return _reduce(op, onnx_op, x, dims, keepdim)

    return compute(op, reduce, [self], op.output_dtype, _ACCUMULATE)


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


@converter("aten::amax.default")
def amax(op, self, dim=(), keepdim=False):
    dims = axes(dim, rank(self))
    return compute(op, lambda x: reduce_extreme(op, "ReduceMax", x, dims, keepdim), [self], op.output_dtype, _EXTREMES)


@converter("aten::amin.default")
def amin(op, self, dim=(), keepdim=False):
    dims = axes(dim, rank(self))
    return compute(op, lambda x: reduce_extreme(op, "ReduceMin", x, dims, keepdim), [self], op.output_dtype, _EXTREMES)


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


@converter("aten::_is_all_true.default")
def is_all_true(op, self):
    # torch.distributions validates its arguments with it (Gemma3n's MLP builds a Normal).
    # No false value, counted: True for an empty tensor too.
    falses = op.Cast(op.Not(as_dtype(op, self, D.BOOL)), to=D.INT64)
    return op.Equal(_reduce(op, "ReduceSum", falses, axes(None, rank(self)), False), 0)


def _along_one_dim(op, self, dim, keepdim):
    """``self`` and the axis to reduce; flattened for dim=None and for 0-d tensors."""
    if dim is None or rank(self) == 0:
        return op.Reshape(self, op.constant([-1])), 0, False
    return self, dim % rank(self), keepdim


def _arg(op, onnx_op, self, dim, keepdim):
    x, axis, keep = _along_one_dim(op, self, dim, keepdim)

    def arg(v):
        index = getattr(op, onnx_op)(v, axis=axis, keepdims=int(keep))
        if v.dtype not in FLOATS:
            return index
        # torch points at the first NaN (onnxruntime's ArgMax/ArgMin skip NaN).
        nan = op.Cast(is_nan(op, v), to=D.UINT8)
        has_nan = op.Cast(reduce_over(op, "ReduceMax", nan, [axis], keepdims=int(keep)), to=D.BOOL)
        return op.Where(has_nan, op.ArgMax(nan, axis=axis, keepdims=int(keep)), index)

    index = compute(op, arg, [x], self.dtype, _ARG, cast_back=False)
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
    values = compute(op, lambda v: reduce_extreme(op, reduce_op, v, [axis], keep), [x], self.dtype, _EXTREMES)
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

    # torch's CPU kernel (Welford) accumulates every float dtype in float64: the squares of
    # tiny values, which underflow in float32, still count.
    return as_dtype(op, var(as_dtype(op, self, D.DOUBLE)), op.output_dtype)


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
