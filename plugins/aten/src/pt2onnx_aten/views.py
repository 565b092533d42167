"""Views: permute, expand, squeeze/unsqueeze, select, slice, transpose, diagonal, as_strided, ...

ONNX has no views: each is a copy that reads like the view's result. Sizes that are
symbolic come from ``Shape`` ops, never from the example input.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
from torch.fx.experimental.symbolic_shapes import statically_known_true

from pt2onnx.plugin import converter

from ._dims import INT64_MAX, expand_to, ints, normalize_dim, one_d, shape_of, size, static_dims
from .complex_numbers import torch_rank


@converter("aten::permute.default")
def permute(op, self, dims):
    rank = op.rank_of(self)
    perm = [normalize_dim(d, rank) for d in dims]
    if perm == list(range(rank)):
        return self
    return op.Transpose(self, perm=perm)


@converter("aten::transpose.int", "aten::swapaxes.default", "aten::swapdims.default")
def transpose(op, self, dim0, dim1):
    rank = op.rank_of(self)
    a, b = normalize_dim(dim0, rank), normalize_dim(dim1, rank)
    if a == b:  # a 0-d tensor too (torch accepts dims 0 and -1 for it)
        return self
    perm = list(range(rank))
    perm[a], perm[b] = perm[b], perm[a]
    return op.Transpose(self, perm=perm)


@converter("aten::movedim.int", "aten::movedim.intlist")
def movedim(op, self, source, destination):
    rank = op.rank_of(self)
    sources = [source] if isinstance(source, int) else list(source)
    destinations = [destination] if isinstance(destination, int) else list(destination)
    src = [normalize_dim(d, rank) for d in sources]
    dst = [normalize_dim(d, rank) for d in destinations]
    rest = iter(d for d in range(rank) if d not in src)
    moved = dict(zip(dst, src))
    perm = [moved[i] if i in moved else next(rest) for i in range(rank)]
    return self if perm == list(range(rank)) else op.Transpose(self, perm=perm)


@converter("aten::expand.default")
def expand(op, self, size, *, implicit=False):
    # -1 keeps the input's size; Expand broadcasts a 1 to the input's size.
    sizes = [1 if isinstance(s, int) and s == -1 else s for s in size]
    if sizes == static_dims(self):
        return self
    return expand_to(op, self, op.shape_tensor(sizes))


@converter("aten::expand_as.default")
def expand_as(op, self, other):
    return expand_to(op, self, op.Shape(other))


@converter("aten::squeeze.default", "aten::squeeze.dim", "aten::squeeze.dims")
def squeeze(op, self, dim=None):
    rank = op.rank_of(self)
    if rank == 0:
        return self
    dims = range(rank) if dim is None else [dim] if isinstance(dim, int) else dim
    shape = static_dims(self)
    axes = sorted({d % rank for d in dims if shape[d % rank] == 1})
    if rank - len(axes) != len(op.output_meta.shape):
        raise op.unsupported("dim", dim, "whether a symbolic dim has size 1 is known only when the model runs")
    return op.Squeeze(self, ints(op, axes)) if axes else self


@converter("aten::unsqueeze.default", complex_values=True)
def unsqueeze(op, self, dim):
    return op.Unsqueeze(self, ints(op, [dim % (torch_rank(op, self) + 1)]))


@converter("aten::select.int")
def select(op, self, dim, index):
    index = index if isinstance(index, ir.Value) else op.constant(int(index), ir.DataType.INT64)
    return op.Gather(self, index, axis=normalize_dim(dim, op.rank_of(self)))


def _is_whole(start, end, step):
    return (
        (start is None or (isinstance(start, int) and start == 0))
        and (end is None or (isinstance(end, int) and end >= INT64_MAX))
        and step == 1
    )


@converter("aten::slice.Tensor", complex_values=True)
def slice_(op, self, dim=0, start=None, end=None, step=1):
    if _is_whole(start, end, step):
        return self
    axis = normalize_dim(dim, torch_rank(op, self))
    starts = one_d(op, 0 if start is None else start)
    ends = one_d(op, INT64_MAX if end is None else end)
    return op.Slice(self, starts, ends, ints(op, [axis]), one_d(op, step))


@converter("aten::narrow.default")
def narrow(op, self, dim, start, length):
    axis = normalize_dim(dim, op.rank_of(self))
    if isinstance(start, int) and isinstance(length, int):
        # A negative start counts from the end; an end of 0 there means "up to the end".
        end = start + length if start >= 0 or start + length < 0 else INT64_MAX
        return op.Slice(self, ints(op, [start]), ints(op, [end]), ints(op, [axis]))
    begin = one_d(op, start)
    return op.Slice(self, begin, op.Add(begin, one_d(op, length)), ints(op, [axis]))


@converter("aten::unflatten.int")
def unflatten(op, self, dim, sizes):
    rank = op.rank_of(self)
    axis = normalize_dim(dim, rank)
    sizes = list(sizes)
    if any(isinstance(s, int) and s == -1 for s in sizes):
        known = [s for s in sizes if not (isinstance(s, int) and s == -1)]
        product = op.ReduceProd(op.shape_tensor(known), keepdims=1) if known else ints(op, [1])
        inferred = op.Div(size(op, self, axis), product)
        sizes = [inferred if isinstance(s, int) and s == -1 else s for s in sizes]
    parts = [op.shape_tensor(sizes)]
    if axis > 0:
        parts.insert(0, shape_of(op, self, start=0, end=axis))
    if axis < rank - 1:
        parts.append(shape_of(op, self, start=axis + 1))
    shape = op.Concat(*parts, axis=0) if len(parts) > 1 else parts[0]
    return op.Reshape(self, shape, allowzero=1)


@converter("aten::diagonal.default")
def diagonal(op, self, offset=0, dim1=0, dim2=1):
    rank = op.rank_of(self)
    d1, d2 = normalize_dim(dim1, rank), normalize_dim(dim2, rank)
    perm = [d for d in range(rank) if d not in (d1, d2)] + [d1, d2]
    x = self if perm == list(range(rank)) else op.Transpose(self, perm=perm)
    if offset > 0:
        x = op.Slice(x, ints(op, [offset]), ints(op, [INT64_MAX]), ints(op, [-1]))
    elif offset < 0:
        x = op.Slice(x, ints(op, [-offset]), ints(op, [INT64_MAX]), ints(op, [-2]))
    # The diagonal of the leading L x L square, read from its flattening with step L + 1.
    length = op.Min(shape_of(op, x, start=-2, end=-1), shape_of(op, x, start=-1))
    square = op.Slice(x, ints(op, [0, 0]), op.Concat(length, length, axis=0), ints(op, [-2, -1]))
    flat_shape = op.Concat(shape_of(op, square, start=0, end=-2), op.Mul(length, length), axis=0)
    flat = op.Reshape(square, flat_shape, allowzero=1)
    step = op.Add(length, ints(op, [1]))
    return op.Slice(flat, ints(op, [0]), ints(op, [INT64_MAX]), ints(op, [-1]), step)


@converter("aten::as_strided.default")
def as_strided(op, self, size, stride, storage_offset=None):
    val = op.node.args[0].meta["val"]
    contiguous, offset = val.is_contiguous(), val.storage_offset()
    if not (statically_known_true(contiguous) and statically_known_true(offset == 0)):
        raise op.unsupported(
            "self",
            f"strides {tuple(val.stride())}, offset {offset}",
            "as_strided reads the input's storage, which ONNX has only for a contiguous input",
        )
    flat = op.Reshape(self, ints(op, [-1]))
    start = 0 if storage_offset is None else storage_offset
    if all(isinstance(v, int) for v in (*size, *stride, start)):
        # The flat storage index of every output element, as a constant.
        index = np.full(tuple(size), start, dtype=np.int64)
        for axis, (n, s) in enumerate(zip(size, stride)):
            shape = [1] * len(size)
            shape[axis] = n
            index = index + (np.arange(n, dtype=np.int64) * s).reshape(shape)
        return op.Gather(flat, op.constant(index, ir.DataType.INT64), axis=0)
    # Symbolic sizes, strides or offset: the same sum, from a Range over each dim.
    index = op.Reshape(one_d(op, start), ints(op, [1] * len(size)))
    for axis, (n, s) in enumerate(zip(size, stride)):
        steps = op.Mul(op.Range(op.constant(0), op.Squeeze(one_d(op, n)), op.constant(1)), one_d(op, s))
        shape = [1] * len(size)
        shape[axis] = -1
        index = op.Add(index, op.Reshape(steps, ints(op, shape)))
    return op.Gather(flat, index, axis=0)
