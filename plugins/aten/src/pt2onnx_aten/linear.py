"""Matrix products: linear, mm/bmm/matmul, addmm/baddbmm/addmv, t."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from pt2onnx.plugin import converter

from ._common import FLOATS, as_dtype, compute
from ._dims import shape_of

D = ir.DataType
# onnxruntime's MatMul kernels; narrower ints are multiplied in int32 (the wrap-around
# of the cast back equals torch's modular result).
MATMUL_DTYPES = FLOATS | {D.INT32, D.INT64}


def _matmul(op, a, b):
    return compute(op, op.MatMul, [a, b], op.output_dtype, MATMUL_DTYPES)


def _scaled_self(op, self, beta, shape):
    """``beta * self`` broadcast to ``shape``: addmm/addmv of float32/float64 with alpha 0,
    where torch's BLAS call never reads the matrices (NaN and inf in them do not show)."""
    if beta == 0:
        # torch ignores ``self`` when beta is 0 too: zeros, even where it holds NaN or inf.
        return op.Expand(op.constant(0.0, self.dtype), shape)
    scaled = self if beta == 1 else op.Mul(self, op.constant(beta, self.dtype))
    return op.Expand(scaled, shape)


def _add_product(op, self, a, b, beta, alpha):
    """``beta * self + alpha * (a @ b)``, all in a dtype onnxruntime multiplies in."""

    def emit(c, a, b):
        product = op.MatMul(a, b)
        if alpha != 1:
            product = op.Mul(product, op.constant(alpha, product.dtype))
        if beta == 0:
            # torch ignores ``self`` (even NaN) when beta is 0; it still broadcasts into the shape.
            return op.Expand(product, op.Shape(op.Add(product, c)))
        return op.Add(product, c if beta == 1 else op.Mul(c, op.constant(beta, c.dtype)))

    return compute(op, emit, [self, a, b], op.output_dtype, MATMUL_DTYPES)


def _float32_exact(*scalars):
    """Whether Gemm's float32 ``alpha``/``beta`` attributes hold these scalars exactly: a
    float64 addmm scaled by 0.6 is scaled by float32's 0.6 in Gemm (off by 1e-8 relative)."""
    return all(float(np.float32(s)) == s for s in scalars)


@converter("aten::linear.default")
def linear(op, input, weight, bias=None):
    dtype = op.output_dtype
    values = [input, weight] if bias is None else [input, weight, bias]
    if op.rank_of(input) == 2 and op.rank_of(weight) == 2 and dtype in FLOATS | {D.BFLOAT16}:
        return compute(op, lambda *vs: op.Gemm(*vs, transB=1), values, dtype, FLOATS)

    def emit(x, w, b=None):
        out = op.MatMul(x, w if op.rank_of(weight) == 1 else op.Transpose(w, perm=[1, 0]))
        return out if b is None else op.Add(out, b)

    return compute(op, emit, values, dtype, MATMUL_DTYPES)


@converter("aten::mm.default", "aten::bmm.default", "aten::matmul.default")
def matmul(op, self, other):
    # ONNX MatMul follows numpy, as torch.matmul does: 1-D operands, batch broadcasting.
    return _matmul(op, self, other)


@converter("aten::addmm.default")
def addmm(op, self, mat1, mat2, *, beta=1, alpha=1):
    dtype = op.output_dtype
    if alpha == 0 and dtype in (D.FLOAT, D.DOUBLE):
        shape = op.Concat(shape_of(op, mat1, start=0, end=1), shape_of(op, mat2, start=1, end=2), axis=0)
        return _scaled_self(op, as_dtype(op, self, dtype), beta, shape)
    if dtype in FLOATS | {D.BFLOAT16} and beta != 0 and (dtype != D.DOUBLE or _float32_exact(alpha, beta)):
        return compute(
            op,
            lambda c, a, b: op.Gemm(a, b, c, alpha=float(alpha), beta=float(beta)),
            [self, mat1, mat2],
            dtype,
            FLOATS,
        )
    return _add_product(op, self, mat1, mat2, beta, alpha)


@converter("aten::baddbmm.default")
def baddbmm(op, self, batch1, batch2, *, beta=1, alpha=1):
    return _add_product(op, self, batch1, batch2, beta, alpha)


@converter("aten::addmv.default")
def addmv(op, self, mat, vec, *, beta=1, alpha=1):
    if alpha == 0 and op.output_dtype in (D.FLOAT, D.DOUBLE):
        return _scaled_self(op, as_dtype(op, self, op.output_dtype), beta, shape_of(op, mat, start=0, end=1))
    return _add_product(op, self, mat, vec, beta, alpha)


@converter("aten::t.default")
def t(op, self):
    if op.rank_of(self) < 2:
        return self
    return op.Transpose(self, perm=[1, 0])
