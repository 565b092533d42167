"""Matrix products: linear, addmm, mm, matmul."""

from __future__ import annotations

from pt2onnx.plugin import converter


@converter("aten::linear.default")
def linear(op, input, weight, bias=None):
    if op.rank_of(input) == 2:
        if bias is None:
            return op.Gemm(input, weight, transB=1)
        return op.Gemm(input, weight, bias, transB=1)
    out = op.MatMul(input, op.Transpose(weight, perm=[1, 0]))
    return out if bias is None else op.Add(out, bias)


@converter("aten::addmm.default")
def addmm(op, self, mat1, mat2, *, beta=1, alpha=1):
    return op.Gemm(mat1, mat2, self, alpha=float(alpha), beta=float(beta))


@converter("aten::mm.default", "aten::bmm.default", "aten::matmul.default")
def matmul(op, self, other):
    return op.MatMul(self, other)


@converter("aten::t.default")
def t(op, self):
    if op.rank_of(self) < 2:
        return self
    return op.Transpose(self, perm=[1, 0])
