"""Ops no plugin converts fall back through torch's full decomposition table, and the
"no converter" error says per op whether torch decomposes it and why that was not used."""

from __future__ import annotations

import types

import pytest
import torch

import pt2onnx
from pt2onnx.errors import UnsupportedOpsError
from pt2onnx.plugin import hookimpl
from pt2onnx.testing import assert_exports_like_eager

A = torch.ops.aten


class Call(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x, y):
        return self.fn(x, y)


def _captured_targets(model, args):
    return {n.target for n in torch.export.export(model, args).graph.nodes if n.op == "call_function"}


@pytest.mark.parametrize(
    ("op", "fn"),
    [
        (A.dist.default, lambda x, y: torch.dist(x, y, 3)),
        (A.narrow_copy.default, lambda x, y: torch.narrow_copy(x, 1, 1, 2) * y[:, :2]),
        (A.tril_indices.default, lambda x, y: x[tuple(torch.tril_indices(4, 4, -1))] + y[0, 0]),
    ],
)
def test_ops_only_the_full_table_decomposes_are_exported(op, fn):
    x, y = torch.randn(4, 5), torch.randn(4, 5)
    model = Call(fn)
    # The premise: the captured graph holds the op, and the default table leaves it whole.
    assert op in _captured_targets(model, (x, y))
    assert op not in torch.export.default_decompositions()
    result = assert_exports_like_eager(model, (x, y))
    assert result.report.retraced
    assert op_name_of(op) in result.report.decompose_reason


def op_name_of(op):
    return f"aten::{op._schema.name.split('::')[1]}.{op._overloadname}"


def test_no_converter_error_says_why_no_decomposition_was_used():
    # bessel_j0's reference implementation is a prim of the same name; dist has a real
    # decomposition, but a graph that holds bessel_j0 is not re-traced at all.
    model = Call(lambda x, y: torch.special.bessel_j0(x) + torch.dist(x, y))
    with pytest.raises(UnsupportedOpsError) as info:
        pt2onnx.export(model, (torch.randn(3), torch.randn(3)))
    notes = info.value.notes
    assert notes["aten::special_bessel_j0.default"] == (
        "torch's reference implementation is the primitive prims::bessel_j0.default, which no plugin converts"
    )
    assert "was not re-traced" in notes["aten::dist.default"]
    assert "decomposition: torch's reference implementation is the primitive" in str(info.value)


def test_no_decomposition_at_all_is_said():
    model = Call(lambda x, lengths: torch.segment_reduce(x, "sum", lengths=lengths))
    with pytest.raises(UnsupportedOpsError) as info:
        pt2onnx.export(model, (torch.randn(6), torch.tensor([2, 4])))
    assert info.value.notes == {"aten::segment_reduce.default": "torch has no decomposition for it"}


def test_a_full_table_decomposition_into_primitives_is_named():
    # lcm's reference implementation needs prims no plugin converts: the default table
    # is used instead, and the error says what the full table produced.
    model = Call(lambda x, y: torch.lcm(x, y))
    with pytest.raises(UnsupportedOpsError) as info:
        pt2onnx.export(model, (torch.tensor([4, 6]), torch.tensor([6, 10])))
    note = info.value.notes["aten::lcm.default"]
    assert note.startswith("torch's full table decomposes it, but that re-trace produced primitives")
    assert "prims::" in note


def test_an_op_kept_whole_without_converter_is_not_decomposed():
    keeper = types.ModuleType("keeps_dist")

    @hookimpl
    def pt2onnx_register_decompositions(register):
        register.keep("aten::dist")

    keeper.pt2onnx_register_decompositions = pt2onnx_register_decompositions
    model = Call(lambda x, y: torch.dist(x, y))
    with pytest.raises(UnsupportedOpsError) as info:
        pt2onnx.export(model, (torch.randn(3), torch.randn(3)), plugins=[keeper])
    assert "a plugin keeps it whole (register.keep) while none converts it" in info.value.notes["aten::dist.default"]


def test_every_op_converted_still_translates_as_captured():
    model = Call(lambda x, y: torch.relu(x) + y)
    result = assert_exports_like_eager(model, (torch.randn(3), torch.randn(3)))
    assert not result.report.retraced
