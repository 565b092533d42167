"""Exports from several threads of one process: capture is serialized, no thread changes another's capture mode."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

import pt2onnx
from pt2onnx.capture import CaptureFallbackWarning
from pt2onnx.errors import CaptureError
from small_models import MLP, trained_cnn


class Counter(torch.nn.Module):
    """Mutates a buffer: its export is re-traced (run_decompositions), a second trace per export."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(1)
        return x * self.count


class Raises(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("this model always fails")


def _run_together(jobs: list[Callable[[], Any]]) -> list[Any]:
    """Start every job at the same moment in its own thread; each result or exception, in order."""
    barrier = threading.Barrier(len(jobs))
    results: list[Any] = [None] * len(jobs)

    def run(i: int) -> None:
        barrier.wait()
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                results[i] = (jobs[i](), [w for w in caught if issubclass(w.category, CaptureFallbackWarning)])
        except Exception as e:  # noqa: BLE001 - the test inspects every thread's outcome
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def _export_and_verify(model: torch.nn.Module, x: torch.Tensor, **options: Any) -> pt2onnx.ExportResult:
    result = pt2onnx.export(model, (x,), **options)
    check = result.verify(x)
    assert check.ok, check
    return result


@pytest.mark.parametrize("round_", range(2))
def test_threads_exporting_different_models_at_once_each_verify(round_):
    batch = torch.export.Dim("batch")
    jobs = [
        lambda: _export_and_verify(MLP().eval(), torch.randn(2, 8)),
        lambda: _export_and_verify(trained_cnn(), torch.randn(1, 3, 8, 8)),
        lambda: _export_and_verify(MLP().eval(), torch.randn(3, 8), dynamic_shapes={"x": {0: batch}}),
        lambda: _export_and_verify(MLP().eval(), torch.randn(2, 8), strict=True),
        lambda: _export_and_verify(Counter(), torch.randn(3)),
    ]
    for i, outcome in enumerate(_run_together(jobs)):
        assert not isinstance(outcome, Exception), f"{type(outcome).__name__}: {outcome}"
        result, fallbacks = outcome
        # Each captured in the mode it asked for: no fallback, no warning.
        assert result.report.capture == ("strict=True" if i == 3 else "strict=False"), result.report.capture
        assert fallbacks == [] and result.report.capture_fallback is None


def test_one_thread_failing_never_changes_another_threads_capture_mode():
    jobs: list[Callable[[], Any]] = []
    for _ in range(3):
        jobs.append(lambda: pt2onnx.export(Raises(), (torch.randn(2),)))
        jobs.append(lambda: _export_and_verify(MLP().eval(), torch.randn(2, 8)))
    outcomes = _run_together(jobs)
    for failing, succeeding in zip(outcomes[0::2], outcomes[1::2]):
        assert isinstance(failing, CaptureError) and "this model always fails" in str(failing)
        assert not isinstance(succeeding, Exception), f"{type(succeeding).__name__}: {succeeding}"
        result, fallbacks = succeeding
        assert result.report.capture == "strict=False" and fallbacks == []
