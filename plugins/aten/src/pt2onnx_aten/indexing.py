"""Reading and writing by index: index, _unsafe_index, index_put, index_select, gather,
embedding, embedding_renorm (max_norm), embedding_bag, repeat_interleave's indices, nonzero.

Advanced indexing (``x[i, :, j]``) moves the indexed dims to the front, stacks the
broadcast index tensors into one ``[..., k]`` tensor and uses ``GatherND``/``ScatterND``.
Boolean masks become their ``NonZero`` coordinates. As in torch, the broadcast index
dims replace the indexed dims in place when those are adjacent, and go first otherwise.

Indices out of range: torch raises for an index outside [-n, n), and so does onnxruntime
(Gather, GatherElements, GatherND and ScatterND stop with an error), so a model never reads
past its data (``test_an_index_out_of_range_is_an_error_at_run_time``). One difference is
left: index_select, gather and embedding (and scatter) raise for a negative index in
torch, where ONNX counts it from the end; rejecting it in the graph would cost a
comparison over the index tensor on every run.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from pt2onnx.plugin import converter

from ._common import HALVES, D, reduce_extreme
from ._dims import expand_to, ints, normalize_dim, reduce_over, scalar_of, shape_of, size, to_dtype, widen


def _entries(op, indices):
    """``(axis, int64 index)`` for every indexed dim; a k-d boolean mask gives k of them."""
    entries = []
    axis = 0
    for index in indices:
        if index is None:
            axis += 1
        elif index.dtype == ir.DataType.BOOL:
            coords = op.NonZero(index)
            for j in range(op.rank_of(index)):
                entries.append((axis + j, op.Gather(coords, op.constant(j, ir.DataType.INT64), axis=0)))
            axis += op.rank_of(index)
        else:
            entries.append((axis, to_dtype(op, index, ir.DataType.INT64)))
            axis += 1
    return entries


class _Advanced:
    """The pieces of one advanced indexing of ``x``."""

    def __init__(self, op, x, indices):
        entries = _entries(op, indices)
        self.rank = op.rank_of(x)
        self.axes = [a for a, _ in entries]
        self.first = self.axes[0]
        self.adjacent = self.axes == list(range(self.first, self.first + len(self.axes)))
        self.perm = self.axes + [d for d in range(self.rank) if d not in self.axes]
        self.moved = x if self.perm == list(range(self.rank)) else op.Transpose(x, perm=self.perm)
        values = [i for _, i in entries]
        shape = op.Shape(values[0])
        for v in values[1:]:
            shape = op.Shape(op.Add(op.Expand(values[0], shape), v))
        self.shape = shape
        self.coords = op.Concat(*[op.Unsqueeze(op.Expand(v, shape), ints(op, [-1])) for v in values], axis=-1)

    def to_torch_layout(self, broadcast_rank):
        """The perm from the front-first layout to torch's (None when they agree)."""
        if not self.adjacent or self.first == 0:
            return None
        b, p = broadcast_rank, self.first
        rest = self.rank - len(self.axes)
        return list(range(b, b + p)) + list(range(b)) + list(range(b + p, b + rest))


@converter("aten::index.Tensor", "aten::_unsafe_index.Tensor")
def index(op, self, indices):
    adv = _Advanced(op, self, indices)
    out = op.GatherND(adv.moved, adv.coords)
    out_rank = len(op.output_meta.shape)
    perm = adv.to_torch_layout(out_rank - (adv.rank - len(adv.axes)))
    return out if perm is None else op.Transpose(out, perm=perm)


@converter("aten::index_put.default", "aten::_unsafe_index_put.default")
def index_put(op, self, indices, values, accumulate=False):
    adv = _Advanced(op, self, indices)
    k = len(adv.axes)
    front_shape = op.Concat(adv.shape, shape_of(op, adv.moved, start=k), axis=0)
    values = to_dtype(op, values, self.dtype)
    if adv.adjacent and adv.first > 0:
        # values broadcast against torch's layout of the indexed result: pre, index dims, post.
        torch_shape = op.Concat(
            shape_of(op, self, start=0, end=adv.first), adv.shape, shape_of(op, self, start=adv.first + k), axis=0
        )
        expanded = expand_to(op, values, torch_shape)
        b = op.rank_of(expanded) - (adv.rank - k) if op.rank_of(expanded) is not None else None
        if b is None:
            raise op.unsupported("indices", "unknown rank", "the rank of the broadcast indices must be known")
        torch_perm = adv.to_torch_layout(b)
        back = [torch_perm.index(i) for i in range(len(torch_perm))]
        updates = op.Transpose(expanded, perm=back)
    else:
        updates = expand_to(op, values, front_shape)
    if accumulate:
        if op.opset < 16:
            raise op.unsupported(
                "accumulate",
                True,
                f"ONNX ScatterND adds duplicates up from opset 16 (target: {op.opset})",
                since=16,
            )
        data = widen(op, adv.moved, "ScatterReduce")
        out = op.ScatterND(data, adv.coords, to_dtype(op, updates, data.dtype), reduction="add")
        out = to_dtype(op, out, self.dtype)
    else:
        out = op.ScatterND(adv.moved, adv.coords, updates)
    if adv.perm == list(range(adv.rank)):
        return out
    return op.Transpose(out, perm=[adv.perm.index(i) for i in range(adv.rank)])


