"""Dtype conversions and scalars: _to_copy, to, type_as, scalar_tensor, _local_scalar_dense.

Device, layout, pinning and memory format mean nothing in ONNX and are ignored. Casting
to bool is torch's truth value (nonzero and NaN are True), as ONNX Cast does.
"""

from __future__ import annotations

import onnx_ir as ir

from pt2onnx.plugin import converter

from ._common import as_dtype
from .complex_numbers import is_complex


def _cast(op, self):
    # An Identity keeps the output a value of its own even when nothing changes.
    return op.Identity(self) if self.dtype == op.output_dtype else op.Cast(self, to=op.output_dtype)


@converter("aten::_to_copy.default", "aten::to.dtype_layout", complex_values=True)
def to_copy(op, self, **kwargs):
    into, out_of = is_complex(op.output_meta), is_complex(op.node.args[0].meta.get("val"))
    if not (into or out_of):
        return _cast(op, self)
    # Complex values are (..., 2) real tensors: real -> complex adds a zero imaginary part,
    # complex -> real keeps the real part (as torch does, with a warning).
    real = op.dtype(op.output_meta.real.dtype if into else op.output_meta.dtype)
    if into and out_of:
        return op.Identity(self) if self.dtype == real else op.Cast(self, to=real)
    last = op.constant([-1], ir.DataType.INT64)
    if into:
        x = op.Unsqueeze(self if self.dtype == real else op.Cast(self, to=real), last)
        return op.Concat(x, op.Mul(x, op.constant(0, real)), axis=-1)
    part = op.Squeeze(
        op.Slice(self, op.constant([0], ir.DataType.INT64), op.constant([1], ir.DataType.INT64), last), last
    )
    return part if part.dtype == real else op.Cast(part, to=real)


@converter("aten::to.dtype")
def to_dtype(op, self, dtype, non_blocking=False, copy=False, memory_format=None):
    return _cast(op, self)


@converter("aten::to.device")
def to_device(op, self, device, dtype, non_blocking=False, copy=False, memory_format=None):
    return _cast(op, self)


@converter("aten::type_as.default")
def type_as(op, self, other):
    return _cast(op, self)


@converter("aten::scalar_tensor.default")
def scalar_tensor(op, s, **kwargs):
    return as_dtype(op, s, op.output_dtype)


@converter("aten::_local_scalar_dense.default")
def local_scalar_dense(op, self):
    # A 0-d (or one-element) tensor as a symbolic scalar: int64, double or bool.
    return as_dtype(op, op.Reshape(self, op.constant([], ir.DataType.INT64)), op.output_dtype)
