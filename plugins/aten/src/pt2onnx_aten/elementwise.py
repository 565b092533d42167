"""Element-wise arithmetic of two tensors (or a tensor and a scalar), with torch's type promotion.

Operands are cast to the dtype torch computes in (the node's output dtype), so int + float,
bool arithmetic and integer division come out as torch says. Dtypes onnxruntime has no
kernel for compute in a wider dtype that is exact for them (see ``_common.compute``).

Integer overflow wraps around in torch. onnxruntime's Add, Sub, Mul and Neg wrap too, and
the cast back from a wider dtype wraps as torch's narrower arithmetic does (the low bits of
a sum or product do not depend on the width), so those match as they are. Its integer
``Pow`` goes through floating point and saturates: integer powers are square-and-multiply
here (``_int_pow``). Its integer ``Div`` of the dtype's minimum by -1 is a hardware
exception that kills the process (torch's floor division returns the wrapped minimum):
division by -1 is a negation here.
"""

from __future__ import annotations

import onnx_ir as ir

from pt2onnx.plugin import converter

from ._common import FLOATS, INTS, NUMBERS, D, as_dtype, compute, is_nan, promote, truncate
from .complex_numbers import complex_product, is_complex

_MINMAX = FLOATS | {D.INT8, D.INT32, D.INT64, D.UINT8}
_POW = FLOATS | {D.INT32, D.INT64}
# Integer division selects with Where, which onnxruntime runs on int32/int64 only.
_INT_DIVIDE = frozenset({D.INT32, D.INT64})


#: torch adds float32 ``alpha * other`` with one fused multiply-add, so a product beyond
#: float32's range is not inf first (-inf + 2 * 3.4e38 is -inf, not NaN): float64 holds it.
#: Nothing is wider than float64.
_WIDER = {D.FLOAT: D.DOUBLE}
#: float16/bfloat16 round ``alpha * other`` to their dtype before the sum, so beyond the
#: dtype's range it is inf (inf - 2 * 65504 is NaN). onnxruntime runs both ops of such a
#: model in float32 and drops the rounding between them; the overflow is made explicit
#: instead: a product at least this large (the dtype's largest value plus half a step,
#: the first that rounds to inf) becomes inf.
_ROUNDS_TO_INF = {D.FLOAT16: 65520.0, D.BFLOAT16: (2 - 2**-8) * 2.0**127}


def _with_alpha(op, onnx_op, alpha):
    def apply(a, b):
        if alpha == 1:
            return onnx_op(a, b)
        limit = _ROUNDS_TO_INF.get(op.output_dtype)
        if limit is not None:
            computed = a.dtype  # the dtype compute() casts back from
            a, b = (as_dtype(op, v, D.FLOAT) for v in (a, b))
            scaled = op.Mul(b, as_dtype(op, alpha, D.FLOAT))
            overflows = op.GreaterOrEqual(op.Abs(scaled), op.constant(limit, D.FLOAT))
            scaled = op.Where(overflows, op.Mul(scaled, op.constant(float("inf"), D.FLOAT)), scaled)
            return as_dtype(op, onnx_op(a, scaled), computed)
        wide = _WIDER.get(b.dtype)
        if wide is None:
            return onnx_op(a, op.Mul(b, as_dtype(op, alpha, b.dtype)))
        scaled = op.Mul(op.Cast(b, to=wide), as_dtype(op, alpha, wide))
        return op.Cast(onnx_op(op.Cast(a, to=wide), scaled), to=b.dtype)

    return apply


@converter("aten::add.Tensor", "aten::add.Scalar")
def add(op, self, other, *, alpha=1):
    if op.output_dtype == D.BOOL:
        # bool + bool is logical or (alpha, a bool too, can only keep or drop other).
        return op.Or(*promote(op, self, other)) if alpha else op.Identity(self)
    return compute(op, _with_alpha(op, op.Add, alpha), [self, other], op.output_dtype, NUMBERS)


