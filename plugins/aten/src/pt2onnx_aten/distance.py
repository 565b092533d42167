"""Distances (cdist, pdist) and native_dropout's inference form."""

from __future__ import annotations

import math

from pt2onnx.plugin import converter

from ._common import FLOATS, compute, is_nan, reduce_extreme
from ._dims import reduce_over, shape_of


def _norm(op, diff, p, axis, *, nan_max):
    """The p-norm of ``diff`` over ``axis`` (p = 0 counts non-zeros, p = inf takes the max).

    NaN as torch's kernels treat it: p = 0 counts it as NaN (``min(ceil(|d|), 1)``);
    p = inf propagates it where ``nan_max`` (pdist's vectorized maximum) and skips it
    otherwise (cdist's ``std::max`` from 0, so an all-NaN row gives 0).
    """
    axes = op.constant([axis])
    if p == 0:
        nonzero = op.Cast(op.Not(op.Equal(diff, op.constant(0.0, diff.dtype))), to=diff.dtype)
        return op.ReduceSum(op.Where(is_nan(op, diff), diff, nonzero), axes, keepdims=0)
    magnitude = op.Abs(diff)
    if math.isinf(p):
        if nan_max:
            return reduce_extreme(op, "ReduceMax", magnitude, [axis], False)
        zero = op.constant(0.0, diff.dtype)
        return reduce_over(op, "ReduceMax", op.Where(is_nan(op, magnitude), zero, magnitude), axes, keepdims=0)
    if p == 1:
        return op.ReduceSum(magnitude, axes, keepdims=0)
    if p == 2:
        return op.Sqrt(op.ReduceSum(op.Mul(diff, diff), axes, keepdims=0))
    powered = op.Pow(magnitude, op.constant(float(p), diff.dtype))
    return op.Pow(op.ReduceSum(powered, axes, keepdims=0), op.constant(1.0 / p, diff.dtype))


def _pairwise(op, x1, x2, p, *, nan_max):
    # (*, P, 1, M) - (*, 1, R, M) -> (*, P, R, M), reduced over M.
    diff = op.Sub(op.Unsqueeze(x1, op.constant([-2])), op.Unsqueeze(x2, op.constant([-3])))
    return _norm(op, diff, p, -1, nan_max=nan_max)


@converter("aten::_cdist_forward.default", "aten::cdist.default")
def cdist(op, x1, x2, p=2.0, compute_mode=None):
    # compute_mode only picks torch's algorithm (matmul or direct); both give these distances.
    return compute(op, lambda a, b: _pairwise(op, a, b, p, nan_max=False), [x1, x2], op.output_dtype, FLOATS)


@converter("aten::_pdist_forward.default", "aten::pdist.default")
def pdist(op, self, p=2.0):
    def emit(x):
        dist = _pairwise(op, x, x, p, nan_max=True)
        # Pairs i < j in row-major order, as torch lists them.
        n = op.Squeeze(shape_of(op, x, start=0, end=1))
        index = op.Range(op.constant(0), n, op.constant(1))
        upper = op.Less(op.Unsqueeze(index, op.constant([1])), op.Unsqueeze(index, op.constant([0])))
        return op.GatherND(dist, op.Transpose(op.NonZero(upper), perm=[1, 0]))

    return compute(op, emit, [self], op.output_dtype, FLOATS)


@converter("aten::native_dropout.default")
def native_dropout(op, input, p, train):
    keep_all = op.Expand(op.constant(True), op.Shape(input))
    if train is False or p == 0:
        return op.Identity(input), keep_all
    if p == 1:
        # Everything is dropped: deterministic. torch multiplies by the all-zero mask, so
        # inf and NaN become NaN.
        dropped = compute(op, lambda x: op.Mul(x, op.constant(0.0, x.dtype)), [input], input.dtype, FLOATS)
        return dropped, op.Not(keep_all)
    raise op.unsupported("train", train, "dropout in training mode is random", hint="call model.eval()")
