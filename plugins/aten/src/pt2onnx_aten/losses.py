"""Loss functions that torch's decompositions compute otherwise than its kernels: soft_margin_loss.

torch decomposes ``soft_margin_loss`` in float32 for float16/bfloat16 inputs, where its
kernel computes in the half dtype (``exp`` of 30 overflows to inf there). The converter
follows the kernel: every step rounded to the input's dtype, the reduction accumulated
in float32.
"""

from __future__ import annotations

from pt2onnx.plugin import converter

from ._common import HALVES, D, compute

_NONE, _MEAN, _SUM = 0, 1, 2  # torch's ``reduction`` enum


@converter("aten::soft_margin_loss.default")
def soft_margin_loss(op, self, target, reduction=1):
    dtype = op.output_dtype

    def rounded(value):
        return op.Cast(op.Cast(value, to=dtype), to=value.dtype) if dtype in HALVES else value

    def loss(x, y):
        # log1p(exp(-x * y)), rounded after each op as torch's half arithmetic is
        exp = rounded(op.Exp(op.Neg(rounded(op.Mul(x, y)))))
        each = rounded(op.Log(op.Add(exp, op.constant(1.0, exp.dtype))))
        if reduction == _NONE:
            return each
        total = op.ReduceSum(each, keepdims=0)
        # The mean of nothing is 0 / 0 = NaN, as in torch (ReduceMean gives 0).
        return total if reduction == _SUM else op.Div(total, op.Cast(op.Size(each), to=total.dtype))

    return compute(op, loss, [self, target], dtype, frozenset({D.FLOAT, D.DOUBLE}))
