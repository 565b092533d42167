"""i0, special_i0, special_i0e, special_i1, special_i1e against eager PyTorch, edge values
included, and the Kaiser window that needs i0."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lambda_modules import Unary
from pt2onnx.testing import assert_exports_like_eager, shapes, tensors

NUMBERS = st.sampled_from([torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32])
BESSEL = {
    "aten::i0": torch.i0,
    "aten::special_i0": torch.special.i0,
    "aten::special_i0e": torch.special.i0e,
    "aten::special_i1": torch.special.i1,
    "aten::special_i1e": torch.special.i1e,
}


@pytest.mark.parametrize("name", sorted(BESSEL))
@given(x=tensors(shapes(max_rank=3), NUMBERS), spread=st.sampled_from([1.0, 10.0, 100.0]))
def test_modified_bessel_functions(name, x, spread):
    # Both series (|x| up to 8 and beyond) and exp's overflow (|x| past 88 in float32) at
    # every spread; edge values (NaN, inf, extremes) come with the drawn tensor.
    x = x * spread if x.is_floating_point() else x
    assert_exports_like_eager(Unary(BESSEL[name]), (x,), expect_ops={name: "aten"})


def test_the_series_meet_at_eight():
    x = torch.tensor([7.999, 8.0, 8.001, -8.0, 0.0, -0.0, 1e-30], dtype=torch.float64)
    for name, fn in BESSEL.items():
        assert_exports_like_eager(Unary(fn), (x,), expect_ops={name: "aten"})


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("periodic", [True, False])
@given(length=st.integers(2, 40), beta=st.sampled_from([0.0, 0.5, 5.0, 12.0, 40.0]))
def test_kaiser_window_of_an_input_length(dtype, periodic, length, beta):
    # The window's length comes from the input's size: it is computed in the graph.
    model = Unary(lambda x: x * torch.kaiser_window(x.shape[-1], periodic, beta, dtype=dtype))
    assert_exports_like_eager(model, (torch.ones(3, length, dtype=dtype),), expect_ops=["aten::kaiser_window.beta"])


def test_kaiser_window_overloads_and_a_length_of_one():
    for window, expect in [
        (lambda n: torch.kaiser_window(n), "aten::kaiser_window.default"),
        (lambda n: torch.kaiser_window(n, False), "aten::kaiser_window.periodic"),
    ]:
        model = Unary(lambda x, window=window: x * window(x.shape[-1]))
        assert_exports_like_eager(model, (torch.ones(2, 7),), expect_ops=[expect])
    model = Unary(lambda x: x * torch.kaiser_window(x.shape[-1], False, 3.0))
    # torch guards a symbolic length against 1 (its kernel special-cases it), so only a
    # length known at export is ever 1 or 0: a constant.
    assert_exports_like_eager(model, (torch.ones(2, 1),), expect_ops=["aten::kaiser_window.beta"], dynamic=False)
    for dtype in (torch.bfloat16, torch.float64):
        empty = Unary(lambda x, dtype=dtype: torch.kaiser_window(0, dtype=dtype) + x.sum())
        assert_exports_like_eager(empty, (torch.ones(2, dtype=dtype),), dynamic=False)


def test_signal_windows_kaiser_exports_through_i0():
    model = Unary(lambda x: x * torch.signal.windows.kaiser(x.shape[-1], beta=8.0, sym=True))
    assert_exports_like_eager(model, (torch.ones(2, 9),), expect_ops=["aten::i0"])
