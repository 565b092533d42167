"""Mixture of experts: ``transformers::grouped_mm_fallback`` and Mixtral's router and experts, against eager."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from tiny_models import causal_lm
from transformers.integrations import moe  # noqa: F401 - defines transformers::grouped_mm_fallback

from pt2onnx.errors import UnsupportedArgumentError
from pt2onnx.testing import assert_exports_like_eager, tensors

GROUPED_MM = torch.ops.transformers.grouped_mm_fallback


class GroupedMatmul(torch.nn.Module):
    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(weight, requires_grad=False)

    def forward(self, x, offsets):
        return GROUPED_MM(x, self.weight, offsets)


@given(
    data=st.data(),
    counts=st.lists(st.integers(0, 4), min_size=1, max_size=5),
    spare=st.integers(0, 2),
    dtype=st.sampled_from([torch.float32, torch.float64, torch.bfloat16]),
    offsets_dtype=st.sampled_from([torch.int32, torch.int64]),
)
def test_grouped_mm_fallback(data, counts, spare, dtype, offsets_dtype):
    # Rows are sorted by group; offsets are cumulative counts (empty groups too). Rows past the
    # last offset (``spare``) come out as zeros, as in the eager fallback.
    rows, inner, outer = sum(counts) + spare, data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    x = data.draw(tensors((rows, inner), dtype, low=-2, high=2, edge_values=False))
    weight = data.draw(tensors((len(counts), inner, outer), dtype, low=-2, high=2, edge_values=False))
    offsets = torch.tensor(counts, dtype=torch.int64).cumsum(0).to(offsets_dtype)
    # Every dim of x dynamic: more rows only add spare ones, which the offsets leave zero.
    shapes = {"x": {0: torch.export.Dim.AUTO, 1: torch.export.Dim.AUTO}, "offsets": None}
    assert_exports_like_eager(
        GroupedMatmul(weight),
        (x, offsets),
        dynamic_shapes=shapes,
        expect_ops={"transformers::grouped_mm_fallback": "transformers"},
    )


def test_grouped_mm_fallback_at_opset_14():
    # One Gather per expert's weight and the row count from a Gather of the whole shape:
    # Split(num_outputs=) is opset 18, Shape(start=, end=) opset 15.
    torch.manual_seed(0)
    x, weight = torch.randn(7, 3), torch.randn(3, 3, 2)
    offsets = torch.tensor([2, 2, 6], dtype=torch.int32)  # an empty expert, and a spare row
    result = assert_exports_like_eager(
        GroupedMatmul(weight),
        (x, offsets),
        other_inputs=[((torch.randn(9, 3), offsets), {})],
        opset=14,
        expect_ops={"transformers::grouped_mm_fallback": "transformers"},
    )
    assert result.model.opset_imports[""] == 14


def test_a_symbolic_number_of_experts_is_refused():
    x, weight = torch.randn(5, 3), torch.randn(2, 3, 4)
    offsets = torch.tensor([2, 5], dtype=torch.int32)

    class Both(torch.nn.Module):
        def forward(self, x, weight, offsets):
            return GROUPED_MM(x, weight, offsets)

    shapes = {"x": None, "weight": {0: torch.export.Dim("experts")}, "offsets": {0: torch.export.Dim("experts")}}
    with pytest.raises(UnsupportedArgumentError, match="number of experts, is symbolic"):
        assert_exports_like_eager(Both(), (x, weight, offsets), dynamic_shapes=shapes)


@pytest.mark.slow
def test_mixtral_router_and_experts_match_eager():
    # The sparse block routes each token to its top-2 of 4 experts: histc counts the tokens per
    # expert, floor_divide maps sorted slots back to tokens, and the router normalizes in place.
    block = causal_lm("mixtral").model.layers[0].mlp
    hidden = torch.randn(2, 5, 64, generator=torch.Generator().manual_seed(0))
    result = assert_exports_like_eager(
        block,
        (hidden,),
        expect_ops={
            "transformers::grouped_mm_fallback": "transformers",
            "aten::histc": "aten",
            "aten::floor_divide": "aten",
        },
    )
    assert result.report.retraced and "div_" in result.report.decompose_reason
