"""Cumulative ops along a dim: cummax, cummin, cumprod, logcumsumexp.

ONNX has CumSum only. Each of these compares every position with every earlier one:
the dim is moved last, the values are spread over a (prefix, position) square in which
position j takes part in prefix i when j <= i, and the square is reduced over j. Exact
for every dtype (no log/exp of signed values as for cumprod by CumSum of logs), at the
cost of n**2 elements per slice.

cummax/cummin follow torch: a NaN propagates to every later value, and the index is
the last position holding the running extreme (the last NaN once one was seen).
"""

from __future__ import annotations

import math

import numpy as np

from pt2onnx.plugin import converter

from ._common import FLOATS, D, as_dtype, is_inf, is_nan, kernel_dtype, rank
from ._dims import reduce_over, shape_of

_EXTREMES = FLOATS | {D.INT8, D.INT32, D.INT64, D.UINT8}
_PRODUCTS = frozenset({D.FLOAT, D.DOUBLE, D.INT32, D.INT64})


def _last(op, x, axis):
    """``x`` with ``axis`` moved last, and the permutation that moves it back."""
    r = rank(x)
    perm = [d for d in range(r) if d != axis] + [axis]
    if perm == list(range(r)):
        return x, None
    back = [perm.index(d) for d in range(r)]
    return op.Transpose(x, perm=perm), back


def _back(op, x, back):
    return x if back is None else op.Transpose(x, perm=back)


def _square(op, x):
    """(x spread as [..., 1, n], mask [n, n] with mask[i, j] = j <= i, positions j as [1, n])."""
    n = shape_of(op, x, start=-1)
    positions = op.Range(op.constant(0), op.Squeeze(n, op.constant([0])), op.constant(1))
    columns = op.Unsqueeze(positions, op.constant([0]))
    rows = op.Unsqueeze(positions, op.constant([1]))
    return op.Unsqueeze(x, op.constant([-2])), op.LessOrEqual(columns, rows), columns


def _lowest(dtype, largest):
    """The value that never wins a max (``largest``) or a min."""
    if dtype.is_floating_point():
        return -math.inf if largest else math.inf
    bounds = np.iinfo(dtype.numpy())
    return int(bounds.min) if largest else int(bounds.max)


def _cumulative_extreme(op, self, dim, largest):
    dtype = self.dtype
    if rank(self) == 0:
        return op.Identity(self), op.constant(0, D.INT64)
    wide = kernel_dtype(op, dtype, _EXTREMES)
    x, back = _last(op, as_dtype(op, self, wide), dim % rank(self))
    spread, mask, columns = _square(op, x)
    masked = op.Where(mask, spread, op.constant(_lowest(wide, largest), wide))
    axes = op.constant([-1])
    values = reduce_over(op, "ReduceMax" if largest else "ReduceMin", masked, axes, keepdims=0)
    best = op.Unsqueeze(values, axes)
    hit = op.Equal(spread, best)
    if wide.is_floating_point():
        # A NaN wins from where it stands on, and the last NaN is the index.
        nan = is_nan(op, spread)
        nan_seen = op.Cast(
            reduce_over(op, "ReduceMax", op.Cast(op.And(mask, nan), to=D.UINT8), axes, keepdims=0), to=D.BOOL
        )
        values = op.Where(nan_seen, op.constant(math.nan, wide), values)
        seen = op.Unsqueeze(nan_seen, axes)
        hit = op.Or(op.And(seen, nan), op.And(op.Not(seen), hit))  # onnxruntime has no bool Where
    index = reduce_over(op, "ReduceMax", op.Where(op.And(mask, hit), columns, op.constant(-1)), axes, keepdims=0)
    values = values if wide == dtype else op.Cast(values, to=dtype)
    return _back(op, values, back), _back(op, index, back)


@converter("aten::cummax.default")
def cummax(op, self, dim):
    return _cumulative_extreme(op, self, dim, largest=True)


@converter("aten::cummin.default")
def cummin(op, self, dim):
    return _cumulative_extreme(op, self, dim, largest=False)


@converter("aten::cumprod.default")
def cumprod(op, self, dim, *, dtype=None):
    out = op.output_dtype
    if rank(self) == 0:
        return as_dtype(op, op.Identity(self), out)
    wide = kernel_dtype(op, out, _PRODUCTS)
    if wide == D.FLOAT:
        # torch's CPU kernel multiplies float32 in float64 (its accumulate type): a prefix that
        # underflows float32 may still recover, and 0 * inf is no NaN where the prefix is not 0.
        wide = D.DOUBLE
    x, back = _last(op, as_dtype(op, self, wide), dim % rank(self))
    spread, mask, _ = _square(op, x)
    product = reduce_over(op, "ReduceProd", op.Where(mask, spread, op.constant(1, wide)), [-1], keepdims=0)
    return _back(op, as_dtype(op, product, out), back)


@converter("aten::logcumsumexp.default")
def logcumsumexp(op, self, dim):
    out = op.output_dtype
    if rank(self) == 0:
        return op.Identity(self)
    wide = kernel_dtype(op, out, frozenset({D.FLOAT, D.DOUBLE}))
    x, back = _last(op, as_dtype(op, self, wide), dim % rank(self))
    spread, mask, _ = _square(op, x)
    masked = op.Where(mask, spread, op.constant(-math.inf, wide))
    axes = op.constant([-1])
    # log(sum(exp(x - m))) + m with m each prefix's max (0 where it is infinite, so that
    # an all -inf prefix gives -inf and a +inf one +inf, as in torch).
    peak = reduce_over(op, "ReduceMax", masked, axes, keepdims=1)
    peak = op.Where(is_inf(op, peak), op.constant(0.0, wide), peak)
    total = op.ReduceSum(op.Exp(op.Sub(masked, peak)), axes, keepdims=1)
    result = op.Squeeze(op.Add(op.Log(total), peak), axes)
    return _back(op, as_dtype(op, result, out), back)
