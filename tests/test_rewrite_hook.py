"""Plugins' ONNX-graph rewrites: they run in the optimize phase, by layer, switchable, reported."""

from __future__ import annotations

import onnx_ir as ir
import pytest
import torch

import pt2onnx
from pt2onnx.errors import PluginConflictError
from pt2onnx.plugin import RewriteRegistrar, hookimpl


class ReluNet(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * 2.0


def relu_as_max(model: ir.Model) -> None:
    """``Relu(x)`` as ``Max(x, 0)``: a rewrite whose effect a test can see."""
    for node in list(model.graph):
        if node.op_type == "Relu":
            zero = ir.Value(name=f"{node.outputs[0].name}.zero", const_value=ir.tensor(0.0, dtype=node.inputs[0].dtype))
            zero.type, zero.shape = ir.TensorType(node.inputs[0].dtype), ir.Shape([])
            model.graph.register_initializer(zero)
            new = ir.Node("", "Max", [node.inputs[0], zero], num_outputs=1)
            new.outputs[0].type, new.outputs[0].shape = node.outputs[0].type, node.outputs[0].shape
            model.graph.insert_before(node, new)
            node.outputs[0].replace_all_uses_with(new.outputs[0])


class RewritePlugin:
    def __init__(self, name: str, fn, *, override: bool = False) -> None:
        self.name, self.fn, self.override = name, fn, override

    @hookimpl
    def pt2onnx_register_rewrites(self, register: RewriteRegistrar) -> None:
        register.rewrite(self.name, self.fn, override=self.override)


class OtherRewritePlugin(RewritePlugin):
    """A second plugin (plugins are named after their class)."""


def _ops(result: pt2onnx.ExportResult) -> set[str]:
    return {n.op_type for n in result.model.graph}


def test_a_plugin_rewrite_runs_is_reported_and_can_be_switched_off():
    x = torch.randn(3, 4)
    result = pt2onnx.export(ReluNet(), (x,), plugins=[RewritePlugin("relu_as_max", relu_as_max)])
    assert "Max" in _ops(result) and "Relu" not in _ops(result)
    names = [p.name for p in result.report.passes]
    # After the core's clean-up, before dead-node removal.
    assert names.index("cse") < names.index("relu_as_max") < names.index("remove_unused")
    assert result.verify(x).ok
    off = pt2onnx.export(
        ReluNet(), (x,), plugins=[RewritePlugin("relu_as_max", relu_as_max)], optimize={"relu_as_max": False}
    )
    assert "Relu" in _ops(off) and "relu_as_max" not in {p.name for p in off.report.passes}


def test_a_higher_layer_replaces_a_builtin_rewrite_of_the_same_name():
    calls = []
    result = pt2onnx.export(ReluNet(), (torch.randn(2, 2),), plugins=[RewritePlugin("fuse_rms_norm", calls.append)])
    assert calls == [result.model]


def test_two_rewrites_of_one_name_in_one_layer_conflict():
    plugins = [RewritePlugin("relu_as_max", relu_as_max), OtherRewritePlugin("relu_as_max", lambda model: None)]
    with pytest.raises(PluginConflictError, match="relu_as_max"):
        pt2onnx.export(ReluNet(), (torch.randn(2, 2),), plugins=plugins)


def test_a_rewrite_cannot_take_a_core_pass_name():
    with pytest.raises(ValueError, match="core pass"):
        pt2onnx.export(ReluNet(), (torch.randn(2, 2),), plugins=[RewritePlugin("cse", relu_as_max)])


def test_a_failing_rewrite_names_itself_and_how_to_switch_it_off():
    def broken(model: ir.Model) -> None:
        raise RuntimeError("pattern went wrong")

    with pytest.raises(pt2onnx.errors.OptimizationError, match="broken_rewrite") as info:
        pt2onnx.export(ReluNet(), (torch.randn(2, 2),), plugins=[RewritePlugin("broken_rewrite", broken)])
    assert "optimize={'broken_rewrite': False}" in str(info.value)
