"""Element-wise arithmetic and activations."""

from __future__ import annotations

from pt2onnx.plugin import converter

from ._common import as_dtype, promote


@converter("aten::add.Tensor", "aten::add.Scalar")
def add(op, self, other, *, alpha=1):
    a, b = promote(op, self, other)
    if alpha != 1:
        b = op.Mul(b, as_dtype(op, alpha, op.output_dtype))
    return op.Add(a, b)


@converter("aten::sub.Tensor", "aten::sub.Scalar")
def sub(op, self, other, *, alpha=1):
    a, b = promote(op, self, other)
    if alpha != 1:
        b = op.Mul(b, as_dtype(op, alpha, op.output_dtype))
    return op.Sub(a, b)


@converter("aten::mul.Tensor", "aten::mul.Scalar")
def mul(op, self, other):
    a, b = promote(op, self, other)
    return op.Mul(a, b)


@converter("aten::relu.default")
def relu(op, self):
    return op.Relu(self)
