"""``torch.cond`` -> ``If``: tensor and symbolic predicates, several outputs, closures, dynamic shapes."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings

from pt2onnx.testing import assert_exports_like_eager, tensors

N = torch.export.Dim("n", min=2, max=64)
MODES = pytest.mark.parametrize("strict", [False, True], ids=["nonstrict", "strict"])


class TwoOutputs(torch.nn.Module):
    """Tensor predicate, two outputs, a closure over an outer value."""

    def forward(self, x, y):
        z = y * 2

        def true_fn(x):
            return x.abs() + z, x * 3

        def false_fn(x):
            return x - z, x.neg()

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


class ShapePredicate(torch.nn.Module):
    """A symbolic predicate (``x.shape[0] > 4`` on a dynamic dim)."""

    def forward(self, x):
        return torch.cond(x.shape[0] > 4, lambda x: x * 2, lambda x: x - 1, (x,))


class FlagPredicate(torch.nn.Module):
    def forward(self, flag, x):
        return torch.cond(flag, lambda x: x + 1, lambda x: x * x, (x,))


@MODES
# Not float32's extremes: x.sum() picks the branch, and where it overflows the order of the
# additions decides, which differs between torch and onnxruntime.
@given(x=tensors(shape=(3, 4), dtype="float32", low=-1e3, high=1e3, edge_values=("nan", "inf", "zero", "subnormal")))
@settings(max_examples=4)
def test_cond_two_outputs_and_closure(strict, x):
    y = torch.randn(3, 4)
    assert_exports_like_eager(
        TwoOutputs(), (x, y), strict=strict, expect_ops=["higher_order::cond"], other_inputs=[((-x.abs() - 1, y), {})]
    )


@MODES
def test_cond_both_branches_taken_on_one_model(strict):
    x = torch.randn(3, 4)
    assert_exports_like_eager(
        FlagPredicate(),
        (torch.tensor(True), x),
        strict=strict,
        expect_ops=["higher_order::cond"],
        other_inputs=[((torch.tensor(False), x), {})],
    )


@MODES
def test_cond_symbolic_predicate_dynamic_shape(strict):
    result = assert_exports_like_eager(
        ShapePredicate(),
        (torch.randn(6, 3),),
        strict=strict,
        dynamic_shapes={"x": {0: N}},
        expect_ops=["higher_order::cond"],
        other_inputs=[((torch.randn(3, 3),), {})],
    )
    assert any(n.op_type == "If" for n in result.model.graph)
