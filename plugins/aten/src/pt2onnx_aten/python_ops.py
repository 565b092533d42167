"""Python operators on symbolic sizes (SymInt, SymFloat, SymBool) and multi-output nodes.

Symbolic scalars arrive as 0-d Values (INT64, DOUBLE or BOOL), mixed with Python numbers.
Without any Value the node is computed in Python; otherwise in ONNX with Python's
semantics: int op float is float, ``/`` is float, ``//`` and ``%`` floor.
"""

from __future__ import annotations

import math
import operator

import onnx_ir as ir

from pt2onnx.plugin import converter

from .logical import bits, from_bits

_INT, _FLOAT, _BOOL = ir.DataType.INT64, ir.DataType.DOUBLE, ir.DataType.BOOL


@converter("operator::getitem")
def getitem(op, seq, index):
    return seq[index]


def _symbolic(*values):
    return any(isinstance(v, ir.Value) for v in values)


def _is_float(v):
    return v.dtype == _FLOAT if isinstance(v, ir.Value) else isinstance(v, float)


def _as(op, v, dtype):
    if isinstance(v, ir.Value):
        return v if v.dtype == dtype else op.Cast(v, to=dtype)
    return op.constant(v, dtype)


def _numbers(op, *values, dtype=None):
    """The values as 0-d Values of one dtype: Python's promotion (bool < int < float)."""
    if dtype is None:
        dtype = _FLOAT if any(_is_float(v) for v in values) else _INT
    return [_as(op, v, dtype) for v in values]


def _arithmetic(python_op, onnx_op):
    def convert(op, a, b):
        if not _symbolic(a, b):
            return python_op(a, b)
        return getattr(op, onnx_op)(*_numbers(op, a, b))

    return convert


add = converter("operator::add")(_arithmetic(operator.add, "Add"))
sub = converter("operator::sub")(_arithmetic(operator.sub, "Sub"))
mul = converter("operator::mul")(_arithmetic(operator.mul, "Mul"))
pow_ = converter("operator::pow")(_arithmetic(operator.pow, "Pow"))
sym_max = converter("torch::sym_max")(_arithmetic(max, "Max"))
sym_min = converter("torch::sym_min")(_arithmetic(min, "Min"))


@converter("operator::floordiv")
def floordiv(op, a, b):
    if not _symbolic(a, b):
        return a // b
    a, b = _numbers(op, a, b)
    if a.dtype == _FLOAT:
        return op.Floor(op.Div(a, b))
    # ONNX Div truncates; a - mod(a, b) (Mod with fmod=0 takes the divisor's sign) divides exactly.
    return op.Div(op.Sub(a, op.Mod(a, b)), b)


@converter("operator::mod")
def mod(op, a, b):
    if not _symbolic(a, b):
        return a % b
    a, b = _numbers(op, a, b)
    if a.dtype == _FLOAT:
        # Python's float % has the divisor's sign: a - b * floor(a / b).
        return op.Sub(a, op.Mul(b, op.Floor(op.Div(a, b))))
    return op.Mod(a, b)


@converter("operator::truediv")
def truediv(op, a, b):
    if not _symbolic(a, b):
        return a / b
    return op.Div(*_numbers(op, a, b, dtype=_FLOAT))


@converter("operator::neg")
def neg(op, a):
    if not _symbolic(a):
        return -a
    return op.Neg(_numbers(op, a)[0])


def _comparison(python_op, onnx_op, negate=False):
    def convert(op, a, b):
        if not _symbolic(a, b):
            return python_op(a, b)
        result = getattr(op, onnx_op)(*_numbers(op, a, b))
        return op.Not(result) if negate else result

    return convert


eq = converter("operator::eq")(_comparison(operator.eq, "Equal"))
ne = converter("operator::ne")(_comparison(operator.ne, "Equal", negate=True))
lt = converter("operator::lt")(_comparison(operator.lt, "Less"))
le = converter("operator::le")(_comparison(operator.le, "LessOrEqual"))
gt = converter("operator::gt")(_comparison(operator.gt, "Greater"))
ge = converter("operator::ge")(_comparison(operator.ge, "GreaterOrEqual"))


def _logic(python_op, bool_op, int_op):
    def convert(op, a, b):
        if not _symbolic(a, b):
            return python_op(a, b)
        if all(isinstance(v, bool) or (isinstance(v, ir.Value) and v.dtype == _BOOL) for v in (a, b)):
            return getattr(op, bool_op)(_as(op, a, _BOOL), _as(op, b, _BOOL))
        if op.opset < 18:  # BitwiseAnd/Or are opset 18
            x, y = _numbers(op, a, b, dtype=_INT)
            return from_bits(op, getattr(op, bool_op)(bits(op, x), bits(op, y)), _INT)
        return getattr(op, int_op)(*_numbers(op, a, b, dtype=_INT))

    return convert


and_ = converter("operator::and_")(_logic(operator.and_, "And", "BitwiseAnd"))
or_ = converter("operator::or_")(_logic(operator.or_, "Or", "BitwiseOr"))


@converter("torch::sym_not")
def sym_not(op, a):
    return op.Not(_as(op, a, _BOOL)) if _symbolic(a) else not a


@converter("torch::sym_float")
def sym_float(op, a):
    return _as(op, a, _FLOAT) if _symbolic(a) else float(a)


@converter("torch::sym_ite")
def sym_ite(op, b, t, f):
    if not _symbolic(b):
        return t if b else f
    t, f = _numbers(op, t, f) if not (_is_bool(t) and _is_bool(f)) else (_as(op, t, _BOOL), _as(op, f, _BOOL))
    return op.Where(_as(op, b, _BOOL), t, f)


def _is_bool(v):
    return isinstance(v, bool) or (isinstance(v, ir.Value) and v.dtype == _BOOL)


@converter("torch::sym_sum")
def sym_sum(op, args):
    if not _symbolic(*args):
        return sum(args)
    values = _numbers(op, *args)
    total = values[0]
    for v in values[1:]:
        total = op.Add(total, v)
    return total


def _rounding(python_op, onnx_op):
    def convert(op, a):
        if not _symbolic(a):
            return python_op(a)
        if a.dtype != _FLOAT:
            return _as(op, a, _INT)
        return op.Cast(getattr(op, onnx_op)(a), to=_INT)

    return convert


ceil = converter("math::ceil")(_rounding(math.ceil, "Ceil"))
floor = converter("math::floor")(_rounding(math.floor, "Floor"))


@converter("math::trunc")
def trunc(op, a):
    # int(x) of a float is math.trunc: Cast from double truncates toward zero.
    return _as(op, a, _INT) if _symbolic(a) else math.trunc(a)


@converter("torch::_sym_sqrt")
def sqrt(op, a):
    return op.Sqrt(_as(op, a, _FLOAT)) if _symbolic(a) else math.sqrt(a)
