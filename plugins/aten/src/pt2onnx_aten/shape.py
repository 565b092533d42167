"""Shape manipulation and symbolic sizes."""

from __future__ import annotations

import onnx_ir as ir
import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

from pt2onnx.plugin import converter

from ._dims import shape_of
from .complex_numbers import is_complex


@converter("aten::view.default", "aten::reshape.default", "aten::_unsafe_view.default", complex_values=True)
def view(op, self, size):
    if is_complex(op.output_meta):
        size = [*size, 2]  # the (real, imaginary) pair stays the last dim
    # allowzero: a literal 0 means an empty dim in torch, "copy the input dim" in ONNX.
    allowzero = int(any(isinstance(s, int) and s == 0 for s in size))
    out = op.Reshape(self, op.shape_tensor(size), allowzero=allowzero)
    # A literal size of an input with symbolic sizes may have a symbolic size in torch's
    # record (e.g. x_dim2 * ((x_dim0 * x_dim1) // 6) for 8): a roundabout form of the literal,
    # which is what every input torch accepts gets (and Reshape fails where torch's view
    # does). The literal is kept; the output claims no static size that torch does not.
    recorded = op.output_meta.shape
    if out.shape is not None and any(isinstance(t, torch.SymInt) for t in recorded):
        dims = [None if isinstance(t, torch.SymInt) else d for d, t in zip(out.shape, recorded)]
        out.shape = ir.Shape(dims + list(out.shape)[len(dims) :])  # a complex value's pair stays
    return out


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
        parts.append(shape_of(op, self, start=0, end=start))
    parts.append(op.constant([-1]))
    if end < rank - 1:
        parts.append(shape_of(op, self, start=end + 1))
    return op.Reshape(self, op.Concat(*parts, axis=0) if len(parts) > 1 else parts[0])


@converter("aten::sym_size.int", complex_values=True)
def sym_size(op, self, dim):
    # Dims counted by torch's rank: a complex tensor's Value has a trailing dim of 2 more.
    axis = dim % max(_input_meta(op).dim(), 1)
    return op.Squeeze(shape_of(op, self, start=axis, end=axis + 1))


@converter("aten::sym_numel.default", complex_values=True)
def sym_numel(op, self):
    numel = op.ReduceProd(op.Shape(self), keepdims=0)
    return op.Div(numel, op.constant(2, ir.DataType.INT64)) if _input_meta(op).is_complex() else numel


def _input_meta(op):
    return op.node.args[0].meta["val"]


@converter("aten::sym_stride.int")
def sym_stride(op, self, dim):
    stride = op.output_meta
    if isinstance(stride, int):
        return stride
    val = _input_meta(op)
    axis = dim % val.dim()
    # A symbolic stride is expressible when the layout is contiguous: the trailing sizes' product.
    expected = 1
    for n in val.shape[axis + 1 :]:
        expected = expected * n
    if not statically_known_true(stride == expected):
        raise op.unsupported("self", f"stride {stride}", "a symbolic stride of a non-contiguous layout")
    return op.ReduceProd(shape_of(op, self, start=axis + 1), keepdims=0)


@converter("aten::sym_storage_offset.default")
def sym_storage_offset(op, self):
    offset = op.output_meta
    if isinstance(offset, int):
        return offset
    raise op.unsupported("self", f"storage offset {offset}", "ONNX tensors have no storage to be offset into")


@converter("aten::sym_is_contiguous.default")
def sym_is_contiguous(op, self, memory_format=None):
    val = _input_meta(op)
    contiguous = val.is_contiguous() if memory_format is None else val.is_contiguous(memory_format=memory_format)
    if not isinstance(contiguous, bool):
        raise op.unsupported("self", val.shape, "contiguity that depends on symbolic sizes")
    return contiguous
