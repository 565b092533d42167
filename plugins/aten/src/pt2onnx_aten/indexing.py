"""Reading and writing by index: index, _unsafe_index, index_put, index_select, gather,
embedding, nonzero.

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

import onnx_ir as ir

from pt2onnx.plugin import converter

from ._dims import expand_to, ints, normalize_dim, shape_of, to_dtype, widen


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
                hint="export with opset>=16",
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
    rank = op.rank_of(self)
    if rank == 0:
        flat = op.GatherElements(op.Reshape(self, ints(op, [1])), op.Reshape(index, ints(op, [1])), axis=0)
        return op.Reshape(flat, ints(op, []))
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


@converter("aten::nonzero.default")
def nonzero(op, self):
    mask = to_dtype(op, self, ir.DataType.BOOL)
    if op.rank_of(self) == 0:
        # torch gives (n, 0) for a 0-d input.
        coords = op.Transpose(op.NonZero(op.Reshape(mask, ints(op, [1]))), perm=[1, 0])
        return op.Slice(coords, ints(op, [0]), ints(op, [0]), ints(op, [1]))
    return op.Transpose(op.NonZero(mask), perm=[1, 0])
