"""Sliding windows: ``Tensor.unfold`` as one Gather of window indices.

torch's reference implementation is an ``as_strided`` view, which ONNX expresses only
for static sizes; a Gather of ``start * step + offset`` works for symbolic sizes too.
"""

from __future__ import annotations

from pt2onnx.plugin import converter

from ._common import D, rank
from ._dims import shape_of


@converter("aten::unfold.default")
def unfold(op, self, dimension, size, step):
    r = rank(self)
    if r == 0:
        return op.Unsqueeze(self, op.constant([0]))
    axis = dimension % r
    length = op.Squeeze(shape_of(op, self, start=axis, end=axis + 1), op.constant([0]))
    count = op.Add(op.Div(op.Sub(length, size), step), 1)
    starts = op.Mul(op.Range(op.constant(0), count, op.constant(1)), step)
    offsets = op.constant(list(range(size)), D.INT64)
    windows = op.Add(op.Unsqueeze(starts, op.constant([1])), op.Unsqueeze(offsets, op.constant([0])))
    gathered = op.Gather(self, windows, axis=axis)  # [..., count, size, ...]
    perm = [d for d in range(r + 1) if d != axis + 1] + [axis + 1]
    return op.Transpose(gathered, perm=perm)
