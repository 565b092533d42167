"""Errors name the phase, the node, the op, the user's line and module, and what to do next."""

from __future__ import annotations

import pytest
import torch

import pt2onnx
from pt2onnx.errors import CaptureError, UnsupportedOpsError


class UsesUnconvertedOps(torch.nn.Module):
    def forward(self, x):
        return torch.special.bessel_j0(x) + torch.special.bessel_j0(x * 2) + torch.special.bessel_j1(x)


def test_unsupported_ops_are_listed_all_at_once_with_counts_and_source():
    with pytest.raises(UnsupportedOpsError) as info:
        pt2onnx.export(UsesUnconvertedOps(), (torch.randn(3),))
    message = str(info.value)
    assert message.startswith("[translate]")
    assert "aten::special_bessel_j0.default: 2 node(s)" in message
    assert "aten::special_bessel_j1.default: 1 node(s)" in message
    assert "test_errors.py" in message
    assert "what to do:" in message
    assert set(info.value.unsupported) == {"aten::special_bessel_j0.default", "aten::special_bessel_j1.default"}


def test_capture_failure_names_the_phase_and_suggests_a_fix():
    class DataDependent(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x + 1
            return x - 1

    with pytest.raises(CaptureError) as info:
        pt2onnx.export(DataDependent(), (torch.randn(3),))
    assert str(info.value).startswith("[capture]")
    assert "torch.cond" in str(info.value)
