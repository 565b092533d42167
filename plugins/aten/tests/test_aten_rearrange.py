"""Rearranging elements: flip, roll, repeat, tril, triu."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lambda_modules import Unary as Fn
from pt2onnx.testing import ALL_DTYPES, assert_exports_like_eager, dims, shapes, tensors

DTYPES = st.sampled_from([getattr(torch, n) for n in ALL_DTYPES])


@given(data=st.data(), x=tensors(shapes(max_rank=4, min_side=0, max_side=3), DTYPES))
def test_flip(data, x):
    axes = tuple(data.draw(st.lists(dims(x.dim()), max_size=x.dim(), unique_by=lambda d: d % max(x.dim(), 1))))
    assert_exports_like_eager(Fn(lambda t: t.flip(axes)), (x,), expect_ops=["aten::flip"])


@given(data=st.data(), x=tensors(shapes(min_rank=1, max_rank=3, min_side=0, max_side=4), DTYPES))
def test_roll(data, x):
    axes = data.draw(st.lists(dims(x.dim()), max_size=x.dim()))
    shifts = data.draw(st.lists(st.integers(-6, 6), min_size=max(len(axes), 1), max_size=max(len(axes), 1)))
    model = Fn(lambda t: t.roll(shifts, axes) if axes else t.roll(shifts[0]))
    assert_exports_like_eager(model, (x,), expect_ops=["aten::roll"])


def test_roll_along_a_dynamic_dim():
    seq = torch.export.Dim("seq")
    model = Fn(lambda t: t.roll(-3, 1))
    assert_exports_like_eager(
        model,
        (torch.randn(2, 5),),
        dynamic_shapes=({1: seq},),
        other_inputs=[((torch.randn(2, 2),), {}), ((torch.randn(2, 11),), {})],
        expect_ops=["aten::roll"],
    )


@pytest.mark.parametrize("shift", [torch.fft.fftshift, torch.fft.ifftshift], ids=["fftshift", "ifftshift"])
def test_roll_by_half_a_dynamic_size(shift):
    """``fftshift`` rolls each dim by half its size: a symbolic shift along a dynamic dim."""
    seq = torch.export.Dim("seq")
    assert_exports_like_eager(
        Fn(lambda t: shift(t, dim=(0, 1))),
        (torch.randn(4, 7),),
        dynamic_shapes=({1: seq},),
        other_inputs=[((torch.randn(4, 2),), {}), ((torch.randn(4, 10),), {})],
        expect_ops=["aten::roll"],
    )


@given(data=st.data(), x=tensors(shapes(max_rank=3, min_side=0, max_side=3), DTYPES))
def test_repeat(data, x):
    repeats = data.draw(st.lists(st.integers(0, 3), min_size=x.dim(), max_size=x.dim() + 2))
    assert_exports_like_eager(Fn(lambda t: t.repeat(repeats)), (x,), expect_ops=["aten::repeat"])


@given(
    x=tensors(shapes(min_rank=2, max_rank=4, min_side=0, max_side=4), DTYPES),
    diagonal=st.integers(-5, 5),
    upper=st.booleans(),
)
def test_tril_triu(x, diagonal, upper):
    fn = (lambda t: t.triu(diagonal)) if upper else (lambda t: t.tril(diagonal))
    assert_exports_like_eager(Fn(fn), (x,), expect_ops=["aten::triu" if upper else "aten::tril"])


def test_rearrange_at_opset_14():
    model = Fn(lambda t: t.flip(0).roll(1, 1).repeat(2, 1).tril())
    assert_exports_like_eager(
        model, (torch.randn(3, 3),), opset=14, expect_ops=["aten::flip", "aten::roll", "aten::repeat", "aten::tril"]
    )
