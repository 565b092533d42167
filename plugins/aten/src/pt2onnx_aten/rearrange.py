"""Rearranging elements: flip, roll, repeat, tril, triu, and differences of neighbours (diff)."""

from __future__ import annotations

import math

import onnx_ir as ir

from pt2onnx.plugin import converter

from ._common import NUMBERS, compute
from ._dims import INT64_MAX, INT64_MIN, ints, normalize_dim, size, static_dims, to_dtype, widen


@converter("aten::flip.default")
def flip(op, self, dims):
    rank = op.rank_of(self)
    axes = sorted({normalize_dim(d, rank) for d in dims})
    if rank == 0 or not axes:
        return op.Identity(self)
    k = len(axes)
    return op.Slice(self, ints(op, [-1] * k), ints(op, [INT64_MIN] * k), ints(op, axes), ints(op, [-1] * k))


def _roll_axis(op, x, shift, axis):
    """``x`` rolled by ``shift`` along ``axis``; the shift is an int, or symbolic (``fftshift``
    rolls by half of each size, which is symbolic along a dynamic dim)."""
    n = static_dims(x)[axis]
    if n is not None and isinstance(shift, int):
        if n == 0 or shift % n == 0:
            return x
        cut = ints(op, [n - shift % n])
    else:
        n_1d = size(op, x, axis) if n is None else ints(op, [n])
        # An empty dim rolls to itself; Max keeps its modulus from being 0 (onnxruntime fails on it).
        cut = op.Sub(n_1d, op.Mod(op.shape_tensor([shift]), op.Max(n_1d, ints(op, [1]))))
    axes = ints(op, [axis])
    tail = op.Slice(x, cut, ints(op, [INT64_MAX]), axes)
    head = op.Slice(x, ints(op, [0]), cut, axes)
    return op.Concat(tail, head, axis=axis)


@converter("aten::roll.default")
def roll(op, self, shifts, dims=()):
    rank = op.rank_of(self)
    if not dims:
        # Without dims torch rolls the flattened tensor.
        sizes = static_dims(self)
        static = [d for d in sizes if d is not None]
        numel = math.prod(static) if len(static) == len(sizes) else None
        flat = op.Reshape(self, ints(op, [-1 if numel is None else numel]))
        return op.Reshape(_roll_axis(op, flat, shifts[0], 0), op.Shape(self), allowzero=1)
    out = self
    for shift, dim in zip(shifts, dims):
        out = _roll_axis(op, out, shift, normalize_dim(dim, rank))
    return out if out is not self else op.Identity(self)


@converter("aten::repeat.default")
def repeat(op, self, repeats):
    extra = len(repeats) - op.rank_of(self)
    x = op.Unsqueeze(self, ints(op, list(range(extra)))) if extra > 0 else self
    out = op.Tile(widen(op, x, "Tile"), op.shape_tensor(list(repeats)))
    return to_dtype(op, out, self.dtype)


def _trilu(op, x, diagonal, upper):
    k = op.constant(int(diagonal)) if isinstance(diagonal, int) else diagonal
    return to_dtype(op, op.Trilu(widen(op, x, "Trilu"), k, upper=upper), x.dtype)


@converter("aten::tril.default")
def tril(op, self, diagonal=0):
    return _trilu(op, self, diagonal, 0)


@converter("aten::triu.default")
def triu(op, self, diagonal=0):
    return _trilu(op, self, diagonal, 1)


@converter("aten::diff.default")
def diff(op, self, n=1, dim=-1, prepend=None, append=None):
    if n == 0:
        return self  # torch ignores prepend and append when it takes no difference
    axis = dim % op.rank_of(self)
    parts = [t for t in (prepend, self, append) if t is not None]
    x = op.Concat(*parts, axis=axis) if len(parts) > 1 else self
    for _ in range(n):
        later = op.Slice(x, ints(op, [1]), ints(op, [INT64_MAX]), ints(op, [axis]))
        earlier = op.Slice(x, ints(op, [0]), ints(op, [-1]), ints(op, [axis]))
        # torch takes the difference of bools as their exclusive or.
        x = (
            op.Xor(later, earlier)
            if op.output_dtype == ir.DataType.BOOL
            else compute(op, op.Sub, [later, earlier], op.output_dtype, NUMBERS)
        )
    return x
