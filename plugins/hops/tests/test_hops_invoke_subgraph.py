"""``invoke_subgraph`` (``torch.compiler.nested_compile_region``) -> an ONNX local function per region."""

from __future__ import annotations

import pytest
import torch

from pt2onnx.testing import assert_exports_like_eager

MODES = pytest.mark.parametrize("strict", [False, True], ids=["nonstrict", "strict"])
N = torch.export.Dim("n", min=2, max=64)


@torch.compiler.nested_compile_region
def block(x, w):
    return torch.relu(x @ w) + x


class Twice(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        return block(block(x, self.w), self.w * 2)


@MODES
def test_region_is_a_local_function_called_per_use(strict):
    result = assert_exports_like_eager(
        Twice(),
        (torch.randn(3, 4),),
        strict=strict,
        dynamic_shapes={"x": {0: N}},
        expect_ops=["higher_order::invoke_subgraph"],
        other_inputs=[((torch.randn(6, 4),), {})],
    )
    calls = [n for n in result.model.graph if n.domain == "pt2onnx.local"]
    assert len(calls) == 2
    assert len(result.model.functions) in (1, 2)  # strict mode traces each use as its own region
    for function in result.model.functions.values():
        assert [n.op_type for n in function] == ["MatMul", "Relu", "Add"]
