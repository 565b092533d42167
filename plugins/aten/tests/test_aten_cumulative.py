"""cummax, cummin, cumprod, logcumsumexp against eager PyTorch, NaN and edge values included."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lambda_modules import Unary as Fn
from pt2onnx.testing import ALL_DTYPES, FLOAT_DTYPES, assert_exports_like_eager, shapes, tensors

A = torch.ops.aten


@pytest.mark.parametrize("name", ["cummax", "cummin"])
@given(data=st.data(), shape=shapes(max_rank=3, max_side=5))
def test_cumulative_extremes(name, data, shape):
    # Every dtype, edge values included: NaN propagates and its index is taken, as in torch.
    x = data.draw(tensors(shape, st.sampled_from([getattr(torch, n) for n in ALL_DTYPES])))
    dim = data.draw(st.integers(-max(len(shape), 1), max(len(shape), 1) - 1))
    model = Fn(lambda t: getattr(torch, name)(t, dim))
    assert_exports_like_eager(model, (x,), expect_ops={f"aten::{name}": "aten"})


def test_cummax_nan_index_is_the_last_nan():
    nan = float("nan")
    x = torch.tensor([[1.0, nan, 3.0, nan, 0.5], [3.0, 1.0, 3.0, 2.0, 1.0]])
    assert_exports_like_eager(Fn(lambda t: torch.cummax(t, 1)), (x,), expect_ops={"aten::cummax": "aten"})


@given(data=st.data(), shape=shapes(max_rank=3, max_side=5))
def test_cumprod(data, shape):
    # Small values: a long product of large ones overflows to inf in both, which proves nothing.
    dtype = data.draw(st.sampled_from([torch.float32, torch.float64, torch.int32, torch.int64]))
    x = data.draw(tensors(shape, dtype, low=-2, high=2, edge_values=("nan", "zero", "inf")))
    dim = data.draw(st.integers(-max(len(shape), 1), max(len(shape), 1) - 1))
    assert_exports_like_eager(Fn(lambda t: torch.cumprod(t, dim)), (x,), expect_ops={"aten::cumprod": "aten"})


def test_cumprod_multiplies_float32_in_float64_as_torch():
    # 1e-30 * 1e-30 underflows float32 but not torch's float64 accumulator: 1e30 brings it back.
    x = torch.tensor([1e-30, 1e-30, 1e30, 1e30])
    result = assert_exports_like_eager(Fn(lambda t: torch.cumprod(t, 0)), (x,))
    assert result.run(x).tolist() == pytest.approx([1e-30, 0.0, 1e-30, 1.0])


@given(data=st.data(), shape=shapes(max_rank=3, max_side=5))
def test_logcumsumexp(data, shape):
    x = data.draw(tensors(shape, st.sampled_from([getattr(torch, n) for n in FLOAT_DTYPES])))
    dim = data.draw(st.integers(-max(len(shape), 1), max(len(shape), 1) - 1))
    model = Fn(lambda t: torch.logcumsumexp(t, dim))
    assert_exports_like_eager(model, (x,), expect_ops={"aten::logcumsumexp": "aten"})
