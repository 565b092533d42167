"""``op.constant``'s dtype: an onnx_ir.DataType or a torch.dtype; a name is a clear error."""

from __future__ import annotations

import types

import onnx_ir as ir
import pytest
import torch

import pt2onnx
from pt2onnx.errors import ConversionError
from pt2onnx.plugin import hookimpl


def _relu_plus(dtype) -> types.ModuleType:
    """A plugin converting relu as ``Relu(x) + constant(0.5, dtype)``."""
    plugin = types.ModuleType(f"relu_plus_{type(dtype).__name__}")

    @hookimpl
    def pt2onnx_register_converters(register):
        register.converter("aten::relu.default", lambda op, self: op.Add(op.Relu(self), op.constant(0.5, dtype)))

    plugin.pt2onnx_register_converters = pt2onnx_register_converters  # type: ignore[attr-defined]
    return plugin


@pytest.mark.parametrize("dtype", [ir.DataType.FLOAT, torch.float32], ids=["onnx_ir", "torch"])
def test_constant_takes_an_onnx_or_a_torch_dtype(dtype):
    x = torch.randn(4, 3)
    result = pt2onnx.export(torch.nn.ReLU(), (x,), plugins=[_relu_plus(dtype)])
    torch.testing.assert_close(result.run(x), torch.relu(x) + 0.5)


def test_constant_with_a_dtype_name_is_a_clear_error():
    with pytest.raises(
        ConversionError, match=r"dtype must be an onnx_ir.DataType or a torch.dtype .* got str 'float32'"
    ):
        pt2onnx.export(torch.nn.ReLU(), (torch.randn(2, 2),), plugins=[_relu_plus("float32")])