@converter("aten::index_select.default")
def index_select(op, self, dim, index):
    flat_index = op.Reshape(index, ints(op, [-1]))
    if op.rank_of(self) == 0:
        return op.Reshape(op.Gather(op.Reshape(self, ints(op, [1])), flat_index, axis=0), ints(op, []))
    return op.Gather(self, flat_index, axis=normalize_dim(dim, op.rank_of(self)))


@converter("aten::gather.default")
def gather(op, self, dim, index, sparse_grad=False):
    if index.dtype not in (ir.DataType.INT32, ir.DataType.INT64):
        # torch checks the index dtype only when the index is not empty (an empty uint8 one passes).
        index = op.Cast(index, to=ir.DataType.INT64)
    if 0 in list(index.shape):
        # An empty index gathers nothing, whatever its rank (torch checks ranks only when it is not empty).
        return expand_to(op, scalar_of(op, 0, self.dtype), op.Shape(index))
    rank = op.rank_of(self)
    if rank == 0:
        flat = op.GatherElements(op.Reshape(self, ints(op, [1])), op.Reshape(index, ints(op, [1])), axis=0)
        return op.Reshape(flat, op.Shape(index))  # index's shape: () or (1,)
    axis = normalize_dim(dim, rank)
    return op.GatherElements(crop_to(op, self, index, axis), index, axis=axis)


def crop_to(op, x, index, axis):
    """``x`` cut to ``index``'s sizes on every dim but ``axis`` (torch lets index be smaller)."""
    others = [d for d in range(op.rank_of(x)) if d != axis]
    xs, ys = list(x.shape), list(index.shape)
    if all(isinstance(xs[d], int) and xs[d] == ys[d] for d in others) or not others:
        return x
    ends = op.Gather(op.Shape(index), ints(op, others), axis=0)
    return op.Slice(x, ints(op, [0] * len(others)), ends, ints(op, others))