@converter("aten::sub.Tensor", "aten::sub.Scalar")
def sub(op, self, other, *, alpha=1):
    return compute(op, _with_alpha(op, op.Sub, alpha), [self, other], op.output_dtype, NUMBERS)


@converter("aten::mul.Tensor", "aten::mul.Scalar", complex_values=True)
def mul(op, self, other):
    if is_complex(op.output_meta):
        return complex_product(op, self, other)
    if op.output_dtype == D.BOOL:
        return op.And(*promote(op, self, other))
    return compute(op, op.Mul, [self, other], op.output_dtype, NUMBERS, scalar_other=True)


def _floor_divide_float(op, a, b):
    # torch's floor division of floats (div_floor_floating): from fmod, not floor(a / b),
    # which rounds differently, e.g. 1 // 0.1 == 9.
    mod = op.Mod(a, b, fmod=1)
    div = op.Div(op.Sub(a, mod), b)
    wrong_sign = op.And(op.Not(op.Equal(mod, 0)), op.Xor(op.Less(b, 0), op.Less(mod, 0)))
    div = op.Where(wrong_sign, op.Sub(div, 1), div)
    floor = op.Floor(div)
    floor = op.Where(op.Greater(op.Sub(div, floor), 0.5), op.Add(floor, 1), floor)
    return op.Where(op.Equal(b, 0), op.Div(a, b), floor)


def _nonzero(op, b):
    # torch raises on an integer division by 0 wherever it divides something; onnxruntime
    # raises even where nothing is divided (an empty tensor by a 0-d tensor that casts to 0).
    zero = op.Equal(b, op.constant(0, b.dtype))
    return op.Where(zero, op.constant(1, b.dtype), b)


def _truncate_divide_int(op, a, b):
    """C's ``a / b``; ``min / -1`` wraps to ``min`` (a negation) instead of trapping."""
    by_minus_one = op.Equal(b, op.constant(-1, b.dtype))
    safe = op.Where(by_minus_one, op.constant(1, b.dtype), _nonzero(op, b))
    return op.Where(by_minus_one, op.Neg(a), op.Div(a, safe))


def _floor_divide_int(op, a, b):
    # torch's div_floor_integer: the truncated quotient, less one where the signs differ and
    # the division is not exact. (a - mod(a, b)) / b would be shorter, but a - mod overflows.
    quotient = _truncate_divide_int(op, a, b)
    inexact = op.Not(op.Equal(op.Mod(a, _nonzero(op, b), fmod=1), op.constant(0, a.dtype)))
    signs_differ = op.Xor(op.Less(a, op.constant(0, a.dtype)), op.Less(b, op.constant(0, b.dtype)))
    return op.Where(op.And(inexact, signs_differ), op.Sub(quotient, op.constant(1, a.dtype)), quotient)


def _quotient(op, a, b, dtype):
    """``a / b`` rounded to ``dtype``: torch truncates a bfloat16 quotient after rounding it
    (computed in float32 here, onnxruntime has no bfloat16 Div), which moves 8% of them."""
    quotient = op.Div(a, b)
    if dtype == D.BFLOAT16:
        return op.Cast(op.Cast(quotient, to=D.BFLOAT16), to=quotient.dtype)
    return quotient


@converter("aten::div.Tensor", "aten::div.Scalar", "aten::div.Tensor_mode", "aten::div.Scalar_mode")
def div(op, self, other, *, rounding_mode=None):
    dtype = op.output_dtype
    if rounding_mode is None:
        return compute(op, op.Div, [self, other], dtype, FLOATS, scalar_other=True)
    if rounding_mode == "trunc":
        if dtype in INTS:
            return compute(op, lambda a, b: _truncate_divide_int(op, a, b), [self, other], dtype, _INT_DIVIDE)
        return compute(op, lambda a, b: truncate(op, _quotient(op, a, b, dtype)), [self, other], dtype, FLOATS)
    if rounding_mode == "floor":
        if dtype in INTS:
            return compute(op, lambda a, b: _floor_divide_int(op, a, b), [self, other], dtype, _INT_DIVIDE)
        return compute(op, lambda a, b: _floor_divide_float(op, a, b), [self, other], dtype, FLOATS)
    raise op.unsupported("rounding_mode", rounding_mode, "torch knows None, 'trunc' and 'floor'")


