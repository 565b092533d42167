"""``run`` and ``verify`` take the inputs a user of the module passes, matched to the captured ones by name.

Issue #28: an input left out, given by keyword where the capture took it by position (or
the other way round), or a constant such as ``use_cache=True`` left out, used to fail with
the two input TreeSpecs printed whole. Now the inputs are matched by the forward's
parameter names; what is still missing or extra is one line naming it and what the model takes.
"""

from __future__ import annotations

import pytest
import torch

import pt2onnx
from pt2onnx.errors import VerificationError
from pt2onnx.interface import matching


class Scaled(torch.nn.Module):
    def forward(self, x, mask=None, *, scale=1.0, flag=False, offset=0):
        y = x * scale + offset
        if mask is not None:
            y = y * mask
        return -y if flag else y


class Pair(torch.nn.Module):
    def forward(self, x, pair):
        return x + pair[0] * pair[1]


X, MASK = torch.randn(2, 3), torch.rand(2, 3)


@pytest.fixture(scope="module")
def scaled() -> pt2onnx.ExportResult:
    # scale and flag are constants of the graph: no ONNX inputs; offset is left at its default.
    return pt2onnx.export(Scaled(), (X,), {"mask": MASK, "scale": 3.0, "flag": True})


@pytest.fixture(scope="module")
def pair() -> pt2onnx.ExportResult:
    return pt2onnx.export(Pair(), (X, (X + 1, X + 2)))


def _error(call) -> str:
    with pytest.raises(VerificationError) as caught:
        call()
    message = caught.value.message
    assert "\n" not in message and "TreeSpec" not in str(caught.value), str(caught.value)
    return message


def test_the_constants_are_no_onnx_inputs(scaled):
    assert scaled.input_names == ["x", "mask"]


def test_the_call_as_captured_works(scaled):
    assert scaled.verify(X, mask=MASK, scale=3.0, flag=True).ok
    torch.testing.assert_close(scaled.run(X, mask=MASK, scale=3.0, flag=True), -(X * 3.0) * MASK)


def test_constants_may_be_left_out(scaled):
    assert scaled.verify(X, mask=MASK).ok
    torch.testing.assert_close(scaled.run(X, mask=MASK), -(X * 3.0) * MASK)
    assert scaled.verify(X, mask=MASK, flag=True).ok


def test_inputs_are_matched_by_parameter_name_by_position_or_keyword(scaled):
    assert scaled.verify(x=X, mask=MASK).ok
    assert scaled.verify(X, MASK, scale=3.0).ok
    assert scaled.verify(mask=MASK, x=X, flag=True).ok
    torch.testing.assert_close(scaled.run(x=X, mask=MASK), scaled.run(X, mask=MASK))


def test_a_keyword_left_at_its_default_is_taken(scaled):
    assert scaled.verify(X, mask=MASK, offset=0).ok


def test_a_constant_of_another_value_is_one_line(scaled):
    message = _error(lambda: scaled.run(X, mask=MASK, scale=4.0))
    assert message == (
        "input 'scale' is 4.0, but the model was exported with 3.0, a constant of the graph rather than an input"
    )
    # the same when the rest of the call has the captured structure (the check needs no matching)
    assert "'flag' is False" in _error(lambda: scaled.run(X, mask=MASK, scale=3.0, flag=False))
    assert "'flag' is False" in _error(lambda: scaled.verify(X, mask=MASK, flag=False))


def test_a_missing_input_is_one_line_naming_it_and_what_the_model_takes(scaled):
    message = _error(lambda: scaled.run(X))
    assert message == "missing input 'mask'; the exported model takes x, mask, scale=3.0, flag=True"
    assert _error(lambda: scaled.verify(mask=MASK)).startswith("missing input 'x';")
    assert _error(lambda: scaled.run()).startswith("missing inputs 'x', 'mask';")


def test_an_extra_input_is_one_line(scaled):
    message = _error(lambda: scaled.run(X, mask=MASK, bias=X))
    assert message == "unexpected input 'bias'; the exported model takes x, mask, scale=3.0, flag=True"
    message = _error(lambda: scaled.run(X, masks=MASK))
    assert message.startswith("missing input 'mask'; unexpected input 'masks';")
    assert "given twice" in _error(lambda: scaled.run(X, MASK, x=X))
    assert "3 positional inputs given" in _error(lambda: pt2onnx.export(Pair(), (X, (X, X))).run(X, (X, X), X))


def test_an_input_of_another_structure_is_one_line(pair):
    message = _error(lambda: pair.run(X, pair=(X,)))
    assert message.startswith("input 'pair' is a tuple of 1 tensor; the exported model takes a tuple of 2 tensors")


def test_an_input_of_several_tensors_may_be_given_by_its_onnx_names(pair):
    _, *pair_names = pair.input_names
    assert len(pair_names) == 2
    assert pair.verify(X, **dict(zip(pair_names, (X + 1, X + 2)))).ok
    torch.testing.assert_close(pair.run(X, **dict(zip(pair_names, (X + 1, X + 2)))), X + (X + 1) * (X + 2))


def test_a_call_as_captured_does_no_matching(scaled, monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("matched inputs that had the captured structure")

    monkeypatch.setattr(matching, "_match", fail)
    assert scaled.run(X, mask=MASK, scale=3.0, flag=True) is not None
    assert scaled.verify(X, mask=MASK, scale=3.0, flag=True).ok
    with pytest.raises(AssertionError, match="matched inputs"):
        scaled.run(X, mask=MASK)


def test_a_size_the_export_fixed_is_named_with_why_not_left_to_onnxruntime(scaled):
    # Static export: onnxruntime alone would say "Got invalid dimensions for input: x".
    with pytest.raises(
        VerificationError,
        match=r"input 'x' has size 5 at dim 0, but the exported model fixed that dim to 2 \(no dynamic_shapes",
    ):
        scaled.run(torch.randn(5, 3), mask=torch.rand(5, 3), scale=3.0, flag=True)
    with pytest.raises(VerificationError, match=r"input 'x' has 3 dims \[2, 3, 1\]; the exported model takes 2"):
        scaled.run(torch.randn(2, 3, 1), mask=MASK, scale=3.0, flag=True)


def test_a_dim_auto_left_static_says_why(tmp_path):
    result = pt2onnx.export(Scaled(), (torch.randn(1, 3),), dynamic_shapes="auto")
    with pytest.raises(
        VerificationError, match=r"fixed that dim to 1 \(with dynamic_shapes='auto', size 1: torch specializes"
    ):
        result.verify(torch.randn(4, 3))
    assert result.verify(torch.randn(1, 7)).ok  # the other dim is dynamic
