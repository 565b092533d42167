"""Target opsets: registrations bounded by ``since``/``until``, resolved per export, shown and explained."""

from __future__ import annotations

import pytest
import torch

import pt2onnx
from pt2onnx.errors import OptionError
from pt2onnx.opset import MIN_OPSET
from pt2onnx.testing import assert_exports_like_eager


class ReluNet(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) - 0.5


def test_check_opset_accepts_14_to_the_newest_onnx_knows():
    assert MIN_OPSET == 14
    assert pt2onnx.export(ReluNet(), (torch.randn(2),), opset=14).model.opset_imports[""] == 14
    with pytest.raises(OptionError, match=r"opset=13 is not supported: pt2onnx exports opsets 14 to \d+"):
        pt2onnx.export(ReluNet(), (torch.randn(2),), opset=13)


def test_the_harness_exports_at_the_opset_it_is_given():
    for opset in (14, 17):
        result = assert_exports_like_eager(ReluNet(), (torch.randn(3, 4),), opset=opset)
        assert result.report.opset == opset and result.model.opset_imports[""] == opset
