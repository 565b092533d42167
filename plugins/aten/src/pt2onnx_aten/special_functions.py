"""Special functions ONNX expresses in a few nodes: erfc, exp2, hypot, logaddexp, logaddexp2, signbit.

torch's reference implementations of these are single prims no plugin converts, so they
need converters. Integer inputs compute in torch's output dtype (float32); half
precision computes in float32 and is rounded back, as torch does on CPU.
"""

from __future__ import annotations

import math

from pt2onnx.plugin import converter

from ._common import FLOAT32_16, FLOATS, INTS, D, compute, is_inf, is_nan

_LN2 = math.log(2.0)


@converter("aten::erfc.default", "aten::special_erfc.default")
def erfc(op, self):
    return compute(op, lambda x: op.Sub(op.constant(1.0, x.dtype), op.Erf(x)), [self], op.output_dtype, FLOAT32_16)


@converter("aten::exp2.default", "aten::special_exp2.default")
def exp2(op, self):
    return compute(op, lambda x: op.Pow(op.constant(2.0, x.dtype), x), [self], op.output_dtype, FLOATS)


def _any_nan(op, a, b):
    return op.Or(is_nan(op, a), is_nan(op, b))


@converter("aten::hypot.default")
def hypot(op, self, other):
    def hypot_(a, b):
        # max * sqrt(1 + (min/max)**2): no overflow where a**2 + b**2 would; inf wins over NaN, as in C.
        a, b = op.Abs(a), op.Abs(b)
        big, small = op.Max(a, b), op.Min(a, b)
        zero = op.constant(0.0, a.dtype)
        ratio = op.Where(op.Equal(big, zero), zero, op.Div(small, big))
        result = op.Mul(big, op.Sqrt(op.Add(op.constant(1.0, a.dtype), op.Mul(ratio, ratio))))
        result = op.Where(_any_nan(op, a, b), op.constant(math.nan, a.dtype), result)
        return op.Where(op.Or(is_inf(op, a), is_inf(op, b)), op.constant(math.inf, a.dtype), result)

    return compute(op, hypot_, [self, other], op.output_dtype, FLOATS)


def _log_add_exp(base_log):
    def convert(op, self, other):
        def log_add(a, b):
            # max + log(1 + base**-|a - b|); equal infinities give themselves (their difference is NaN).
            big = op.Max(a, b)
            gap = op.Neg(op.Abs(op.Sub(a, b)))
            base = op.constant(math.exp(base_log), a.dtype)
            result = op.Add(big, op.Div(op.Log(op.Add(op.constant(1.0, a.dtype), op.Pow(base, gap))), base_log))
            result = op.Where(op.And(op.Equal(a, b), is_inf(op, a)), a, result)
            return op.Where(_any_nan(op, a, b), op.constant(math.nan, a.dtype), result)

        return compute(op, log_add, [self, other], op.output_dtype, FLOATS)

    return convert


logaddexp = converter("aten::logaddexp.default")(_log_add_exp(1.0))
logaddexp2 = converter("aten::logaddexp2.default")(_log_add_exp(_LN2))


@converter("aten::signbit.default")
def signbit(op, self):
    dtype = self.dtype
    if dtype in INTS or dtype == D.BOOL:
        negative = lambda x: op.Less(x, op.constant(0, x.dtype))  # noqa: E731
        return compute(op, negative, [self], dtype, frozenset({D.INT32, D.INT64}), cast_back=False)

    def sign_bit(x):
        # -0.0 has its sign bit set: 1 / -0.0 is -inf. (The sign bit of a NaN cannot be read
        # in ONNX without a bit cast; NaN counts as positive.)
        zero = op.constant(0.0, x.dtype)
        negative_zero = op.And(op.Equal(x, zero), op.Less(op.Reciprocal(x), zero))
        return op.Or(op.Less(x, zero), negative_zero)

    return compute(op, sign_bit, [self], dtype, FLOATS, cast_back=False)