def _int_pow_by_constant(op, base, exponent):
    """``base ** exponent`` for a constant exponent >= 0: unrolled square-and-multiply."""
    result, square = None, base
    while exponent:
        if exponent & 1:
            result = square if result is None else op.Mul(result, square)
        exponent >>= 1
        if exponent:
            square = op.Mul(square, square)
    return op.Expand(op.constant(1, base.dtype), op.Shape(base)) if result is None else op.Identity(result)


def _odd(op, v):
    """Whether the integers ``v`` are odd: their lowest bit (``BitwiseAnd``, opset 18), or
    ``Mod`` by 2 (Python's sign rule: 1 for negative odd numbers too) before."""
    one = op.constant(1, v.dtype)
    if op.opset >= 18:
        return op.Cast(op.BitwiseAnd(v, one), to=D.BOOL)
    return op.Cast(op.Mod(v, op.constant(2, v.dtype)), to=D.BOOL)


def _int_pow(op, base, exponent):
    """torch's ``powi``: square-and-multiply (wrapping like torch) in a ``Loop`` that runs
    once per bit of the largest exponent; a negative exponent gives 1 for base 1, +-1 for
    base -1 and 0 otherwise. onnxruntime's integer Pow saturates instead of wrapping.

    The exponent's bits are walked as uint64 (BitwiseAnd and BitShift: onnxruntime's integer
    Mod and Div cost about ten times a Mul)."""
    dtype = base.dtype
    zero, one = op.constant(0, dtype), op.constant(1, dtype)
    one_bit, no_bits = op.constant(1, D.UINT64), op.constant(0, D.INT64)

    def any_left(builder, bits):
        return builder.Greater(builder.ReduceMax(builder.Cast(bits, to=D.INT64), keepdims=0), no_bits)

    ones = op.Expand(one, op.Shape(op.Add(base, exponent)))
    bits = op.Cast(op.Max(exponent, zero), to=D.UINT64)
    name = op.node.name
    body_inputs = [
        op.value(f"{name}.iteration", D.INT64, []),
        op.value(f"{name}.cond_in", D.BOOL, []),
        op.value(f"{name}.result", dtype, None),
        op.value(f"{name}.square", dtype, None),
        op.value(f"{name}.bits", D.UINT64, None),
    ]

    def step(sub, _iteration, _cond, result, square, bits):
        odd = _odd(sub, bits)
        result = sub.Where(odd, sub.Mul(result, square), result)
        bits = sub.BitShift(bits, one_bit, direction="RIGHT")
        return [any_left(sub, bits), result, sub.Mul(square, square), bits]

    body = op.subgraph(step, body_inputs, name=f"{name}.powi")
    powered, _, _ = op.Loop(None, any_left(op, bits), ones, base, bits, body=body, _outputs=3)
    minus_one = op.constant(-1, dtype)
    odd_exponent = _odd(op, exponent)
    negative = op.Where(
        op.Equal(base, one),
        one,
        op.Where(op.Equal(base, minus_one), op.Where(odd_exponent, minus_one, one), zero),
    )
    return op.Where(op.Less(exponent, zero), negative, powered)


def _float_pow_by_constant(op, base, exponent):
    """torch's special exponents (pow_tensor_scalar_kernel): sqrt(-inf) is NaN where pow gives inf."""
    if exponent == 0.5:
        return op.Sqrt(base)
    if exponent == -0.5:
        return op.Reciprocal(op.Sqrt(base))
    if exponent == -1:
        return op.Reciprocal(base)
    if exponent == 2:
        return op.Mul(base, base)
    if exponent == 3:
        return op.Mul(op.Mul(base, base), base)
    if exponent == -2:
        return op.Reciprocal(op.Mul(base, base))
    return op.Pow(base, op.constant(float(exponent), base.dtype))


