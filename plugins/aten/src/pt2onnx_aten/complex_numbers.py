"""Complex numbers beyond the FFTs: ``polar`` and the complex product.

A complex tensor is a real tensor with a trailing dim of 2 (real, imaginary) in the ONNX
graph, as the FFT converters take it. Rotary embeddings written with complex numbers
(Llama 4's, Meta's reference Llama's) build their rotations with ``polar`` and apply them
with a complex product between ``view_as_complex`` and ``view_as_real``; the views in
between (``unsqueeze``, ``slice``, ``view``) count dims by torch's rank
(:func:`torch_rank`).
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import torch

from pt2onnx.plugin import Op, converter

from ._common import meta_of, rank


def is_complex(meta: Any) -> bool:
    """Whether torch's record of a value (a FakeTensor, or a Python scalar) is complex."""
    return isinstance(meta, complex) or (isinstance(meta, torch.Tensor) and meta.is_complex())


def torch_rank(op: Op, value: ir.Value) -> int:
    """The rank torch gives the node's first argument: one less than its Value's if complex."""
    return rank(value) - 1 if is_complex(meta_of(op.node.args[0])) else rank(value)


def _parts(op: Op, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    return op.Split(x, op.constant([1, 1], ir.DataType.INT64), axis=-1, _outputs=2)


def _pair(op: Op, real: ir.Value, imaginary: ir.Value) -> ir.Value:
    return op.Concat(real, imaginary, axis=-1)


@converter("aten::polar.default", complex_values=True)
def polar(op, abs, angle):
    last = op.constant([-1], ir.DataType.INT64)
    return _pair(op, op.Unsqueeze(op.Mul(abs, op.Cos(angle)), last), op.Unsqueeze(op.Mul(abs, op.Sin(angle)), last))


def complex_product(op: Op, self: Any, other: Any) -> ir.Value:
    """``self * other`` where the product is complex; either factor may be real.

    A real tensor factor scales both parts (a trailing dim of 1 broadcasts over them);
    two complex ones multiply as ``(a + bi)(c + di) = (ac - bd) + (ad + bc)i``.
    """
    real = op.dtype(op.output_meta.real.dtype)
    factors = []
    for arg, value in zip(op.node.args, (self, other)):
        meta = meta_of(arg)
        if isinstance(value, complex):
            value = op.constant([value.real, value.imag], real)
        elif not isinstance(value, ir.Value):
            value = op.constant(value, real)
        elif not is_complex(meta):
            value = op.Unsqueeze(value, op.constant([-1], ir.DataType.INT64))
        if value.dtype != real:
            value = op.Cast(value, to=real)
        factors.append((value, is_complex(meta)))
    (a, a_complex), (b, b_complex) = factors
    if not (a_complex and b_complex):
        return op.Mul(a, b)
    a_re, a_im = _parts(op, a)
    b_re, b_im = _parts(op, b)
    return _pair(
        op,
        op.Sub(op.Mul(a_re, b_re), op.Mul(a_im, b_im)),
        op.Add(op.Mul(a_re, b_im), op.Mul(a_im, b_re)),
    )
