"""Errors name the phase, the node, the op, the user's line and module, and what to do next."""

from __future__ import annotations

import re
import runpy
import warnings
from pathlib import Path

import pytest
import torch

import pt2onnx
from pt2onnx import errors
from pt2onnx.capture import CaptureFallbackWarning
from pt2onnx.errors import CaptureError, OptionError, UnsupportedOpsError
from pt2onnx.translate import UnknownCustomOpWarning


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


def test_an_opset_outside_the_supported_range_names_the_range():
    with pytest.raises(OptionError, match=r"opset=99 is not supported: pt2onnx exports opsets 14 to \d+") as info:
        pt2onnx.export(UsesUnconvertedOps(), (torch.randn(3),), opset=99)
    assert isinstance(info.value, ValueError)  # what callers caught before
    with pytest.raises(OptionError, match=r"opset='18'"):
        pt2onnx.export(UsesUnconvertedOps(), (torch.randn(3),), opset="18")


class RaisesInForward(torch.nn.Module):
    def forward(self, x):
        return self.check(x)

    def check(self, x):
        raise ValueError("the model's own error")  # the raising line


def _line_of(marker: str) -> int:
    return next(i for i, line in enumerate(Path(__file__).read_text().splitlines(), 1) if marker in line)


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("fallback", [False, True])
def test_an_exception_in_the_models_code_names_its_file_and_line(strict, fallback):
    with pytest.raises(CaptureError) as info:
        pt2onnx.export(RaisesInForward(), (torch.randn(3),), strict=strict, fallback=fallback)
    message = str(info.value)
    where = f"{Path(__file__).resolve()}:{_line_of('# the raising line')} in check"
    assert f"in your code: {where}" in message
    assert f"what to do: your model's code raised this at {where}" in message
    assert "try strict=" not in message


def test_after_both_modes_failed_the_hint_does_not_suggest_the_other_mode():
    class Unsupported(torch.nn.Module):
        def forward(self, x):
            return torch.ops.aten.nonexistent_op_for_the_test(x)

    with pytest.raises(CaptureError) as info:
        pt2onnx.export(Unsupported(), (torch.randn(3),))
    message = str(info.value)
    assert "failed in every mode" in message and "strict=False:" in message and "strict=True:" in message
    assert "both strict=True and strict=False failed" in message and "try strict=" not in message
    with pytest.raises(CaptureError, match="try strict=True"):
        pt2onnx.export(Unsupported(), (torch.randn(3),), fallback=False)


# -- docs/errors.md: every example runs and raises what it says -----------------------------------

CATALOGUE = Path(__file__).resolve().parents[1] / "docs" / "errors.md"
_EXAMPLE = re.compile(
    r'^Example: (?P<verb>raises|warns) `(?P<cls>\w+)` \("(?P<phrase>[^"]+)"\)\n\n```python\n(?P<code>.*?)^```$',
    re.M | re.S,
)
EXAMPLES = [m.groupdict() for m in _EXAMPLE.finditer(CATALOGUE.read_text())]
CLASSES: dict[str, type] = {
    **{name: getattr(errors, name) for name in errors.__all__ if isinstance(getattr(errors, name), type)},
    "CaptureFallbackWarning": CaptureFallbackWarning,
    "UnknownCustomOpWarning": UnknownCustomOpWarning,
}


def test_every_error_and_warning_is_catalogued_with_an_example():
    catalogued = {e["cls"] for e in EXAMPLES}
    expected = {n for n, c in CLASSES.items() if issubclass(c, (errors.Pt2OnnxError, Warning))} - {"Pt2OnnxError"}
    assert catalogued == expected
    text = CATALOGUE.read_text()
    for name in expected:
        assert f"\n## {name}\n" in text, f"docs/errors.md needs a '## {name}' section"
    assert len(EXAMPLES) >= 25


@pytest.mark.parametrize("example", EXAMPLES, ids=[f"{e['cls']}-{i}" for i, e in enumerate(EXAMPLES)])
def test_catalogue_example(example, tmp_path):
    script = tmp_path / "example.py"
    script.write_text(example["code"])
    expected = CLASSES[example["cls"]]
    if example["verb"] == "raises":
        with pytest.raises(errors.Pt2OnnxError) as info, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runpy.run_path(str(script), run_name="__main__")
        assert type(info.value) is expected, f"{type(info.value).__name__}: {info.value}"
        assert example["phrase"] in str(info.value), str(info.value)
        assert "what to do:" in str(info.value)
    else:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            runpy.run_path(str(script), run_name="__main__")
        messages = [str(w.message) for w in caught if w.category is expected]
        assert any(example["phrase"] in m for m in messages), [str(w.message) for w in caught]


class SmallBatchesOnly(torch.nn.Module):
    """Guards the batch as a CUDA kernel does (cuDNN's pooling: at most 65535; here 4)."""

    def forward(self, x):
        if x.shape[0] > 4:
            raise ValueError("batch too large")
        return x * 2


@pytest.mark.parametrize("device", [None, torch.device("cuda", 0)])
def test_a_size_guard_of_a_model_on_a_gpu_suggests_exporting_from_the_cpu(monkeypatch, device):
    # No GPU here: the device the capture finds is stood in for; the device run (H200) raised
    # this for the demo CNN on cuda:0 with a dynamic batch.
    import pt2onnx.capture

    monkeypatch.setattr(pt2onnx.capture, "_accelerator", lambda module, args, kwargs: device)
    with pytest.raises(CaptureError) as info:
        pt2onnx.export(SmallBatchesOnly(), (torch.randn(2, 3),), dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
    hint = str(info.value).split("what to do:", 1)[1]
    assert "fix dynamic_shapes as torch's message above suggests" in hint
    assert ("the model is on cuda:0" in hint and "on the CPU (model.cpu())" in hint) == (device is not None)


def test_a_model_on_the_meta_device_is_not_taken_for_one_on_a_gpu():
    # A checkpoint exported with weights= is built on the meta device: the CPU hint would be wrong.
    import pt2onnx.capture

    with torch.device("meta"):
        model = torch.nn.Linear(2, 2)
    assert pt2onnx.capture._accelerator(model, (torch.randn(1, 2),), {}) is None
    assert pt2onnx.capture._accelerator(torch.nn.Linear(2, 2), (), {"x": [torch.randn(1, device="meta")]}) is None


def test_an_error_raised_inside_sympy_is_not_placed_in_sympy_as_the_users_code():
    # torch's symbolic shapes raise sympy's NotImplementedError (torchvision's S3D with
    # dynamic_shapes="auto"); the error named sympy/solvers/inequalities.py as "your code".
    import sympy
    from sympy.solvers.inequalities import solve_univariate_inequality

    from pt2onnx.capture import user_frame

    x = sympy.Symbol("x", real=True)
    with pytest.raises(NotImplementedError) as info:
        solve_univariate_inequality(sympy.Eq(sympy.floor(sympy.floor(x / 4) / 2) - 2, 0), x)
    where, raised_there = user_frame(info.value)
    assert where.startswith(f"{__file__}:") and "solve_univariate_inequality" in where
    assert not raised_there
