"""``ExportResult.verify`` compares what a model updates in place, not only what it returns.

Each mutated buffer, parameter and input is a row ``<target>.updated`` of the verification,
compared with eager's value after the call; a wrong update fails it, and with it
``assert_exports_like_eager``. Verifying leaves the user's module (and so the weights the
ONNX model holds, which are its tensors) as it was. (tests/test_mutations.py: the outputs
themselves.)
"""

from __future__ import annotations

import types

import numpy as np
import onnx_ir as ir
import pytest
import torch
import torch.nn.functional as F

import pt2onnx
from pt2onnx.plugin import converter, hookimpl
from pt2onnx.testing import assert_exports_like_eager


class Counter(torch.nn.Module):
    """An int64 step count and a running mean, as batch norm's statistics are updated."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros((), dtype=torch.int64))
        self.register_buffer("mean", torch.zeros(3))

    def forward(self, x):
        self.count.add_(1)
        self.mean.mul_(0.9).add_(0.1 * x.mean(0))
        return x * self.count + self.mean


class Nested(torch.nn.Module):
    """The mutated buffers one module down: targets are fully qualified names."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = Counter()

    def forward(self, x):
        return self.inner(x) - 1


class Renorm(torch.nn.Module):
    """``F.embedding(max_norm=...)`` renorms the rows it looks up in the parameter itself."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.arange(12.0).reshape(4, 3))

    def forward(self, ids):
        return F.embedding(ids, self.weight, max_norm=1.0)


class Doubles(torch.nn.Module):
    def forward(self, x):
        x.mul_(2)
        return x + 1


CASES = {
    "buffers": (Counter, (torch.randn(4, 3),), ["count.updated", "mean.updated"]),
    "nested buffers": (Nested, (torch.randn(4, 3),), ["inner.count.updated", "inner.mean.updated"]),
    "parameter": (Renorm, (torch.tensor([0, 2, 2]),), ["weight.updated"]),
    "input": (Doubles, (torch.randn(5),), ["x.updated"]),
}


def _rows(check):
    return {o.name: o for o in check.outputs}


def _state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: t.detach().clone() for name, t in [*module.named_parameters(), *module.named_buffers()]}


def _off_by_one(result: pt2onnx.ExportResult, name: str) -> None:
    """Make the model's output ``name`` one more than it computes (before its first session)."""
    graph = result.model.graph
    position = [v.name for v in graph.outputs].index(name)
    right = graph.outputs[position]
    one = ir.node("Constant", [], attributes={"value": ir.tensor(np.ones((), dtype=right.dtype.numpy()))})
    wrong = ir.node("Add", [right, one.outputs[0]])
    graph.extend([one, wrong])
    right.name = f"{name}.right"
    wrong.outputs[0].name, wrong.outputs[0].type, wrong.outputs[0].shape = name, right.type, right.shape
    graph.outputs[position] = wrong.outputs[0]


@pytest.mark.parametrize("case", CASES)
def test_verify_compares_each_update_with_eager(case):
    cls, args, updated = CASES[case]
    model = cls()
    before = _state(model)
    inputs = [a.clone() for a in args]
    result = pt2onnx.export(model, args)
    check = result.verify(*args)
    assert check.ok, check
    assert [name for name in _rows(check) if name.endswith(".updated")] == updated
    assert all(str(check).count(name) == 1 for name in updated)
    # The user's module and inputs are as they were, and so the weights of the ONNX model
    # (its tensors): a second check starts from the same state.
    assert all(torch.equal(before[k], v) for k, v in _state(model).items())
    assert all(torch.equal(a, b) for a, b in zip(args, inputs))
    again = result.verify(*args)
    assert again.ok, again


@pytest.mark.parametrize("case", CASES)
def test_a_wrong_update_fails_verify_naming_it(case):
    cls, args, updated = CASES[case]
    result = pt2onnx.export(cls(), args)
    _off_by_one(result, updated[0])
    check = result.verify(*args)
    assert not check.ok
    assert [o.name for o in check.outputs if not o.ok] == [updated[0]]
    assert "BAD" in str(check).splitlines()[[o.name for o in check.outputs].index(updated[0]) + 1]


def test_verify_of_an_exported_program_compares_updates():
    # Without the module, eager is program.module(), whose buffers are the program's own
    # tensors: put back too, so the ONNX weights stay the state exported.
    program = torch.export.export(Counter(), (torch.randn(4, 3),))
    result = pt2onnx.export(program, (torch.randn(4, 3),))
    for _ in range(2):
        check = result.verify(torch.randn(4, 3))
        assert check.ok, check
        assert {"count.updated", "mean.updated"} <= set(_rows(check))
    assert int(program.state_dict["count"]) == 0


def test_verify_with_dtype_compares_updates_in_that_dtype():
    model = Counter()
    result = pt2onnx.export(model, (torch.randn(4, 3),), dtype=torch.float16)
    check = result.verify(torch.randn(4, 3))
    assert check.ok, check
    assert _rows(check)["mean.updated"].dtype == "float16"


@converter("aten::add.Tensor")
def add_one_too_many(op, self, other, *, alpha=1):
    """A wrong ``add``: one more than the sum."""
    return op.Add(op.Add(self, other), op.constant(1, op.dtype_of(self)))


def _wrong_add() -> types.ModuleType:
    plugin = types.ModuleType("wrong_add")

    @hookimpl
    def pt2onnx_register_converters(register):
        register.converter("aten::add.Tensor", add_one_too_many)

    plugin.pt2onnx_register_converters = pt2onnx_register_converters
    return plugin


class Steps(torch.nn.Module):
    """Its only add is the buffer's update: a wrong add changes no returned value."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros((), dtype=torch.int64))

    def forward(self, x):
        self.count.add_(1)
        return x * 2


def test_assert_exports_like_eager_fails_on_a_wrong_update():
    with pytest.raises(AssertionError, match=r"count\.updated +int64 .* BAD"):
        assert_exports_like_eager(Steps(), (torch.randn(3),), plugins=[_wrong_add()])


def test_assert_exports_like_eager_passes_a_right_update():
    model = Steps()
    assert_exports_like_eager(model, (torch.randn(3),))
    assert int(model.count) == 0
