"""Joining and splitting: cat, stack, split, split_with_sizes, chunk, unbind."""

from __future__ import annotations

import onnx_ir as ir

from pt2onnx.plugin import converter

from ._dims import ints, normalize_dim, size, static_dims, to_dtype


@converter("aten::cat.default")
def cat(op, tensors, dim=0):
    rank = len(op.output_meta.shape)
    # torch skips 1-d empty tensors when joining tensors of higher rank (legacy behaviour).
    kept = [t for t in tensors if not (rank != 1 and op.rank_of(t) == 1 and static_dims(t) == [0])]
    inputs = [to_dtype(op, t, op.output_dtype) for t in kept]
    if len(inputs) == 1:
        return inputs[0] if inputs[0] is not tensors[0] else op.Identity(inputs[0])
    return op.Concat(*inputs, axis=normalize_dim(dim, rank))


@converter("aten::stack.default")
def stack(op, tensors, dim=0):
    axis = dim % len(op.output_meta.shape)
    inputs = [op.Unsqueeze(to_dtype(op, t, op.output_dtype), ints(op, [axis])) for t in tensors]
    return inputs[0] if len(inputs) == 1 else op.Concat(*inputs, axis=axis)


def _split(op, x, sizes, axis):
    """``x`` split along ``axis`` into pieces of ``sizes`` (ints or 1-d INT64 Values)."""
    if len(sizes) == 1:
        return (op.Identity(x),)
    outs = op.Split(x, op.shape_tensor(sizes), axis=axis, _outputs=len(sizes))
    return tuple(outs)


def _even_sizes(op, x, axis, piece, count):
    """``count`` sizes of ``piece`` each, the last one taking what is left of ``x.shape[axis]``."""
    total = static_dims(x)[axis]
    if isinstance(piece, int) and total is not None:
        return [piece] * (count - 1) + [total - piece * (count - 1)]
    piece_1d = piece if isinstance(piece, ir.Value) else ints(op, [piece])
    rest = op.Sub(size(op, x, axis), op.Mul(piece_1d, ints(op, [count - 1])))
    return [piece_1d] * (count - 1) + [rest]


@converter("aten::split_with_sizes.default")
def split_with_sizes(op, self, split_sizes, dim=0):
    return _split(op, self, list(split_sizes), normalize_dim(dim, op.rank_of(self)))


@converter("aten::split.Tensor")
def split(op, self, split_size, dim=0):
    axis = normalize_dim(dim, op.rank_of(self))
    count = len(op.output_meta)
    piece = op.Reshape(split_size, ints(op, [1])) if isinstance(split_size, ir.Value) else split_size
    return _split(op, self, _even_sizes(op, self, axis, piece, count), axis)


@converter("aten::chunk.default")
def chunk(op, self, chunks, dim=0):
    axis = normalize_dim(dim, op.rank_of(self))
    count = len(op.output_meta)
    total = static_dims(self)[axis]
    if total is not None:
        piece = -(-total // chunks)
    else:
        # ceil(n / chunks) for the symbolic n.
        piece = op.Div(op.Add(size(op, self, axis), ints(op, [chunks - 1])), ints(op, [chunks]))
    return _split(op, self, _even_sizes(op, self, axis, piece, count), axis)


@converter("aten::unbind.int")
def unbind(op, self, dim=0):
    axis = normalize_dim(dim, op.rank_of(self))
    count = len(op.output_meta)
    if count == 0:
        return ()
    return tuple(op.Squeeze(piece, ints(op, [axis])) for piece in _split(op, self, [1] * count, axis))
