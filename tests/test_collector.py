"""The garbage collector is paused while an export runs and left as the caller had it."""

from __future__ import annotations

import gc

import pytest
import torch

import pt2onnx
from pt2onnx.collector import collector_paused
from pt2onnx.errors import CaptureError


class Recorder(torch.nn.Module):
    """Notes in ``enabled`` whether the collector is enabled each time capture runs its forward
    (a list outside the module: capture puts back the module's own attributes)."""

    def __init__(self, enabled: list[bool], fail: bool = False) -> None:
        super().__init__()
        self.fail = fail
        self.seen = enabled.append

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen(gc.isenabled())
        if self.fail:
            raise RuntimeError("this model cannot be captured")
        return x.sin() * 2


@pytest.fixture
def collector_enabled():
    was_enabled = gc.isenabled()
    gc.enable()
    yield
    if not was_enabled:
        gc.disable()


def test_an_export_runs_with_collection_paused_and_enables_it_again(collector_enabled):
    enabled: list[bool] = []
    x = torch.randn(3, 4)
    result = pt2onnx.export(Recorder(enabled), (x,))
    assert enabled and not any(enabled)
    assert gc.isenabled()
    assert result.verify(x).ok


def test_a_failed_export_enables_collection_again(collector_enabled):
    enabled: list[bool] = []
    with pytest.raises(CaptureError, match="this model cannot be captured"):
        pt2onnx.export(Recorder(enabled, fail=True), (torch.randn(3, 4),), fallback=False)
    assert enabled and not any(enabled)
    assert gc.isenabled()


def test_a_caller_that_disabled_collection_finds_it_disabled(collector_enabled):
    gc.disable()
    pt2onnx.export(Recorder([]), (torch.randn(3, 4),))
    assert not gc.isenabled()


def test_nested_pauses_enable_collection_only_when_the_outermost_ends(collector_enabled):
    with collector_paused():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
