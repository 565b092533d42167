"""Logical (any dtype, as truth values, bool result) and bitwise (bool and integers) ops."""

from __future__ import annotations

import numpy as np

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


def bits(op, x):
    """The 64 bits of the integer ``x`` (sign-extended) along a new last axis, as bools.

    Below opset 18 ONNX has no bitwise op on integers: they are computed on these bits
    (``BitShift`` and ``Mod`` on uint64, both older than 14) and put back by :func:`from_bits`.
    """
    unsigned = op.Cast(op.Cast(x, to=D.INT64), to=D.UINT64)
    shifted = op.BitShift(
        op.Unsqueeze(unsigned, op.constant([-1])), op.constant(np.arange(64, dtype=np.uint64)), direction="RIGHT"
    )
    return op.Cast(op.Mod(shifted, op.constant(2, D.UINT64)), to=D.BOOL)


def from_bits(op, bools, dtype):
    """The integers of ``dtype`` whose 64 bits (sign-extended) are ``bools`` along the last axis.

    A MatMul with the bits' weights, the last one -2**63: exact in int64, where onnxruntime's
    ReduceSum of int64 is not (it loses the low bits of sums above 2**53).
    """
    weights = op.constant([1 << k for k in range(63)] + [-(1 << 63)], D.INT64)
    return as_dtype(op, op.MatMul(op.Cast(bools, to=D.INT64), weights), dtype)


def _bitwise(bool_op, int_op):
    def convert(op, self, other):
        if op.output_dtype == D.BOOL:
            return getattr(op, bool_op)(*promote(op, self, other))
        if op.opset < 18:  # BitwiseAnd/Or/Xor are opset 18
            a, b = promote(op, self, other)
            return from_bits(op, getattr(op, bool_op)(bits(op, a), bits(op, b)), op.output_dtype)
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
    if op.opset < 18:  # BitwiseNot is opset 18
        return from_bits(op, op.Not(bits(op, self)), op.output_dtype)
    return op.BitwiseNot(self)
