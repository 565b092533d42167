"""Logical (any dtype, as truth values, bool result) and bitwise (bool and integers) ops."""

from __future__ import annotations

from pt2onnx.plugin import converter

from ._common import INTS, D, as_dtype, compute, operand_dtype, promote


def _logical(onnx_op):
    def convert(op, self, other):
        # torch rounds both operands to their common dtype first (a float32 subnormal beside
        # a float16 tensor is 0, so False); then Cast to bool is its truth value: nonzero (and
        # NaN) is True.
        common = operand_dtype(op)
        return getattr(op, onnx_op)(*(as_dtype(op, as_dtype(op, v, common), D.BOOL) for v in (self, other)))

    return convert


logical_and = converter("aten::logical_and.default")(_logical("And"))
logical_or = converter("aten::logical_or.default")(_logical("Or"))
logical_xor = converter("aten::logical_xor.default")(_logical("Xor"))


@converter("aten::logical_not.default")
def logical_not(op, self):
    return op.Not(as_dtype(op, self, D.BOOL))


def _before_18(op, name):
    """The error for integer bitwise ops below opset 18, where ONNX has none."""
    return op.unsupported(
        "self",
        op.output_dtype.name,
        f"ONNX has {name} for integers from opset 18 (target: {op.opset})",
        hint="export with opset>=18",
    )


def _bitwise(bool_op, int_op):
    def convert(op, self, other):
        if op.output_dtype == D.BOOL:
            return getattr(op, bool_op)(*promote(op, self, other))
        if op.opset < 18:
            raise _before_18(op, int_op)
        return compute(op, getattr(op, int_op), [self, other], op.output_dtype, INTS, argument="self")

    return convert


bitwise_and = converter(
    "aten::bitwise_and.Tensor", "aten::bitwise_and.Scalar", "aten::__and__.Tensor", "aten::__and__.Scalar"
)(_bitwise("And", "BitwiseAnd"))
bitwise_or = converter(
    "aten::bitwise_or.Tensor", "aten::bitwise_or.Scalar", "aten::__or__.Tensor", "aten::__or__.Scalar"
)(_bitwise("Or", "BitwiseOr"))
bitwise_xor = converter(
    "aten::bitwise_xor.Tensor", "aten::bitwise_xor.Scalar", "aten::__xor__.Tensor", "aten::__xor__.Scalar"
)(_bitwise("Xor", "BitwiseXor"))


@converter("aten::bitwise_not.default")
def bitwise_not(op, self):
    if op.output_dtype == D.BOOL:
        return op.Not(self)
    if op.opset < 18:
        raise _before_18(op, "BitwiseNot")
    return op.BitwiseNot(self)
