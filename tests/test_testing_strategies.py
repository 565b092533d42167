"""``tensors()`` searches where converters break: edge values and wide ranges by default."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pt2onnx.testing import tensors

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