@converter("aten::embedding.default")
def embedding(op, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    # padding_idx only changes gradients.
    return op.Gather(weight, indices, axis=0)


@converter("aten::embedding_renorm.default", since=16)
def embedding_renorm(op, self, indices, max_norm, norm_type):
    """``self`` with each row that ``indices`` name scaled to ``max_norm`` where its
    ``norm_type``-norm exceeds it (F.embedding's ``max_norm``), by torch's kernel's factor
    ``max_norm / (norm + 1e-7)``. The norm is taken in float32 for half precision and
    rounded to it, as torch's kernel reads it; like torch's, the norm of a row of two or
    more elements overflows to inf (the row then becomes NaN or 0) where its sum does."""
    x = op.Cast(self, to=D.FLOAT) if self.dtype in HALVES else self
    magnitude = op.Abs(x)
    axis = [1]
    # torch's norm of one element is its magnitude; of more, a plain sum that may overflow.
    if norm_type == float("inf") or (self.shape is not None and self.shape[1] == 1):
        # torch's norm of a row holding NaN is NaN: the row is left as it is.
        norm = reduce_extreme(op, "ReduceMax", magnitude, axis, keepdim=1)
    elif norm_type == 1:
        norm = reduce_over(op, "ReduceSum", magnitude, axis, keepdims=1)
    elif norm_type == 2:
        norm = reduce_over(op, "ReduceL2", x, axis, keepdims=1)
    else:
        p = op.constant(float(norm_type), x.dtype)
        total = reduce_over(op, "ReduceSum", op.Pow(magnitude, p), axis, keepdims=1)
        norm = op.Pow(total, op.Reciprocal(p))
    if self.dtype in HALVES:
        norm = op.Cast(op.Cast(norm, to=self.dtype), to=D.FLOAT)
    limit = op.constant(float(max_norm), x.dtype)
    scaled = op.Mul(x, op.Div(limit, op.Add(norm, op.constant(1e-7, x.dtype))))
    # Rows named at least once: a count scattered by add (repeated indices are summed).
    rows = op.Slice(op.Shape(self), ints(op, [0]), ints(op, [1]))
    flat = op.Reshape(to_dtype(op, indices, D.INT64), ints(op, [-1]))
    named = op.ScatterElements(
        expand_to(op, op.constant(0, D.INT64), rows),
        flat,
        expand_to(op, op.constant(1, D.INT64), op.Shape(flat)),
        axis=0,
        reduction="add",
    )
    renorm = op.And(op.Unsqueeze(op.Greater(named, op.constant(0, D.INT64)), ints(op, [1])), op.Greater(norm, limit))
    return to_dtype(op, op.Where(renorm, scaled, x), self.dtype)


@converter("aten::repeat_interleave.Tensor", since=16)
def repeat_interleave_indices(op, repeats, *, output_size=None):
    """``i`` repeated ``repeats[i]`` times, for every ``i``: the index that
    ``x.repeat_interleave(repeats_tensor, dim)`` gathers with (torch's decomposition of it).

    Each output position counts the runs that end at or before it: ones scattered (added,
    so that empty runs ending together count each) at the run ends, then a CumSum."""
    i64 = D.INT64
    ends = op.CumSum(to_dtype(op, repeats, i64), op.constant(0, i64))
    total = op.Slice(op.Concat(ints(op, [0]), ends, axis=0), ints(op, [-1]), ints(op, [2**62]))
    inner_ends = op.Slice(ends, ints(op, [0]), ints(op, [-1]))
    marks = expand_to(op, op.constant(0, i64), op.Add(total, ints(op, [1])))
    marks = op.ScatterElements(
        marks, inner_ends, expand_to(op, op.constant(1, i64), op.Shape(inner_ends)), axis=0, reduction="add"
    )
    index = op.CumSum(op.Slice(marks, ints(op, [0]), total), op.constant(0, i64))
    return to_dtype(op, index, repeats.dtype)


@converter("aten::nonzero.default")
def nonzero(op, self):
    mask = to_dtype(op, self, ir.DataType.BOOL)
    if op.rank_of(self) == 0:
        # torch gives (n, 0) for a 0-d input.
        coords = op.Transpose(op.NonZero(op.Reshape(mask, ints(op, [1]))), perm=[1, 0])
        return op.Slice(coords, ints(op, [0]), ints(op, [0]), ints(op, [1]))
    return op.Transpose(op.NonZero(mask), perm=[1, 0])


_SUM, _MEAN, _MAX = 0, 1, 2


@converter("aten::_embedding_bag.default", "aten::_embedding_bag_forward_only.default", since=16)
def embedding_bag(
    op,
    weight,
    indices,
    offsets,
    scale_grad_by_freq=False,
    mode=_SUM,
    sparse=False,
    per_sample_weights=None,
    include_last_offset=False,
    padding_idx=-1,
):
    """Reduce the rows of ``weight`` that ``indices`` name, bag by bag.

    Bag ``b`` holds the indices from ``offsets[b]`` up to the next bag's start (the end of
    ``indices`` for the last bag, ``offsets[-1]`` with ``include_last_offset``). Each index
    gets its bag id from a CumSum over ones scattered at the bag starts; an index that
    torch skips (``padding_idx``, or past ``offsets[-1]``) goes to one extra bag, cut off at
    the end. The rows are then scattered into the bags with ``reduction="add"``/``"max"``
    (ONNX's scatters reduce by add from opset 16, by max and min from 18);
    mean divides by the count, and an empty bag gives 0 in every mode.

    Offsets are non-decreasing, as torch documents, and with ``include_last_offset`` their
    last one is ``len(indices)``: outside that contract torch's own kernels disagree (float32
    sum stops the last bag at ``offsets[-1]``; float64 sum, mean and max read on to the
    end), and the model follows float32 sum.

    The other three outputs are those of torch's CPU kernel: ``offset2bag`` the bag id of
    each index (empty where torch's meta says so: sum mode on its fast path), ``bag_size``
    the count of each bag in mean and max modes (zeros in sum mode), ``max_indices`` in max
    mode the index of the first row reaching the maximum (0 for an empty bag), in mean mode
    the count again, in sum mode zeros. Their sizes follow torch's meta functions, which
    the exported program records: for ``_forward_only`` with ``include_last_offset`` they
    give ``bag_size`` one more entry (0) in every mode and ``max_indices`` one entry per bag,
    where the CPU kernel gives ``bag_size`` one entry per bag in mean and max modes and
    ``max_indices`` one more in sum mode.
    F.embedding_bag and nn.EmbeddingBag read only the first output: the others are pruned
    from the model unless it uses them.
    """
    if mode == _MAX and op.opset < 18:
        raise op.unsupported(
            "mode", "max", f"ONNX ScatterND reduces by max from opset 18 (target: {op.opset})", since=18
        )
    i64 = ir.DataType.INT64
    zero, one = op.constant(0, i64), op.constant(1, i64)
    indices = to_dtype(op, indices, i64)
    offsets = to_dtype(op, offsets, i64)
    starts = op.Slice(offsets, ints(op, [0]), ints(op, [-1])) if include_last_offset else offsets
    n = op.Shape(indices)
    bags = op.Shape(starts)
    positions = op.Range(zero, op.Squeeze(n, ints(op, [0])), one)

    # The bag of each index: how many bag starts lie at or before it, less one.
    marks = expand_to(op, zero, op.Add(n, ints(op, [1])))
    marks = op.ScatterElements(marks, starts, expand_to(op, one, bags), axis=0, reduction="add")
    bag = op.Sub(op.CumSum(op.Slice(marks, ints(op, [0]), n), zero), one)
    skip = None
    if padding_idx >= 0:
        skip = op.Equal(indices, op.constant(int(padding_idx), i64))
    if include_last_offset:
        past_end = op.GreaterOrEqual(positions, op.Gather(offsets, op.constant(-1, i64), axis=0))
        skip = past_end if skip is None else op.Or(skip, past_end)
    target = bag if skip is None else op.Where(skip, op.Squeeze(bags, ints(op, [0])), bag)
    target_nd = op.Unsqueeze(target, ints(op, [-1]))

    count = op.ScatterElements(
        expand_to(op, zero, op.Add(bags, ints(op, [1]))), target, expand_to(op, one, n), axis=0, reduction="add"
    )
    count = op.Slice(count, ints(op, [0]), bags)

    rows = widen(op, op.Gather(weight, indices, axis=0), "ScatterReduce")
    full_shape = op.Concat(op.Add(bags, ints(op, [1])), size(op, weight, 1), axis=0)
    if per_sample_weights is not None:
        rows = op.Mul(rows, op.Unsqueeze(to_dtype(op, per_sample_weights, rows.dtype), ints(op, [1])))
    if mode == _MAX:
        lowest = op.constant(float("-inf"), rows.dtype)
        reduced = op.ScatterND(expand_to(op, lowest, full_shape), target_nd, rows, reduction="max")
    else:
        reduced = op.ScatterND(
            expand_to(op, op.constant(0.0, rows.dtype), full_shape), target_nd, rows, reduction="add"
        )
    out = op.Slice(reduced, ints(op, [0]), bags)
    if mode == _MEAN:
        out = op.Div(out, op.Cast(op.Unsqueeze(op.Max(count, one), ints(op, [1])), to=out.dtype))
    if mode == _MAX:
        filled = op.Unsqueeze(op.Greater(count, zero), ints(op, [1]))
        out = op.Where(filled, out, op.constant(0.0, out.dtype))
    output = to_dtype(op, out, weight.dtype)

    # The sizes of the other outputs are those of torch's meta functions, which the
    # exported program records (torch's CPU kernel disagrees with them in places, see above).
    empty = op.output_meta[1].shape[0]
    offset2bag = op.constant(np.zeros(0, np.int64)) if isinstance(empty, int) and empty == 0 else bag
    bag_size = count if mode != _SUM else expand_to(op, zero, bags)
    if include_last_offset and "forward_only" in str(op.node.target):
        bag_size = op.Concat(bag_size, ints(op, [0]), axis=0)
    if mode == _MAX:
        # The first index in each bag whose row reaches the maximum, as torch's kernel keeps it.
        reached = op.Equal(rows, op.Gather(reduced, target, axis=0))
        candidate = op.Where(reached, op.Unsqueeze(positions, ints(op, [1])), op.Unsqueeze(n, ints(op, [0])))
        first = op.ScatterND(expand_to(op, n, full_shape), target_nd, candidate, reduction="min")
        first = op.Slice(first, ints(op, [0]), bags)
        max_indices = op.Gather(op.Concat(indices, ints(op, [0]), axis=0), first, axis=0)
    elif mode == _MEAN:
        max_indices = count
    else:
        max_indices = expand_to(op, zero, bags)
    # In the dtype of the offsets (int32 or int64), as torch gives them.
    sides = [
        to_dtype(op, v, op.dtype(m.dtype)) for v, m in zip((offset2bag, bag_size, max_indices), op.output_meta[1:])
    ]
    return output, *sides
