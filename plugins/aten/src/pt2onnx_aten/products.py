"""Products ONNX has no single op for: addbmm (a sum of batched matmuls) and _trilinear
(what ``F.bilinear`` becomes), as MatMul and Einsum."""

from __future__ import annotations

import string

from pt2onnx.plugin import converter

from ._common import FLOATS, D, compute

_MATMUL = FLOATS | {D.INT32, D.INT64}


@converter("aten::addbmm.default")
def addbmm(op, self, batch1, batch2, *, beta=1, alpha=1):
    def addbmm_(x, a, b):
        total = op.ReduceSum(op.MatMul(a, b), op.constant([0]), keepdims=0)
        if alpha != 1:
            total = op.Mul(total, op.constant(alpha, x.dtype))
        if beta == 0:
            # torch ignores self then (a NaN in it does not propagate).
            return op.Expand(total, op.Shape(x))
        term = x if beta == 1 else op.Mul(x, op.constant(beta, x.dtype))
        return op.Add(term, total)

    return compute(op, addbmm_, [self, batch1, batch2], op.output_dtype, _MATMUL)


@converter("aten::_trilinear.default")
def trilinear(op, i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    # Each input is the full-rank product with the dims in its expand list missing:
    # one Einsum over letters per dim, summing over sumdim.
    total = op.rank_of(i1) + len(expand1)
    letters = string.ascii_letters[:total]

    def term(expand):
        return "".join(letters[d] for d in range(total) if d not in expand)

    out = "".join(letters[d] for d in range(total) if d not in sumdim)
    equation = f"{term(expand1)},{term(expand2)},{term(expand3)}->{out}"
    return compute(op, lambda a, b, c: op.Einsum(a, b, c, equation=equation), [i1, i2, i3], op.output_dtype, FLOATS)
