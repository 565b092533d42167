"""``modules_as_functions``: chosen module calls become ONNX local functions (one per class and
configuration, called per instance); onnxruntime gives the numerics of the flat graph."""

from __future__ import annotations

import onnx
import pytest
import torch

import pt2onnx

MODES = pytest.mark.parametrize("strict", [False, True], ids=["nonstrict", "strict"])
BATCH = torch.export.Dim("batch", min=1, max=64)


class Block(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(width, width)
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x):
        return self.norm(self.lin(x).relu() + x)


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(4), Block(4), Block(4)])
        self.wide = Block(6)
        self.up = torch.nn.Linear(4, 6)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.wide(self.up(x))


def _calls(graph) -> list[str]:
    return [n.op_type for n in graph if n.domain == "pt2onnx.local"]


def _export(selection, strict, **options):
    torch.manual_seed(0)
    model, x = Net().eval(), torch.randn(2, 4)
    result = pt2onnx.export(model, (x,), strict=strict, modules_as_functions=selection, **options)
    onnx.checker.check_model(result.model_proto, full_check=True)
    flat = pt2onnx.export(model, (x,), strict=strict)
    return result, flat, x


@MODES
def test_one_function_per_class_and_configuration(strict):
    result, flat, _ = _export([Block], strict)
    assert sorted(result.model.functions) == [("pt2onnx.local", "Block", ""), ("pt2onnx.local", "Block_1", "")]
    assert _calls(result.model.graph) == ["Block", "Block", "Block", "Block_1"]
    for name in result.model.graph.initializers:
        assert name.startswith(("blocks.", "wide.", "up.")), name
    y = torch.randn(2, 4)
    torch.testing.assert_close(result.run(y), flat.run(y), rtol=0, atol=0)
    assert result.verify(y).ok


@MODES
def test_all_modules_nest_functions(strict):
    result, flat, x = _export(True, strict)
    names = {f.name for f in result.model.functions.values()}
    assert {"Block", "Linear", "LayerNorm"} <= names
    block = result.model.functions[("pt2onnx.local", "Block", "")]
    assert {"Linear", "LayerNorm"} <= set(_calls(block))
    torch.testing.assert_close(result.run(x), flat.run(x), rtol=0, atol=0)


def test_functions_with_dynamic_batch():
    torch.manual_seed(0)
    model = Net().eval()
    result = pt2onnx.export(model, (torch.randn(3, 4),), dynamic_shapes={"x": {0: BATCH}}, modules_as_functions=[Block])
    assert "Block" in _calls(result.model.graph)
    for batch in (1, 5):
        assert result.verify(torch.randn(batch, 4)).ok
