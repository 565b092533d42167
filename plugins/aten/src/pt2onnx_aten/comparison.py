"""Comparisons (bool results): eq, ne, lt, le, gt, ge, isnan, isinf.

The operands are compared in the dtype torch promotes them to (int vs float compares
as float), not in the output dtype, which is bool.
"""

from __future__ import annotations

from pt2onnx.plugin import converter

from ._common import FLOATS, INTS, D, compute, is_inf, is_nan, operand_dtype

_ORDERED = FLOATS | INTS
_EQUAL = _ORDERED | {D.BOOL}


def _comparison(onnx_op, supported, negate=False):
    def convert(op, self, other):
        result = compute(op, getattr(op, onnx_op), [self, other], operand_dtype(op), supported, cast_back=False)
        return op.Not(result) if negate else result

    return convert


eq = converter("aten::eq.Tensor", "aten::eq.Scalar")(_comparison("Equal", _EQUAL))
ne = converter("aten::ne.Tensor", "aten::ne.Scalar")(_comparison("Equal", _EQUAL, negate=True))
lt = converter("aten::lt.Tensor", "aten::lt.Scalar")(_comparison("Less", _ORDERED))
le = converter("aten::le.Tensor", "aten::le.Scalar")(_comparison("LessOrEqual", _ORDERED))
gt = converter("aten::gt.Tensor", "aten::gt.Scalar")(_comparison("Greater", _ORDERED))
ge = converter("aten::ge.Tensor", "aten::ge.Scalar")(_comparison("GreaterOrEqual", _ORDERED))


def _float_test(test):
    def convert(op, self):
        if self.dtype not in FLOATS | {D.BFLOAT16}:
            # Integers and bools are never NaN or infinite: all False, in the input's shape.
            return op.Not(op.Equal(self, self))
        return test(op, self)

    return convert


isnan = converter("aten::isnan.default")(_float_test(is_nan))
isinf = converter("aten::isinf.default")(_float_test(is_inf))
