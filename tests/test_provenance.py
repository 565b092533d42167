"""Provenance: every ONNX node says which FX node, aten op, module and user line made it,
in strict and non-strict mode, inside HOP bodies too; initializers map back to modules."""

from __future__ import annotations

import inspect
from pathlib import Path

import onnx_ir as ir
import pytest
import torch
from torch._higher_order_ops.map import map as hop_map
from torch._higher_order_ops.scan import scan

import pt2onnx
from pt2onnx.project import project_root

# Provenance shows source files relative to the project root by default (source_paths="relative").
THIS_FILE = Path(__file__).resolve().relative_to(project_root()).as_posix()
MODES = pytest.mark.parametrize("strict", [False, True], ids=["nonstrict", "strict"])
KEYS = ("pt2onnx.fx_node", "pt2onnx.op")


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x).relu()  # the block's line


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(), Block()])
        self.register_buffer("scale", torch.full((4,), 2.0))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x * self.scale  # the net's line


class MapBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Block()

    def forward(self, xs):
        return hop_map(lambda x: self.block(x) + 1, xs)


class Mapped(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = MapBlock()

    def forward(self, xs):
        return self.inner(xs)


def _line_of(text: str, obj) -> int:
    lines, start = inspect.getsourcelines(obj)
    return start + next(i for i, line in enumerate(lines) if text in line)


def _all_nodes(model: ir.Model):
    yield from model.graph.all_nodes()
    for function in model.functions.values():
        yield from function.all_nodes()


@MODES
def test_every_node_has_provenance_and_module_path(strict):
    result = pt2onnx.export(Net().eval(), (torch.randn(2, 4),), strict=strict)
    assert result.verify(torch.randn(2, 4)).ok
    for node in _all_nodes(result.model):
        for key in KEYS:
            assert key in node.metadata_props, (node, dict(node.metadata_props))
    by_module = {node.metadata_props.get("pt2onnx.module") for node in result.model.graph}
    assert {"blocks.0.lin", "blocks.1.lin"} <= by_module
    gemm = next(n for n in result.model.graph if n.metadata_props.get("pt2onnx.module") == "blocks.1.lin")
    assert gemm.metadata_props["pt2onnx.module_class"] == "torch.nn.modules.linear.Linear"


@MODES
def test_source_of_names_the_users_line(strict):
    result = pt2onnx.export(Net().eval(), (torch.randn(2, 4),), strict=strict)
    mul = next(n for n in result.model.graph if n.metadata_props.get("pt2onnx.op") == "aten::mul.Tensor")
    source = result.source_of(mul)
    assert source is not None and source.startswith(f"{THIS_FILE}:{_line_of('# the net', Net.forward)} ")
    assert result.source_of(mul.name) == source
    assert result.source_of(mul.outputs[0].name) == source
    relu = next(n for n in result.model.graph if n.op_type == "Relu")
    assert f":{_line_of('# the block', Block.forward)} in forward" in (result.source_of(relu) or "")
    assert result.provenance(relu)["module"] in {"blocks.0", "blocks.1"}


@MODES
def test_module_of_initializer(strict):
    model = Net().eval()
    result = pt2onnx.export(model, (torch.randn(2, 4),), strict=strict)
    info = result.module_of("blocks.1.lin.weight")
    assert (info.path, info.class_name) == ("blocks.1.lin", "torch.nn.modules.linear.Linear")
    assert result.module_of("scale").path == ""
    with pytest.raises(KeyError):
        result.module_of("blocks.7.lin.weight")


def test_module_of_without_eager_model_uses_module_stack():
    program = torch.export.export(Net().eval(), (torch.randn(2, 4),), strict=False)
    result = pt2onnx.export(program)
    info = result.module_of("blocks.0.lin.bias")
    assert info == pt2onnx.provenance.ModuleInfo("blocks.0.lin", "torch.nn.modules.linear.Linear")


@MODES
def test_nodes_inside_hop_bodies_carry_provenance(strict):
    result = pt2onnx.export(Mapped().eval(), (torch.randn(3, 4),), strict=strict)
    assert result.verify(torch.randn(3, 4)).ok
    scan = next(n for n in result.model.graph if n.op_type == "Scan")
    body = scan.attributes["body"].as_graph()
    inner = [n for n in body if n.op_type in {"Gemm", "MatMul", "Relu", "Add"}]
    assert inner
    for node in inner:
        props = node.metadata_props
        assert props["pt2onnx.fx_node"].startswith("map_impl/"), dict(props)
        assert props["pt2onnx.source"].startswith(f"{THIS_FILE}:"), dict(props)
    relu = next(n for n in body if n.op_type == "Relu")
    # Strict mode records the module stack inside bodies; non-strict mode records none there,
    # so body nodes take the module of the HOP call that encloses them.
    assert relu.metadata_props["pt2onnx.module"] == ("inner.block" if strict else "inner")


class CondInScan(torch.nn.Module):
    def forward(self, x):
        def step(carry, row):
            new = torch.cond(row.sum() > 0, lambda c, r: c + r, lambda c, r: c - r, (carry, row))
            return new, new * 2

        return scan(step, torch.zeros_like(x[0]), x)


@MODES
def test_every_node_of_nested_bodies_and_functions_has_a_user_line(strict):
    result = pt2onnx.export(CondInScan(), (torch.randn(4, 3),), strict=strict)
    assert result.verify(torch.randn(4, 3)).ok
    nodes = list(_all_nodes(result.model))
    assert any(n.op_type == "If" for n in nodes)
    for node in nodes:
        props = node.metadata_props
        assert {"pt2onnx.fx_node", "pt2onnx.op", "pt2onnx.source"} <= set(props), (node, dict(props))
        assert props["pt2onnx.source"].startswith(f"{THIS_FILE}:"), dict(props)
    inner = next(n for n in nodes if n.op_type == "Add" and n.graph is not result.model.graph)
    assert result.provenance(inner)["fx_node"].startswith("scan/")
