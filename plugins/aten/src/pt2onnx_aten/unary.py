"""Element-wise math of one tensor: abs, exp, log, trigonometry, rounding, atan2.

Integer inputs of the floating-point functions compute in torch's output dtype (float32).
onnxruntime runs most of these in float32/float16 only: bfloat16 computes in float32 and
is rounded back (as torch does on CPU); float64 raises where onnxruntime has no kernel.
"""

from __future__ import annotations

import math

from pt2onnx.plugin import converter

from ._common import FLOAT32_16, FLOATS, INTS, NUMBERS, D, compute, is_inf, is_nan, truncate


def _float_function(onnx_op, supported):
    def convert(op, self):
        return compute(op, getattr(op, onnx_op), [self], op.output_dtype, supported)

    return convert


exp = converter("aten::exp.default")(_float_function("Exp", FLOATS))
log = converter("aten::log.default")(_float_function("Log", FLOATS))
sqrt = converter("aten::sqrt.default")(_float_function("Sqrt", FLOATS))
reciprocal = converter("aten::reciprocal.default")(_float_function("Reciprocal", FLOATS))
sigmoid = converter("aten::sigmoid.default")(_float_function("Sigmoid", FLOATS))
tanh = converter("aten::tanh.default")(_float_function("Tanh", FLOATS))
sin = converter("aten::sin.default")(_float_function("Sin", FLOATS))
cos = converter("aten::cos.default")(_float_function("Cos", FLOATS))
tan = converter("aten::tan.default")(_float_function("Tan", FLOAT32_16))
asin = converter("aten::asin.default")(_float_function("Asin", FLOAT32_16))
acos = converter("aten::acos.default")(_float_function("Acos", FLOAT32_16))
atan = converter("aten::atan.default")(_float_function("Atan", FLOAT32_16))
sinh = converter("aten::sinh.default")(_float_function("Sinh", FLOAT32_16))
cosh = converter("aten::cosh.default")(_float_function("Cosh", FLOAT32_16))
asinh = converter("aten::asinh.default")(_float_function("Asinh", FLOAT32_16))
acosh = converter("aten::acosh.default")(_float_function("Acosh", FLOAT32_16))
atanh = converter("aten::atanh.default")(_float_function("Atanh", FLOAT32_16))
erf = converter("aten::erf.default")(_float_function("Erf", FLOAT32_16))


@converter("aten::expm1.default")
def expm1(op, self):
    return compute(op, lambda x: op.Sub(op.Exp(x), 1), [self], op.output_dtype, FLOATS)


@converter("aten::log1p.default")
def log1p(op, self):
    return compute(op, lambda x: op.Log(op.Add(x, 1)), [self], op.output_dtype, FLOATS)


def _log_base(base):
    def convert(op, self):
        return compute(op, lambda x: op.Div(op.Log(x), math.log(base)), [self], op.output_dtype, FLOATS)

    return convert


log2 = converter("aten::log2.default")(_log_base(2.0))
log10 = converter("aten::log10.default")(_log_base(10.0))


@converter("aten::rsqrt.default")
def rsqrt(op, self):
    return compute(op, lambda x: op.Reciprocal(op.Sqrt(x)), [self], op.output_dtype, FLOATS)


@converter("aten::abs.default")
def abs_(op, self):
    return compute(op, op.Abs, [self], op.output_dtype, NUMBERS)


@converter("aten::neg.default")
def neg(op, self):
    return compute(op, op.Neg, [self], op.output_dtype, FLOATS | {D.INT8, D.INT16, D.INT32, D.INT64})


@converter("aten::sign.default")
def sign(op, self):
    dtype = op.output_dtype
    if dtype == D.BOOL:
        return op.Identity(self)
    if dtype in INTS:
        return compute(op, op.Sign, [self], dtype, NUMBERS)

    def sign_(x):
        # As torch: (0 < x) - (x < 0), so NaN has sign 0 (ONNX Sign gives NaN).
        zero = op.constant(0.0, x.dtype)
        return op.Sub(op.Cast(op.Less(zero, x), to=x.dtype), op.Cast(op.Less(x, zero), to=x.dtype))

    return compute(op, sign_, [self], dtype, FLOATS)


def _rounding(onnx_op):
    def convert(op, self):
        if op.output_dtype in INTS:
            # Integers are already whole: torch returns them unchanged.
            return op.Identity(self)
        return compute(op, getattr(op, onnx_op), [self], op.output_dtype, FLOATS)

    return convert


ceil = converter("aten::ceil.default")(_rounding("Ceil"))
floor = converter("aten::floor.default")(_rounding("Floor"))
round_ = converter("aten::round.default")(_rounding("Round"))


@converter("aten::trunc.default")
def trunc(op, self):
    if op.output_dtype in INTS:
        return op.Identity(self)
    return compute(op, lambda x: truncate(op, x), [self], op.output_dtype, FLOATS)


@converter("aten::round.decimals")
def round_decimals(op, self, *, decimals=0):
    if op.output_dtype in INTS:
        return op.Identity(self)
    # As torch: round(x * 10**d) / 10**d, or round(x / 10**-d) * 10**-d for negative d.
    scale = 10.0 ** abs(decimals)

    def round_(x):
        if decimals >= 0:
            return op.Div(op.Round(op.Mul(x, scale)), scale)
        return op.Mul(op.Round(op.Div(x, scale)), scale)

    return compute(op, round_, [self], op.output_dtype, FLOATS)


def _sign_bit(op, v):
    # -0.0 < 0 is false; 1 / -0.0 = -inf tells it apart (1 / -inf = -0.0 is why both tests).
    zero = op.constant(0.0, v.dtype)
    return op.Or(op.Less(v, zero), op.Less(op.Reciprocal(v), zero))


@converter("aten::atan2.default")
def atan2(op, self, other):
    # ONNX has no atan2: atan(y / x), moved to the quadrant the operands' signs name, zeros' included.
    def atan2_(y, x):
        zero = op.constant(0.0, x.dtype)
        one = op.constant(1.0, x.dtype)
        pi = op.constant(math.pi, x.dtype)
        half_pi = op.constant(math.pi / 2, x.dtype)
        y_negative, x_negative = _sign_bit(op, y), _sign_bit(op, x)
        # inf / inf and 0 / 0 are NaN. With both infinite only the signs matter (atan2(inf,
        # -inf) = 3pi/4); with both zero, x's sign picks the half plane (atan2(0, -0) = pi).
        both_inf = op.And(is_inf(op, x), is_inf(op, y))
        both_zero = op.And(op.Equal(x, zero), op.Equal(y, zero))
        sign_x = op.Where(x_negative, op.Neg(one), one)
        y = op.Where(both_inf, op.Where(y_negative, op.Neg(one), one), y)
        x = op.Where(op.Or(both_inf, both_zero), sign_x, x)
        base = op.Atan(op.Div(y, x))
        left = op.Add(base, op.Where(y_negative, op.Neg(pi), pi))
        on_axis = op.Where(y_negative, op.Neg(half_pi), half_pi)
        angle = op.Where(op.Greater(x, zero), base, op.Where(op.Less(x, zero), left, on_axis))
        # A NaN x fails both comparisons and would land on the axis: NaN in, NaN out (x + y).
        return op.Where(op.Or(is_nan(op, x), is_nan(op, y)), op.Add(x, y), angle)

    return compute(op, atan2_, [self, other], op.output_dtype, FLOAT32_16)
