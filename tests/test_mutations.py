"""Mutated buffers, parameters and inputs, as the graph signature says: extra ``<name>.updated`` outputs;
``ExportResult.run`` writes updated inputs back in place. Both capture modes.
(``x[..., idx] = y`` on a clone, in both capture modes, is in tests/test_strict_modes.py.)"""

from __future__ import annotations

import pytest
import torch

import pt2onnx

MODES = pytest.mark.parametrize("strict", [False, True], ids=["nonstrict", "strict"])


class Counter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("total", torch.zeros(3))

    def forward(self, x):
        self.total.add_(x.sum(0))
        return x * 2 + self.total


class Decay(torch.nn.Module):
    """A parameter changed in place outside autograd (as nn.Embedding's max_norm does)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.full((3,), 4.0))

    def forward(self, x):
        with torch.no_grad():
            self.weight.mul_(0.5)
        return x * self.weight


class AddInPlace(torch.nn.Module):
    def forward(self, x, y):
        x.add_(y)
        return y * 3


class CacheUpdate(torch.nn.Module):
    """``x[..., idx] = y`` on an input itself (a KV-cache style update)."""

    def forward(self, cache, update, kv_index):
        cache[..., kv_index] = update
        return cache.sum(-1)


def _seed_inputs():
    return (
        torch.ones((4, 4, 10)).to(torch.float32),
        (torch.arange(2) + 10).to(torch.float32).reshape((1, 1, 2)),
        torch.Tensor([1, 2]).to(torch.int32),
    )


@MODES
def test_buffer_mutation_is_an_updated_output(strict):
    x = torch.randn(2, 3)
    result = pt2onnx.export(Counter(), (x,), strict=strict)
    assert "total.updated" in result.output_names
    eager = Counter()
    expected = eager(x)
    session = result.session()
    names = result.output_names
    got = dict(zip(names, session.run(None, {result.input_names[0]: x.numpy()})))
    torch.testing.assert_close(torch.from_numpy(got["total.updated"]), eager.total)
    torch.testing.assert_close(result.run(x), expected)


@MODES
def test_parameter_mutation_is_an_updated_output(strict):
    x = torch.randn(2, 3)
    result = pt2onnx.export(Decay(), (x,), strict=strict)
    assert result.output_names[-1] == "weight.updated"
    eager = Decay()
    expected = eager(x).detach()
    out, weight = result.session().run(None, {result.input_names[0]: x.numpy()})
    torch.testing.assert_close(torch.from_numpy(weight), eager.weight.detach())
    torch.testing.assert_close(torch.from_numpy(out), expected)


@MODES
def test_user_input_mutation_is_written_back_by_run(strict):
    x, y = torch.randn(3), torch.randn(3)
    result = pt2onnx.export(AddInPlace(), (x.clone(), y), strict=strict)
    assert any(name.endswith(".updated") for name in result.output_names)
    eager_x, onnx_x = x.clone(), x.clone()
    expected = AddInPlace()(eager_x, y)
    got = result.run(onnx_x, y)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(onnx_x, eager_x)


@MODES
def test_index_put_on_an_input_writes_it_back(strict):
    result = pt2onnx.export(CacheUpdate(), _seed_inputs(), strict=strict)
    eager_in, onnx_in = _seed_inputs(), _seed_inputs()
    expected = CacheUpdate()(*eager_in)
    got = result.run(*onnx_in)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(onnx_in[0], eager_in[0])
