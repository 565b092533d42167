"""Errors name the phase, the node, the op, the user's line and module, and what to do next."""

from __future__ import annotations

import os

import pytest
import torch

import pt2onnx
from models import MLP
from pt2onnx.errors import CaptureError, SaveError, UnsupportedOpsError


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


def test_failed_save_leaves_no_partial_file(tmp_path, monkeypatch):
    result = pt2onnx.export(MLP().eval(), (torch.randn(2, 8),))
    target = tmp_path / "model.onnx"

    def broken_save(*args, **kwargs):
        path = args[1]
        with open(path, "wb") as f:
            f.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr("onnx_ir.save", broken_save)
    with pytest.raises(SaveError):
        result.save(target)
    assert os.listdir(tmp_path) == []


def test_save_then_load_round_trips(tmp_path):
    import onnxruntime as ort

    x = torch.randn(2, 8)
    result = pt2onnx.export(MLP().eval(), (x,))
    path = tmp_path / "mlp.onnx"
    result.save(path)
    session = ort.InferenceSession(str(path))
    (got,) = session.run(None, {"x": x.numpy()})
    torch.testing.assert_close(torch.from_numpy(got), result.run(x))
    result.save(tmp_path / "external.onnx", external_data=True)
    assert (tmp_path / "external.onnx.data").exists()
    session = ort.InferenceSession(str(tmp_path / "external.onnx"))
    (got,) = session.run(None, {"x": x.numpy()})
    torch.testing.assert_close(torch.from_numpy(got), result.run(x))
