"""Shape manipulation and symbolic sizes."""

from __future__ import annotations

from pt2onnx.plugin import converter


@converter("aten::view.default", "aten::reshape.default", "aten::_unsafe_view.default")
def view(op, self, size):
    # allowzero: a literal 0 means an empty dim in torch, "copy the input dim" in ONNX.
    allowzero = int(any(isinstance(s, int) and s == 0 for s in size))
    return op.Reshape(self, op.shape_tensor(size), allowzero=allowzero)


@converter("aten::flatten.using_ints")
def flatten(op, self, start_dim=0, end_dim=-1):
    rank = op.rank_of(self)
    if rank == 0:
        return op.Reshape(self, op.constant([1]))
    start, end = start_dim % rank, end_dim % rank
    if start == end:
        return self
    if end == rank - 1 and start == 1:
        return op.Flatten(self, axis=1)
    parts = []
    if start > 0:
        parts.append(op.Shape(self, start=0, end=start))
    parts.append(op.constant([-1]))
    if end < rank - 1:
        parts.append(op.Shape(self, start=end + 1))
    return op.Reshape(self, op.Concat(*parts, axis=0) if len(parts) > 1 else parts[0])


@converter("aten::sym_size.int")
def sym_size(op, self, dim):
    return op.Squeeze(op.Shape(self, start=dim, end=dim + 1 if dim != -1 else None))
