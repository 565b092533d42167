"""Histograms: ``histc``, as torch's CPU kernel bins (linear interpolation, truncated).

An element ``x`` in ``[lo, hi]`` goes to bin ``trunc((x - lo) * bins / (hi - lo))``, the
last bin also taking ``hi``; NaN and elements outside are skipped. ``min == max`` takes
the range from the data; an empty range is widened as torch's ``bins_edges_correction``
does: to the next float of the dtype or by 1, whichever is further (by 1 for half
precision). Each step is rounded to the input's dtype, as torch computes it; the counts
are accumulated with ``ScatterElements(reduction="add")``.
"""

from __future__ import annotations

import numpy as np

from pt2onnx.plugin import converter

from ._common import HALVES, D, is_inf


@converter("aten::histc.default", since=16)
def histc(op, self, bins=100, min=0, max=0):
    dtype = op.output_dtype
    if dtype not in (D.FLOAT, D.DOUBLE, *HALVES):
        raise op.unsupported("self", dtype.name, "torch.histc takes floating-point tensors only")
    # Half precision computes in float32, rounding every step back to the dtype as torch's Half arithmetic does.
    wide = D.FLOAT if dtype in HALVES else dtype

    def rounded(value):
        return op.Cast(op.Cast(value, to=dtype), to=wide) if wide != dtype else value

    x = op.Reshape(self, op.constant([-1]))
    x = op.Cast(x, to=wide) if wide != dtype else x
    if min == max:
        lo, hi = _data_range(op, x, dtype)
    else:
        lo, hi = op.constant(float(min), D.DOUBLE), op.constant(float(max), D.DOUBLE)
    # torch keeps the edges in float64, then in the input's dtype (its linspace of bins).
    lo, hi = (_edge(op, v, dtype, wide) for v in (lo, hi))
    inside = op.And(op.GreaterOrEqual(x, lo), op.LessOrEqual(x, hi))
    span = rounded(op.Sub(hi, lo))
    if dtype not in HALVES:
        # torch takes the edges from a linspace, whose step overflows to inf when the span does:
        # its edges are then NaN and no element is counted.
        inside = op.And(inside, op.Not(is_inf(op, span)))
    scaled = rounded(op.Mul(rounded(op.Sub(x, lo)), op.constant(float(bins), wide)))
    position = rounded(op.Div(scaled, span))
    # Skipped elements (NaN, out of range) go to bin 0 with weight 0; the last bin takes ``hi``.
    index = op.Cast(op.Floor(op.Where(inside, position, op.constant(0.0, wide))), to=D.INT64)
    index = op.Min(index, op.constant(bins - 1, D.INT64))
    # torch has no defined bin where the edges meet in the dtype (0 / 0): keep the index in range.
    index = op.Max(index, op.constant(0, D.INT64))
    counts = op.ScatterElements(
        op.constant([0.0] * bins, D.FLOAT), index, op.Cast(inside, to=D.FLOAT), axis=0, reduction="add"
    )
    return op.Cast(counts, to=dtype) if dtype != D.FLOAT else counts


def _data_range(op, x, dtype):
    """The data's min and max in float64, widened as torch widens an empty range."""
    lo = op.Cast(op.ReduceMin(x, keepdims=0), to=D.DOUBLE)
    hi = op.Cast(op.ReduceMax(x, keepdims=0), to=D.DOUBLE)
    same = op.Equal(lo, hi)
    one = op.constant(1.0, D.DOUBLE)
    wide_lo, wide_hi = op.Sub(lo, one), op.Add(hi, one)
    if dtype in _FORMATS:
        wide_lo = op.Min(wide_lo, op.Neg(_next_up(op, op.Neg(lo), dtype)))
        wide_hi = op.Max(wide_hi, _next_up(op, hi, dtype))
    return op.Where(same, wide_lo, lo), op.Where(same, wide_hi, hi)


#: Mantissa bits and smallest normal exponent of the dtypes torch widens an empty range to the next float of.
_FORMATS = {D.FLOAT: (23, -126), D.DOUBLE: (52, -1022)}
_LARGEST = {D.FLOAT: float(np.finfo(np.float32).max), D.DOUBLE: float(np.finfo(np.float64).max)}


def _next_up(op, value, dtype):
    """The next float of ``dtype`` above ``value`` (a float64 holding a ``dtype`` value), in float64.

    ONNX has no nextafter; the gaps between floats are powers of two, found from the exponent.
    """
    bits, lowest = _FORMATS[dtype]
    two = op.constant(2.0, D.DOUBLE)
    magnitude = op.Abs(value)
    # floor(log2 |value|), corrected by one where Log rounds across a power of two (-inf for 0).
    exponent = op.Floor(op.Div(op.Log(magnitude), op.constant(0.6931471805599453, D.DOUBLE)))
    exponent = op.Where(op.Greater(op.Pow(two, exponent), magnitude), op.Sub(exponent, 1.0), exponent)
    exponent = op.Where(op.LessOrEqual(op.Pow(two, op.Add(exponent, 1.0)), magnitude), op.Add(exponent, 1.0), exponent)
    exponent = op.Max(exponent, op.constant(float(lowest), D.DOUBLE))  # subnormals share the smallest gap
    gap = op.Pow(two, op.Sub(exponent, float(bits)))
    # Toward zero from a negative power of two, the gap below it is half the one above.
    power = op.And(op.Equal(magnitude, op.Pow(two, exponent)), op.Greater(exponent, float(lowest)))
    below = op.Where(power, op.Div(gap, 2.0), gap)
    up = op.Where(op.GreaterOrEqual(value, 0.0), op.Add(value, gap), op.Add(value, below))
    # torch steps toward the dtype's largest float (std::nexttoward), so that one stays put.
    return op.Min(up, op.constant(_LARGEST[dtype], D.DOUBLE))


def _edge(op, value, dtype, wide):
    edge = op.Cast(value, to=dtype)
    return op.Cast(edge, to=wide) if wide != dtype else edge
