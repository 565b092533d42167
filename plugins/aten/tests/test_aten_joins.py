"""Joining and splitting: cat, stack, split, split_with_sizes, chunk, unbind."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from lambda_modules import Binary as Fn2
from lambda_modules import Unary as Fn
from pt2onnx.testing import ALL_DTYPES, assert_exports_like_eager, dims, shapes, tensors

DTYPES = st.sampled_from([getattr(torch, n) for n in ALL_DTYPES])


@given(data=st.data(), shape=shapes(min_rank=1, max_rank=4, max_side=3), a=DTYPES, b=DTYPES)
def test_cat_promotes_and_joins_along_any_dim(data, shape, a, b):
    d = data.draw(dims(len(shape)))
    other = list(shape)
    other[d] = data.draw(st.integers(0, 3))
    x, y = data.draw(tensors(shape, a)), data.draw(tensors(tuple(other), b))
    assert_exports_like_eager(Fn2(lambda s, t: torch.cat([s, t, s], d)), (x, y), expect_ops=["aten::cat"])


@given(x=tensors(shapes(min_rank=2, max_rank=3, max_side=3), DTYPES))
def test_cat_skips_empty_1d_tensors(x):
    empty = torch.zeros(0, dtype=x.dtype)
    assert_exports_like_eager(Fn2(lambda s, e: torch.cat([e, s, e], -1)), (x, empty), expect_ops=["aten::cat"])


def test_cat_along_a_dynamic_dim():
    seq = torch.export.Dim("seq")
    model = Fn2(lambda past, new: torch.cat([past, new], 1))
    past, new = torch.randn(2, 5, 3), torch.randn(2, 1, 3)
    assert_exports_like_eager(
        model,
        (past, new),
        dynamic_shapes=({1: seq}, {}),
        other_inputs=[((torch.randn(2, 9, 3), new), {})],
        expect_ops=["aten::cat"],
    )


@given(data=st.data(), x=tensors(shapes(max_rank=3, min_side=0, max_side=3), DTYPES), b=DTYPES)
def test_stack(data, x, b):
    d = data.draw(st.integers(-x.dim() - 1, x.dim()))
    y = data.draw(tensors(tuple(x.shape), b))
    assert_exports_like_eager(Fn2(lambda s, t: torch.stack([s, t], d)), (x, y), expect_ops=["aten::stack"])


@given(data=st.data(), x=tensors(shapes(min_rank=1, max_rank=3, max_side=5), DTYPES))
def test_split_with_sizes(data, x):
    d = data.draw(dims(x.dim()))
    n = x.shape[d]
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=3)))
    sizes = [b - a for a, b in zip([0, *cuts], [*cuts, n])]
    assert_exports_like_eager(Fn(lambda t: t.split(sizes, d)), (x,), expect_ops=["aten::split_with_sizes"])


@given(data=st.data(), x=tensors(shapes(min_rank=1, max_rank=3, max_side=6), DTYPES))
def test_split(data, x):
    d = data.draw(dims(x.dim()))
    size = data.draw(st.integers(1, 7))
    assert_exports_like_eager(Fn(lambda t: t.split(size, d)), (x,), expect_ops=["aten::split.Tensor"])


@given(data=st.data(), x=tensors(shapes(min_rank=1, max_rank=3, max_side=7), DTYPES))
def test_chunk(data, x):
    d = data.draw(dims(x.dim()))
    chunks = data.draw(st.integers(1, 5))
    assert_exports_like_eager(Fn(lambda t: t.chunk(chunks, d)), (x,), expect_ops=["aten::chunk"])


def test_split_and_chunk_of_a_tensor_with_a_dynamic_dim():
    # Splitting a dynamic dim would specialize it (the number of pieces depends on it).
    batch = torch.export.Dim("batch")
    model = Fn(lambda t: (*t.split(2, 1), *t.chunk(2, 1), *t.unbind(1)))
    assert_exports_like_eager(
        model,
        (torch.randn(3, 5),),
        dynamic_shapes=({0: batch},),
        other_inputs=[((torch.randn(7, 5),), {})],
        expect_ops=["aten::split.Tensor", "aten::chunk"],
    )


@given(data=st.data(), x=tensors(shapes(min_rank=1, max_rank=4, max_side=3), DTYPES))
def test_unbind(data, x):
    d = data.draw(dims(x.dim()))
    assert_exports_like_eager(Fn(lambda t: t.unbind(d)), (x,), expect_ops=["aten::unbind"])


def test_joins_at_opset_14():
    model = Fn(lambda t: torch.cat([*t.split([1, 2], 1), torch.stack(t.chunk(3, 1), 0).flatten()[:3].view(1, 3)], 1))
    assert_exports_like_eager(
        model, (torch.randn(1, 3),), opset=14, expect_ops=["aten::cat", "aten::split_with_sizes", "aten::chunk"]
    )
