"""max/min of a whole tensor, var_mean, std_mean and median against eager PyTorch."""

from __future__ import annotations

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from lambda_modules import Unary as Fn
from pt2onnx.testing import ALL_DTYPES, FLOAT_DTYPES, assert_exports_like_eager, shapes, tensors

EVERY = st.sampled_from([getattr(torch, n) for n in ALL_DTYPES])
FLOATS = st.sampled_from([getattr(torch, n) for n in FLOAT_DTYPES])


@pytest.mark.parametrize("name", ["max", "min"])
@given(x=tensors(shapes(max_rank=3), EVERY))
def test_whole_tensor_extremes(name, x):
    # NaN among the values makes the result NaN, as in torch.
    assert_exports_like_eager(Fn(getattr(torch, name)), (x,), expect_ops={f"aten::{name}.default": "aten"})


@pytest.mark.parametrize("name", ["var_mean", "std_mean"])
@given(data=st.data(), shape=shapes(min_rank=1, max_rank=3), keepdim=st.booleans())
def test_moments(name, data, shape, keepdim):
    # Within +-1e3, as test_aten_reductions.py::test_var: overflowing squares are inf or
    # NaN in torch by the tensor's size.
    x = data.draw(tensors(shape, FLOATS, low=-1e3, high=1e3, edge_values=("nan", "zero")))
    dim = data.draw(st.one_of(st.none(), st.lists(st.integers(0, len(shape) - 1), min_size=1, unique=True)))
    correction = data.draw(st.sampled_from([0, 1, 2]))
    model = Fn(lambda t: getattr(torch, name)(t, dim, correction=correction, keepdim=keepdim))
    assert_exports_like_eager(model, (x,), expect_ops={f"aten::{name}": "aten"})


@given(
    x=tensors(shapes(min_side=1, max_rank=3), st.sampled_from([torch.float32, torch.float64, torch.int64, torch.int16]))
)
def test_median_of_everything(x):
    assert_exports_like_eager(Fn(torch.median), (x,), expect_ops={"aten::median.default": "aten"})


@given(data=st.data(), shape=shapes(min_rank=1, max_rank=3, min_side=1), keepdim=st.booleans())
def test_median_along_a_dim(data, shape, keepdim):
    # Which of several equal values torch indexes is unspecified: distinct values, and NaN
    # (whose index is the first NaN's in both).
    x = data.draw(tensors(shape, st.sampled_from([torch.float32, torch.float64]), edge_values=("nan",)))
    finite = x[~x.isnan()]
    assume(finite.unique().numel() == finite.numel())
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    model = Fn(lambda t: torch.median(t, dim, keepdim=keepdim))
    assert_exports_like_eager(model, (x,), expect_ops={"aten::median.dim": "aten"})
