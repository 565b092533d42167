"""Sorting: sort and topk, both through ``TopK``; searchsorted and bucketize by counting.

``TopK`` puts the lower index first among equal values, which is what a stable sort does
in either direction, so ``stable=True`` needs nothing more. onnxruntime's TopK orders NaN
as the largest value, as torch does (measured with onnxruntime 1.32; the sort and topk
tests draw NaN). Among ties torch's topk picks in an order it leaves undefined.

searchsorted/bucketize count, for each value, the entries of the sorted sequence that
precede it: ``not (entry >= value)`` (left) or ``not (entry > value)`` (right), the
predicate of torch's binary search, so a NaN value lands after every entry as in torch.
Counting compares every entry with every value (memory: values x sequence length), which
ONNX's fixed ops allow; the result equals the binary search's wherever the sequence is
sorted. A sequence holding NaN is not (torch's answer then depends on its probe order).
"""

from __future__ import annotations

import onnx_ir as ir

from pt2onnx.plugin import converter

from ._common import FLOATS, INTS, as_dtype, compute, operand_dtype
from ._dims import ints, normalize_dim, one_d, reduce_over, size, to_dtype, widen


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


def _insertion_points(op, sequence, values, dtype, *, right, out_int32, sorter=None):
    """For each value, how many entries of ``sequence`` (sorted along its last dim) precede it."""
    if sorter is not None:
        sequence = op.GatherElements(sequence, sorter, axis=-1)
    if op.rank_of(sequence) > 1:
        # Leading dims pair each row of the sequence with a row of values.
        sequence = op.Unsqueeze(sequence, ints(op, [-2]))
    values = op.Unsqueeze(as_dtype(op, values, dtype), ints(op, [-1]))

    def precedes(s, v):
        return op.Not(op.Greater(s, v) if right else op.GreaterOrEqual(s, v))

    before = compute(op, precedes, [sequence, values], dtype, FLOATS | INTS, cast_back=False)
    counts = reduce_over(op, "ReduceSum", op.Cast(before, to=ir.DataType.INT64), [-1], keepdims=False)
    return op.Cast(counts, to=ir.DataType.INT32) if out_int32 else counts


@converter("aten::searchsorted.Tensor", "aten::searchsorted.Scalar")
def searchsorted(op, sorted_sequence, self, *, out_int32=False, right=False, side=None, sorter=None):
    right = side == "right" if side is not None else right
    dtype = operand_dtype(op)
    return _insertion_points(op, sorted_sequence, self, dtype, right=right, out_int32=out_int32, sorter=sorter)


@converter("aten::bucketize.Tensor", "aten::bucketize.Scalar")
def bucketize(op, self, boundaries, *, out_int32=False, right=False):
    # bucketize's ``right`` is searchsorted's: boundaries[i-1] < x <= boundaries[i] counts
    # the boundaries below x.
    return _insertion_points(op, boundaries, self, operand_dtype(op), right=right, out_int32=out_int32)
