"""A converter that declines a node (``raise op.decline(reason)``) leaves it to the one it shadows."""

from __future__ import annotations

import types

import pytest
import torch

import pt2onnx
from pt2onnx.errors import ConversionError
from pt2onnx.plugin import converter, hookimpl


def _plugin(name: str, op: str, fn) -> types.ModuleType:
    module = types.ModuleType(name)

    @hookimpl
    def pt2onnx_register_converters(register):
        register.converter(op, fn)

    module.pt2onnx_register_converters = pt2onnx_register_converters
    return module


@converter("aten::relu.default")
def float32_relu(op, x):
    """Max(x, 0) for float32; declines any other dtype, after emitting nodes that must not stay."""
    if op.dtype_of(x) != op.dtype(torch.float32):
        op.Neg(op.Add(x, 2.5))  # a node and a promoted constant, both to be removed with the decline
        raise op.decline("float32 only")
    return op.Max(x, op.constant(0.0, op.dtype_of(x)))


class TwoRelus(torch.nn.Module):
    def forward(self, x, y):
        return torch.relu(x), torch.relu(y)


def test_a_declined_node_goes_to_the_converter_it_shadows():
    x, y = torch.randn(3, 4), torch.randn(3, 4, dtype=torch.float64)
    result = pt2onnx.export(TwoRelus(), (x, y), plugins=[_plugin("float32_relu", "aten::relu.default", float32_relu)])
    # optimize=True would remove dead nodes anyway: look at the graph as translated.
    translated = pt2onnx.export(
        TwoRelus(), (x, y), plugins=[_plugin("float32_relu", "aten::relu.default", float32_relu)], optimize=False
    )
    assert sorted(n.op_type for n in translated.model.graph) == ["Constant", "Max", "Relu"]
    assert not any("2.5" in name for name in translated.model.graph.initializers)
    usage = {u.plugin: u for u in result.report.ops if u.op == "aten::relu.default"}
    assert (usage["float32_relu"].count, usage["float32_relu"].declined_by) == (1, ())
    assert usage["float32_relu"].shadowed == ("aten [builtin]",)
    assert (usage["aten"].count, usage["aten"].declined_by, usage["aten"].shadowed) == (1, ("float32_relu",), ())
    assert "aten [builtin] (declined by float32_relu)" in str(result.report)
    check = result.verify(x, y)
    assert check.ok, check


@torch.library.custom_op("pt2onnx_decline_test::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return 2 * x


@twice.register_fake
def _(x):
    return torch.empty_like(x)


def test_every_converter_declining_stops_the_export_with_their_reasons():
    def never(op, x):
        raise op.decline("this test's converter takes nothing")

    class Twice(torch.nn.Module):
        def forward(self, x):
            return twice(x)

    with pytest.raises(ConversionError) as caught:
        pt2onnx.export(Twice(), (torch.randn(2, 3),), plugins=[_plugin("never", "pt2onnx_decline_test::twice", never)])
    text = str(caught.value)
    assert "every converter of pt2onnx_decline_test::twice.default declined this node" in text
    assert "never: this test's converter takes nothing" in text
    assert "test_converter_decline.py" in text  # the user's source line
    assert "-p no:NAME" in text
