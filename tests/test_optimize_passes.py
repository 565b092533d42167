"""pt2onnx's own optimization passes: each changes the graph as it says, numerics unchanged."""

from __future__ import annotations

import onnx_ir as ir
import torch

import pt2onnx
from pt2onnx.optimize import optimize, select_passes


class RMSNormLinear(torch.nn.Module):
    """A hand-written RMS norm (as transformers' Llama writes it) before a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(8) + 0.5)
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.fc(self.weight * normed)


def _ops(result: pt2onnx.ExportResult) -> list[str]:
    return [node.op_type for node in result.model.graph]


def test_rms_norm_is_fused_and_weight_transposes_are_lazy():
    x = torch.randn(2, 5, 8)
    dims = {"x": {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq")}}
    result = pt2onnx.export(RMSNormLinear().eval(), (x,), dynamic_shapes=dims)
    ops = _ops(result)
    assert ops.count("RMSNormalization") == 1 and "Pow" not in ops and "Transpose" not in ops
    lazy = [v for v in result.model.graph.initializers.values() if isinstance(v.const_value, ir.LazyTensor)]
    assert [v.name for v in lazy] == ["fc.weight.transposed"]
    effects = {p.name: p.removed for p in result.report.passes}
    assert effects["fuse_rms_norm"] >= 6 and effects["fold_weight_transposes"] == 1
    for shape in ((2, 5, 8), (3, 1, 8)):
        check = result.verify(torch.randn(shape))
        assert check.ok and check.max_abs <= 1e-5, str(check)


def test_each_pass_can_be_switched_off():
    x = torch.randn(2, 5, 8)
    result = pt2onnx.export(RMSNormLinear().eval(), (x,), optimize={"fuse_rms_norm": False})
    assert "RMSNormalization" not in _ops(result) and "ReduceMean" in _ops(result)
    assert "fuse_rms_norm" not in {p.name for p in result.report.passes}
    assert result.verify(x).ok


def test_equal_initializers_are_merged():
    class TwoTables(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("a", torch.arange(12.0).reshape(3, 4))
            self.register_buffer("b", torch.arange(12.0).reshape(3, 4))
            self.register_buffer("c", torch.arange(12.0).reshape(3, 4) + 1)

        def forward(self, x):
            return x * self.a + x * self.b + self.c

    x = torch.randn(3, 4)
    result = pt2onnx.export(TwoTables().eval(), (x,))
    assert len(result.model.graph.initializers) == 2
    assert result.verify(x).ok


def test_reshapes_proven_no_ops_by_their_symbolic_shapes_are_dropped():
    # The target shape is only known at run time (a graph input here; in transformers a
    # Concat of sizes read off another tensor), so constant folding cannot tell; the
    # shapes torch recorded, named dims included, prove the Reshape changes nothing.
    batch, seq = ir.SymbolicDim("batch"), ir.SymbolicDim("seq")
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([batch, 3, seq]))
    target = ir.Value(name="target", type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape([3]))
    same = ir.Node("", "Reshape", [x, target], num_outputs=1)
    same.outputs[0].name, same.outputs[0].type, same.outputs[0].shape = "same", x.type, ir.Shape([batch, 3, seq])
    other = ir.Node("", "Reshape", [same.outputs[0], target], num_outputs=1)  # to an unknown shape: kept
    other.outputs[0].name, other.outputs[0].type = "y", x.type
    graph = ir.Graph([x, target], other.outputs, nodes=[same, other], opset_imports={"": 21})
    model = ir.Model(graph, ir_version=10)
    effects = optimize(model, select_passes(["simplify_reshapes"]))
    assert [n.op_type for n in model.graph] == ["Reshape"] and effects[0].removed == 1
    assert model.graph.node(0).inputs[0] is x


def test_constants_end_up_as_initializers():
    x = torch.randn(2, 5, 8)
    result = pt2onnx.export(RMSNormLinear().eval(), (x,), optimize={"fuse_rms_norm": False})
    assert "Constant" not in _ops(result)
    kept = pt2onnx.export(RMSNormLinear().eval(), (x,), optimize={"fuse_rms_norm": False, "lift_constants": False})
    assert "Constant" in _ops(kept)
    assert result.verify(x).ok


def test_tiny_constants_are_not_taken_for_no_ops():
    # onnxscript's no-op rules match x + c for |c| < 1e-8 and x * c for c within 1e-5 of 1.
    from pt2onnx.testing import assert_exports_like_eager

    x = torch.tensor([0.0, 1e6, 4.0], dtype=torch.float64)
    assert_exports_like_eager(lambda t: (torch.rsqrt(t + 1e-12), t * 1.000001), (x,), dynamic=False)
