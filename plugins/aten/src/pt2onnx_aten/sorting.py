"""Sorting: sort and topk, both through ``TopK``.

``TopK`` puts the lower index first among equal values, which is what a stable sort does
in either direction, so ``stable=True`` needs nothing more. onnxruntime's TopK orders NaN
as the largest value, as torch does (measured with onnxruntime 1.32; the sort and topk
tests draw NaN). Among ties torch's topk picks in an order it leaves undefined.
"""

from __future__ import annotations

from pt2onnx.plugin import converter

from ._dims import ints, normalize_dim, one_d, size, to_dtype, widen


def _topk(op, x, k, axis, largest):
    if op.rank_of(x) == 0:
        values, indices = _topk(op, op.Reshape(x, ints(op, [1])), k, 0, largest)
        return op.Reshape(values, ints(op, [])), op.Reshape(indices, ints(op, []))
    data = widen(op, x, "TopK")
    values, indices = op.TopK(data, k, axis=axis, largest=int(largest), sorted=1, _outputs=2)
    return to_dtype(op, values, x.dtype), indices


@converter("aten::sort.default")
def sort(op, self, dim=-1, descending=False):
    axis = normalize_dim(dim, op.rank_of(self))
    k = size(op, self, axis) if op.rank_of(self) else ints(op, [1])
    return _topk(op, self, k, axis, descending)


@converter("aten::sort.stable")
def sort_stable(op, self, *, stable=None, dim=-1, descending=False):
    return sort(op, self, dim, descending)


@converter("aten::topk.default")
def topk(op, self, k, dim=-1, largest=True, sorted=True):
    # An unsorted topk may return its values in any order: sorted order is one of them.
    axis = normalize_dim(dim, op.rank_of(self))
    return _topk(op, self, one_d(op, k), axis, largest)
