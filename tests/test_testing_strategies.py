"""``tensors()`` searches where converters break: edge values, wide ranges and
non-contiguous layouts by default."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import find, given, settings
from hypothesis import strategies as st

import pt2onnx
from pt2onnx.testing import ALL_DTYPES, assert_exports_like_eager, dtypes, find_other_sizes, shapes, tensors
from pt2onnx.testing.strategies import LAYOUTS, _relaid

DRAWS = settings(max_examples=300, derandomize=True, database=None)


def _drawn(strategy) -> list[torch.Tensor]:
    seen: list[torch.Tensor] = []

    @DRAWS
    @given(strategy)
    def collect(x):
        seen.append(x)

    collect()
    return seen


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_floats_hold_every_edge_value_by_default(dtype):
    values = torch.cat([t.reshape(-1).double() for t in _drawn(tensors((4, 4), dtype))])
    info = torch.finfo(dtype)
    assert values.isnan().any()
    assert (values == math.inf).any() and (values == -math.inf).any()
    zeros = values[values == 0]
    assert (torch.copysign(torch.ones_like(zeros), zeros) < 0).any(), "-0.0"
    assert ((values != 0) & (values.abs() < info.tiny)).any(), "subnormals"
    assert (values == info.max).any() and (values == info.min).any()
    finite = values[values.isfinite() & (values != 0)].abs()
    assert finite.max() > 1e4 and finite.min() < 1e-3, "large and small magnitudes"


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.int64, torch.uint8])
def test_integers_reach_the_dtype_limits_by_default(dtype):
    values = torch.cat([t.reshape(-1) for t in _drawn(tensors((4, 4), dtype))])
    info = torch.iinfo(dtype)
    assert (values == info.min).any() and (values == info.max).any()
    assert values.abs().max() > 100 and (values.abs() <= 8).any()


def test_bounds_and_no_edges_keep_values_in_range():
    for t in _drawn(tensors((8,), st.sampled_from([torch.float32, torch.int16]), low=-2, high=5, edge_values=False)):
        assert t.isfinite().all() and (t >= -2).all() and (t <= 5).all()


def test_a_subset_of_edge_kinds_is_all_that_is_added():
    values = torch.cat(
        [t.reshape(-1) for t in _drawn(tensors((8,), torch.float32, low=0, high=1, edge_values=["nan"]))]
    )
    assert values.isnan().any()
    assert (values[~values.isnan()] >= 0).all() and (values[~values.isnan()] <= 1).all()


def test_an_unknown_edge_kind_is_an_error():
    with pytest.raises(ValueError, match="unknown edge value kind"):
        _drawn(tensors((2,), torch.float32, edge_values=["nans"]))


def _layout(t: torch.Tensor) -> str:
    """Which of ``LAYOUTS`` a non-contiguous drawn tensor has: gaps in its storage, or none."""
    return "strided" if t.untyped_storage().nbytes() > t.numel() * t.element_size() else "swapped"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_non_contiguous_tensors_are_drawn_by_default(layout):
    search = settings(max_examples=1000, derandomize=True, database=None)
    found = find(tensors(), lambda t: not t.is_contiguous() and _layout(t) == layout, settings=search)
    assert found.numel() >= 2


def test_a_drawn_tensor_shrinks_to_a_contiguous_one():
    # A failure that does not need the layout is reported with a contiguous tensor.
    assert find(tensors((3, 4), torch.float32), lambda t: True, settings=settings(database=None)).is_contiguous()


@st.composite
def _relaid_pairs(draw, layout):
    values = draw(tensors(shapes(min_rank=1, min_side=2), dtypes(ALL_DTYPES), contiguous=True))
    if layout == "swapped" and values.dim() < 2:
        values = values.unsqueeze(0).expand(2, *values.shape).contiguous()
    return values, _relaid(draw, values, layout)


@pytest.mark.parametrize("layout", LAYOUTS)
@DRAWS
@given(data=st.data())
def test_a_non_contiguous_view_holds_the_same_shape_and_values(layout, data):
    values, view = data.draw(_relaid_pairs(layout))
    assert not view.is_contiguous() and _layout(view) == layout
    assert view.shape == values.shape and view.dtype == values.dtype
    assert torch.equal(view.contiguous().view(torch.uint8), values.view(torch.uint8)), "bit for bit, NaN and -0.0 too"


def test_contiguous_true_and_false_force_the_layout():
    assert all(t.is_contiguous() for t in _drawn(tensors((3, 4), contiguous=True)))
    assert not any(t.is_contiguous() for t in _drawn(tensors((3, 4), contiguous=False)))
    # A drawn shape with no non-contiguous layout is skipped, never returned contiguous.
    assert not any(t.is_contiguous() for t in _drawn(tensors(shapes(max_side=2), contiguous=False)))


def test_contiguous_false_refuses_a_shape_that_is_always_contiguous():
    with pytest.raises(ValueError, match=r"shape \(1, 1\) is contiguous in every layout"):
        _drawn(tensors((1, 1), contiguous=False))


class _Layouts(torch.nn.Module):
    """Ops that would read their input in memory order if anything did: flatten, transpose, matmul, cat, slice, scan."""

    def forward(self, x):
        flat = x.reshape(-1)
        return flat * 2, x.transpose(0, 1) @ x, torch.cat([x, x], dim=1), x[1:, ::2] * 3, x.cumsum(1)


@settings(max_examples=10, deadline=None, database=None)
@given(
    # Values of one magnitude: the point is the layout, not where a float32 matmul overflows.
    x=tensors(
        shapes(min_rank=2, max_rank=2, min_side=2), torch.float32, low=-3, high=3, edge_values=False, contiguous=False
    )
)
def test_an_export_of_a_non_contiguous_input_matches_eager(x):
    assert not x.is_contiguous()
    assert_exports_like_eager(_Layouts(), (x,))


def test_an_export_of_a_transposed_input_matches_eager():
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()
    assert_exports_like_eager(_Layouts(), (x,))


def test_an_export_of_a_strided_input_is_checked_at_other_sizes_too():
    # Every other row of a (3, 8, 5) buffer, as tensors() draws it: the program guards its
    # strides, so the inputs of other sizes keep the example's layout.
    buffer = torch.zeros(3, 8, 5)
    x = torch.empty(0).set_(buffer.untyped_storage(), 5, (3, 4, 5), (40, 10, 1))
    x.copy_(torch.randn(3, 4, 5))
    result = pt2onnx.export(_Abs(), (x,), dynamic_shapes="auto")
    found = find_other_sizes(result, (x,), {})
    assert found.inputs is not None, found.attempts


class _Abs(torch.nn.Module):
    def forward(self, x):
        return x.abs()
