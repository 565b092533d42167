"""Element-wise arithmetic of two tensors (or a tensor and a scalar), with torch's type promotion.

Operands are cast to the dtype torch computes in (the node's output dtype), so int + float,
bool arithmetic and integer division come out as torch says. Dtypes onnxruntime has no
kernel for compute in a wider dtype that is exact for them (see ``_common.compute``).
"""

from __future__ import annotations

from pt2onnx.plugin import converter

from ._common import FLOATS, INTS, NUMBERS, D, as_dtype, compute, promote, truncate

_MINMAX = FLOATS | {D.INT8, D.INT32, D.INT64, D.UINT8}
_POW = FLOATS | {D.INT32, D.INT64}


def _with_alpha(op, onnx_op, alpha):
    def apply(a, b):
        return onnx_op(a, b if alpha == 1 else op.Mul(b, as_dtype(op, alpha, b.dtype)))

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


@converter("aten::mul.Tensor", "aten::mul.Scalar")
def mul(op, self, other):
    if op.output_dtype == D.BOOL:
        return op.And(*promote(op, self, other))
    return compute(op, op.Mul, [self, other], op.output_dtype, NUMBERS)


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


def _floor_divide_int(op, a, b):
    # ONNX Div truncates; a - mod(a, b) (Mod with fmod=0 takes the divisor's sign) divides exactly.
    return op.Div(op.Sub(a, op.Mod(a, b)), b)


@converter("aten::div.Tensor", "aten::div.Scalar", "aten::div.Tensor_mode", "aten::div.Scalar_mode")
def div(op, self, other, *, rounding_mode=None):
    dtype = op.output_dtype
    if rounding_mode is None:
        return compute(op, op.Div, [self, other], dtype, FLOATS)
    if rounding_mode == "trunc":
        if dtype in INTS:
            return compute(op, op.Div, [self, other], dtype, NUMBERS)
        return compute(op, lambda a, b: truncate(op, op.Div(a, b)), [self, other], dtype, FLOATS)
    if rounding_mode == "floor":
        if dtype in INTS:
            return compute(op, lambda a, b: _floor_divide_int(op, a, b), [self, other], dtype, NUMBERS)
        return compute(op, lambda a, b: _floor_divide_float(op, a, b), [self, other], dtype, FLOATS)
    raise op.unsupported("rounding_mode", rounding_mode, "torch knows None, 'trunc' and 'floor'")


@converter("aten::floor_divide.default", "aten::floor_divide.Scalar")
def floor_divide(op, self, other):
    # torch's floor_divide rounds toward negative infinity (since 1.13): div with rounding_mode="floor".
    return div(op, self, other, rounding_mode="floor")


@converter("aten::pow.Tensor_Tensor", "aten::pow.Tensor_Scalar", "aten::pow.Scalar")
def pow_(op, self, exponent):
    return compute(op, op.Pow, [self, exponent], op.output_dtype, _POW)


@converter("aten::remainder.Tensor", "aten::remainder.Scalar")
def remainder(op, self, other):
    dtype = op.output_dtype
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
    return compute(op, lambda a, b: op.Mod(a, b, fmod=1), [self, other], op.output_dtype, NUMBERS)


def _nan_propagating(op, onnx_op):
    def apply(a, b):
        result = onnx_op(a, b)
        if a.dtype not in FLOATS:
            return result
        # torch returns NaN when either side is NaN; a + b is NaN exactly then.
        return op.Where(op.Or(op.IsNaN(a), op.IsNaN(b)), op.Add(a, b), result)

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
