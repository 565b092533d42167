"""Types and shapes of ONNX values, taken from torch's ``meta["val"]``.

Symbolic dims are named after the user's ``Dim`` (``batch``, ``2*seq``); dims torch
created itself keep torch's symbol names (``s77``). A complex tensor is a real one with a
trailing dim of 2 (real and imaginary parts), as ONNX's ``DFT`` represents it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import onnx_ir as ir
import torch
from onnx_ir.tensor_adapters import from_torch_dtype

__all__ = ["DimNames", "ir_type_and_shape"]

_SYMBOL = re.compile(r"\b[a-z]\d+\b")


class DimNames:
    """Maps torch's shape symbols (``s77``) to the names of the user's ``Dim`` objects."""

    def __init__(self, names: Mapping[str, str] | None = None) -> None:
        self.names = dict(names or {})

    def dim(self, d: int | torch.SymInt) -> int | str:
        """An ONNX dim for a torch size: an int, or a symbolic name."""
        if isinstance(d, int):
            return d
        expr = d.node.expr
        if expr.is_number:
            return int(expr)
        text = str(expr)
        if text in self.names:
            return self.names[text]
        return _SYMBOL.sub(lambda m: self.names.get(m.group(0), m.group(0)), text).replace(" ", "")

    def shape(self, sizes: Any) -> ir.Shape:
        """An ONNX shape for ``tensor.shape``."""
        return ir.Shape([self.dim(d) for d in sizes])


def ir_type_and_shape(val: Any, dims: DimNames) -> tuple[ir.TypeProtocol, ir.Shape] | None:
    """The ONNX type and shape of a ``meta["val"]`` entry, or None when it is not a value."""
    if isinstance(val, torch.Tensor):
        if val.is_complex():
            # Complex values travel as real tensors with a trailing dim of 2 (real, imaginary), as DFT takes them.
            real = torch.empty((), dtype=val.dtype).real.dtype
            return ir.TensorType(from_torch_dtype(real)), ir.Shape([*dims.shape(val.shape), 2])
        return ir.TensorType(from_torch_dtype(val.dtype)), dims.shape(val.shape)
    if isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool):
        return ir.TensorType(ir.DataType.INT64), ir.Shape([])
    if isinstance(val, (torch.SymBool, bool)):
        return ir.TensorType(ir.DataType.BOOL), ir.Shape([])
    if isinstance(val, (torch.SymFloat, float)):
        return ir.TensorType(ir.DataType.DOUBLE), ir.Shape([])
    return None
