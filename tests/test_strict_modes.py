"""Capture in both of torch.export's modes (``strict=True`` and ``False``) on cases known to trip one.

- ``torch.ops.higher_order.scan(add, [init], [x], dim=0, reverse=False, additional_inputs=[])``:
  torch 2.13 rejects those keywords in both modes (strict: TorchDynamo's argument check;
  non-strict: ``ScanOp.__call__``); pt2onnx captures it by its documented legacy-scan fallback.
- ``x[..., idx] = y`` (``UpdateModel``) exports in both modes.
- ``from_node`` is missing under ``strict=False``: provenance still names modules (see
  tests/test_provenance.py); here, a parameter's module in both modes.
"""

from __future__ import annotations

import pytest
import torch

import pt2onnx
from pt2onnx.capture import CaptureFallbackWarning
from pt2onnx.errors import CaptureError

MODES = pytest.mark.parametrize("strict", [False, True], ids=["nonstrict", "strict"])


def add(carry: torch.Tensor, y: torch.Tensor):
    next_carry = carry + y
    return [next_carry, next_carry]


class ScanModel(torch.nn.Module):
    def forward(self, x):
        init = torch.zeros_like(x[0])
        carry, out = torch.ops.higher_order.scan(add, [init], [x], dim=0, reverse=False, additional_inputs=[])  # noqa: RUF059 (the call as written in the wild)
        return carry


class UpdateModel(torch.nn.Module):
    def forward(self, x: torch.Tensor, update: torch.Tensor, kv_index: torch.LongTensor):
        x = x.clone()
        x[..., kv_index] = update
        return x


def _update_inputs():
    return (
        torch.ones((4, 4, 10)).to(torch.float32),
        (torch.arange(2) + 10).to(torch.float32).reshape((1, 1, 2)),
        torch.Tensor([1, 2]).to(torch.int32),
    )


@MODES
def test_legacy_scan_exports_in_both_modes(strict):
    x = torch.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9]], dtype=torch.float32)
    with pytest.warns(CaptureFallbackWarning, match="legacy scan signature"):
        result = pt2onnx.export(ScanModel(), (x,), strict=strict)
    assert "legacy scan signature" in result.report.capture
    assert result.report.capture_fallback is not None
    assert any(n.op_type == "Scan" for n in result.model.graph)
    # Eager PyTorch 2.13 cannot run this call either; what it means is x.sum(0).
    torch.testing.assert_close(result.run(x), x.sum(axis=0))
    y = torch.randn(3, 3)
    torch.testing.assert_close(result.run(y), y.sum(axis=0))


def test_legacy_scan_without_fallback_is_a_clear_error():
    x = torch.ones(3, 3)
    with pytest.raises(CaptureError, match=r"strict=True\) failed") as info:
        pt2onnx.export(ScanModel(), (x,), strict=True, fallback=False)
    assert "no longer takes dim/reverse/additional_inputs" in (info.value.hint or "")


@MODES
def test_index_put_on_a_clone_exports_in_both_modes(strict):
    result = pt2onnx.export(UpdateModel(), _update_inputs(), strict=strict)
    assert result.report.capture == f"strict={strict}"
    check = result.verify(*_update_inputs())
    assert check.ok, str(check)
    other = (torch.randn(4, 4, 10), torch.randn(1, 1, 2), torch.tensor([9, 0], dtype=torch.int32))
    assert result.verify(*other).ok


@MODES
def test_parameter_module_without_from_node(strict):
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2)).eval()
    result = pt2onnx.export(model, (torch.randn(2, 3),), strict=strict)
    info = result.module_of("2.weight")
    assert (info.path, info.class_name) == ("2", "torch.nn.modules.linear.Linear")
    gemm = [n for n in result.model.graph if n.metadata_props.get("pt2onnx.module") == "2"]
    assert gemm and all(n.metadata_props["pt2onnx.module_class"].endswith("Linear") for n in gemm)


class EntropyModel(torch.nn.Module):
    """BLT's patcher: the entropy of the next-byte distribution, a ``Categorical`` of the logits."""

    def __init__(self, validate_args=None):
        super().__init__()
        self.validate_args = validate_args

    def forward(self, logits):
        return torch.distributions.Categorical(logits=logits, validate_args=self.validate_args).entropy()


@pytest.fixture
def checked_distributions():
    # TorchDynamo turns the checks off for the whole process once it first runs (a strict
    # capture earlier in this worker): each test starts from torch's default, checks on.
    before = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(True)
    yield
    torch.distributions.Distribution.set_default_validate_args(before)


def test_a_distribution_checking_its_arguments_exports(checked_distributions):
    # torch.distributions checks its arguments' values by default: a branch on tensor values
    # no trace takes, so capture turns the checks off, and puts the default back after.
    logits = torch.randn(2, 5, 7)
    result = pt2onnx.export(EntropyModel(), (logits,), dynamic_shapes="auto")
    assert result.verify(logits).ok
    assert result.verify(torch.randn(3, 4, 7)).ok
    assert torch.distributions.Distribution._validate_args is True


def test_a_distribution_asked_to_check_its_arguments_still_fails_capture(checked_distributions):
    with pytest.raises(CaptureError, match="data-dependent"):
        pt2onnx.export(EntropyModel(validate_args=True), (torch.randn(2, 5, 7),), fallback=False)
    assert torch.distributions.Distribution._validate_args is True
