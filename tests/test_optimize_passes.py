"""pt2onnx's own optimization passes: each changes the graph as it says, numerics unchanged."""

from __future__ import annotations

import onnx_ir as ir
import torch

import pt2onnx


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
    assert "RMSNormalization" not in _ops(result) and "Pow" in _ops(result)
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
