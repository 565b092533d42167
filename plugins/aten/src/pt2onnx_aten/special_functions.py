"""Special functions ONNX expresses in a few nodes: erfc, erfinv, exp2, hypot, logaddexp, logaddexp2, signbit.

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


# Giles, "Approximating the erfinv function" (GPU Computing Gems Jade, 2011), single precision:
# a polynomial in w = -log(1 - y**2), one for w < 5 and one of sqrt(w) for the tails. Within
# 3e-7 of the exact value relative, where torch's float32 kernel is within 6e-8.
_ERFINV_CENTRAL = (
    2.81022636e-08,
    3.43273939e-07,
    -3.5233877e-06,
    -4.39150654e-06,
    0.00021858087,
    -0.00125372503,
    -0.00417768164,
    0.246640727,
    1.50140941,
)
_ERFINV_TAILS = (
    -0.000200214257,
    0.000100950558,
    0.00134934322,
    -0.00367342844,
    0.00573950773,
    -0.0076224613,
    0.00943887047,
    1.00167406,
    2.83297682,
)


def _horner(op, x, coefficients):
    result = op.constant(coefficients[0], x.dtype)
    for c in coefficients[1:]:
        result = op.Add(op.Mul(result, x), op.constant(c, x.dtype))
    return result


@converter("aten::erfinv.default")
def erfinv(op, self):
    def erfinv_(y):
        one = op.constant(1.0, y.dtype)
        w = op.Neg(op.Log(op.Mul(op.Sub(one, y), op.Add(one, y))))
        central = _horner(op, op.Sub(w, op.constant(2.5, y.dtype)), _ERFINV_CENTRAL)
        tails = _horner(op, op.Sub(op.Sqrt(w), op.constant(3.0, y.dtype)), _ERFINV_TAILS)
        x = op.Mul(op.Where(op.Less(w, op.constant(5.0, y.dtype)), central, tails), y)
        # +-1 give +-inf (the tail polynomial of an infinite w does not); |y| > 1 is NaN from the log.
        return op.Where(op.Equal(op.Abs(y), one), op.Mul(y, op.constant(math.inf, y.dtype)), x)

    # Single precision: a float64 input is refused by name rather than computed 1e-7 off.
    return compute(op, erfinv_, [self], op.output_dtype, FLOAT32_16)


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