@converter("aten::floor_divide.default", "aten::floor_divide.Scalar")
def floor_divide(op, self, other):
    # torch's floor_divide rounds toward negative infinity (since 1.13): div with rounding_mode="floor".
    return div(op, self, other, rounding_mode="floor")


@converter("aten::pow.Tensor_Tensor", "aten::pow.Tensor_Scalar", "aten::pow.Scalar")
def pow_(op, self, exponent):
    dtype = op.output_dtype
    constant_exponent = not isinstance(exponent, ir.Value) and isinstance(self, ir.Value)
    if dtype in INTS:
        if constant_exponent and exponent >= 0:
            return compute(op, lambda a: _int_pow_by_constant(op, a, int(exponent)), [self], dtype, _POW)
        return compute(op, lambda a, b: _int_pow(op, a, b), [self, exponent], dtype, _POW)
    if constant_exponent:
        return compute(op, lambda a: _float_pow_by_constant(op, a, exponent), [self], dtype, _POW)
    return compute(op, op.Pow, [self, exponent], dtype, _POW)


def _divisor(op, other):
    # torch rounds a Python scalar divisor to the tensor's dtype (e.g. -0.7 to bfloat16's -0.69921875).
    return other if isinstance(other, ir.Value) else as_dtype(op, other, op.output_dtype)


@converter("aten::remainder.Tensor", "aten::remainder.Scalar")
def remainder(op, self, other):
    dtype = op.output_dtype
    other = _divisor(op, other)
    if dtype in INTS:
        return compute(op, lambda a, b: op.Mod(a, b), [self, other], dtype, NUMBERS)

    def python_mod(a, b):
        # fmod has the dividend's sign; Python's remainder the divisor's (as torch computes it).
        mod = op.Mod(a, b, fmod=1)
        wrong_sign = op.And(op.Not(op.Equal(mod, 0)), op.Xor(op.Less(b, 0), op.Less(mod, 0)))
        return op.Where(wrong_sign, op.Add(mod, b), mod)

    return compute(op, python_mod, [self, other], dtype, FLOATS)


@converter("aten::fmod.Tensor", "aten::fmod.Scalar")
def fmod(op, self, other):
    return compute(op, lambda a, b: op.Mod(a, b, fmod=1), [self, _divisor(op, other)], op.output_dtype, NUMBERS)


def _nan_propagating(op, onnx_op):
    def apply(a, b):
        result = onnx_op(a, b)
        if a.dtype not in FLOATS:
            return result
        # torch returns NaN when either side is NaN; a + b is NaN exactly then.
        return op.Where(op.Or(is_nan(op, a), is_nan(op, b)), op.Add(a, b), result)

    return apply


@converter("aten::maximum.default", "aten::max.other")
def maximum(op, self, other):
    return compute(op, _nan_propagating(op, op.Max), [self, other], op.output_dtype, _MINMAX)


@converter("aten::minimum.default", "aten::min.other")
def minimum(op, self, other):
    return compute(op, _nan_propagating(op, op.Min), [self, other], op.output_dtype, _MINMAX)


@converter("aten::clamp.default", "aten::clamp.Tensor")
def clamp(op, self, min=None, max=None):
    if min is None and max is None:
        raise op.unsupported("min", None, "torch needs at least one of min and max")

    def clamp_(x, *bounds):
        rest = list(bounds)
        if min is not None:
            x = _nan_propagating(op, op.Max)(x, rest.pop(0))
        if max is not None:
            x = _nan_propagating(op, op.Min)(x, rest.pop(0))
        return x

    bounds = [b for b in (min, max) if b is not None]
    return compute(op, clamp_, [self, *bounds], op.output_dtype, _MINMAX)


@converter("aten::where.self", "aten::where.ScalarSelf", "aten::where.ScalarOther", "aten::where.Scalar")
def where(op, condition, self, other):
    return compute(
        op,
        lambda a, b: op.Where(as_dtype(op, condition, D.BOOL), a, b),
        [self, other],
        op.output_dtype,
        FLOATS | {D.INT8, D.INT32, D.INT64, D.UINT8},
    )
