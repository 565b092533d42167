"""Scattering: scatter, scatter_add, scatter_reduce, select_scatter, slice_scatter, masked_scatter."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import pt2onnx
from lambda_modules import Ternary as Fn3
from pt2onnx.errors import UnsupportedArgumentError, UnsupportedOpsError
from pt2onnx.testing import ALL_DTYPES, assert_exports_like_eager, dims, shapes, tensors

DTYPES = st.sampled_from([getattr(torch, n) for n in ALL_DTYPES])
NUMERIC = st.sampled_from([getattr(torch, n) for n in ALL_DTYPES if n != "bool"])


@st.composite
def scatter_case(draw, dtypes, unique):
    """(self, dim, index, src): index no larger than self, src no smaller than index."""
    x = draw(tensors(shapes(max_rank=3, max_side=4), dtypes))
    d = draw(dims(x.dim()))
    axis = d % max(x.dim(), 1)
    shape = tuple(draw(st.integers(1, n)) for n in x.shape)
    n = x.shape[axis] if x.dim() else 1
    if unique and x.dim():
        # Each line along the axis is a prefix of a permutation: no position is written twice.
        others = tuple(k for k in range(x.dim()) if k != axis)
        generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
        keys = torch.rand((*(shape[k] for k in others), n), generator=generator)
        index = torch.movedim(keys.argsort(-1)[..., : shape[axis]], -1, axis)
    else:
        # In range, without edge values: torch rejects an index out of range.
        index = draw(tensors(shape, torch.int64, low=0, high=n - 1, edge_values=False))
    src_shape = tuple(s + draw(st.integers(0, 1)) for s in shape)
    src = draw(tensors(src_shape, x.dtype))
    return x, d, index, src


@given(case=scatter_case(DTYPES, unique=True), use_value=st.booleans())
def test_scatter(case, use_value):
    x, d, index, src = case
    if use_value:
        value = 1 if x.dtype != torch.bool else True
        model = Fn3(lambda t, i, s: t.scatter(d, i, value))
    else:
        model = Fn3(lambda t, i, s: t.scatter(d, i, s))
    op = "aten::scatter.value" if use_value else "aten::scatter.src"
    assert_exports_like_eager(model, (x, index, src), expect_ops=[op])


@pytest.mark.parametrize("use_value", [True, False], ids=["value", "src"])
@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_with_reduce_of_duplicates(reduce, use_value):
    # Both overloads converted in every run, with duplicates to accumulate: a seed whose
    # property test below drew only empty or one-valued inputs left one unproven.
    x, src = torch.randn(3, 4), torch.randn(2, 4)
    index = torch.tensor([[0, 1, 2, 0], [0, 2, 2, 1]])
    if use_value:
        model = Fn3(lambda t, i, s: t.scatter(0, i, 2, reduce=reduce))
    else:
        model = Fn3(lambda t, i, s: t.scatter(0, i, s, reduce=reduce))
    op = "aten::scatter.value_reduce" if use_value else "aten::scatter.reduce"
    assert_exports_like_eager(model, (x, index, src), expect_ops=[op])


@given(case=scatter_case(NUMERIC, unique=False), reduce=st.sampled_from(["add", "multiply"]), use_value=st.booleans())
def test_scatter_with_reduce(case, reduce, use_value):
    # torch's older scatter(reduce=...): duplicates accumulate (thorough OpInfo: no converter).
    x, d, index, src = case
    if use_value:
        model = Fn3(lambda t, i, s: t.scatter(d, i, 2, reduce=reduce))
    else:
        model = Fn3(lambda t, i, s: t.scatter(d, i, s, reduce=reduce))
    op = "aten::scatter.value_reduce" if use_value else "aten::scatter.reduce"
    assert_exports_like_eager(model, (x, index, src), expect_ops=[op])


@given(case=scatter_case(NUMERIC, unique=False))
def test_scatter_add_accumulates_duplicates(case):
    x, d, index, src = case
    model = Fn3(lambda t, i, s: t.scatter_add(d, i, s))
    assert_exports_like_eager(model, (x, index, src), expect_ops=["aten::scatter_add"])


@given(
    case=scatter_case(NUMERIC, unique=False),
    reduce=st.sampled_from(["sum", "prod", "amax", "amin", "mean"]),
    include_self=st.booleans(),
)
def test_scatter_reduce(case, reduce, include_self):
    x, d, index, src = case
    model = Fn3(lambda t, i, s: t.scatter_reduce(d, i, s, reduce, include_self=include_self))
    assert_exports_like_eager(model, (x, index, src), expect_ops=["aten::scatter_reduce"])


@given(data=st.data(), x=tensors(shapes(min_rank=1, max_rank=4, max_side=3), DTYPES))
def test_select_scatter(data, x):
    d = data.draw(dims(x.dim()))
    n = x.shape[d]
    i = data.draw(st.integers(-n, n - 1))
    src = data.draw(tensors(tuple(x.select(d, i).shape), x.dtype))
    model = Fn3(lambda t, s, _: torch.select_scatter(t, s, d, i))
    assert_exports_like_eager(model, (x, src, x), expect_ops=["aten::select_scatter"])


def test_select_scatter_on_a_fixed_input():
    # test_select_scatter's draws may all be empty or one-valued (no witness): this input has one.
    model = Fn3(lambda t, s, _: torch.select_scatter(t, s, 1, -2))
    x = torch.randn(3, 4)
    assert_exports_like_eager(model, (x, torch.randn(3), x), expect_ops=["aten::select_scatter"])


@given(
    data=st.data(),
    x=tensors(shapes(min_rank=1, max_rank=3, min_side=0, max_side=5), DTYPES),
    start=st.one_of(st.none(), st.integers(-6, 6)),
    end=st.one_of(st.none(), st.integers(-6, 6), st.just(2**62)),
    step=st.integers(1, 3),
)
def test_slice_scatter(data, x, start, end, step):
    d = data.draw(dims(x.dim()))
    index = (slice(None),) * (d % x.dim()) + (slice(start, end, step),)
    src = data.draw(tensors(tuple(x[index].shape), x.dtype))
    model = Fn3(lambda t, s, _: torch.slice_scatter(t, s, d, start, end, step))
    assert_exports_like_eager(model, (x, src, x), expect_ops=["aten::slice_scatter"])


@given(data=st.data(), x=tensors(shapes(max_rank=3, min_side=0, max_side=3), DTYPES))
def test_masked_scatter(data, x):
    mask_shape = tuple(data.draw(st.sampled_from([1, n])) for n in x.shape)[data.draw(st.integers(0, x.dim())) :]
    mask = data.draw(tensors(mask_shape, torch.bool))
    source = data.draw(tensors((x.numel() + data.draw(st.integers(0, 2)),), x.dtype))
    model = Fn3(lambda t, m, s: t.masked_scatter(m, s))
    assert_exports_like_eager(model, (x, mask, source), expect_ops=["aten::masked_scatter"])


def test_scatter_family_at_opset_18_with_a_dynamic_dim():
    # scatter_reduce by amax: ScatterElements reduces by max from opset 18.
    batch = torch.export.Dim("batch")

    def fn(t, i, s):
        a = t.scatter_reduce(1, i, s, "amax", include_self=False)
        b = torch.slice_scatter(t, s[:, :2], 1, 1, 3)
        return a, b, t.scatter_add(1, i, s)

    x, i, s = torch.randn(2, 4), torch.tensor([[0, 0, 3], [1, 2, 1]]), torch.randn(2, 3)
    assert_exports_like_eager(
        Fn3(fn),
        (x, i, s),
        dynamic_shapes=({0: batch}, {0: batch}, {0: batch}),
        other_inputs=[((torch.randn(3, 4), torch.tensor([[0, 0, 3], [1, 2, 1], [3, 3, 3]]), torch.randn(3, 3)), {})],
        opset=18,
        expect_ops=["aten::scatter_reduce", "aten::slice_scatter", "aten::scatter_add"],
    )


def test_scatter_add_and_sum_at_opset_16_and_max_refused_below_18():
    def fn(t, i, s):
        return t.scatter_reduce(1, i, s, "sum"), t.scatter_add(1, i, s), t.scatter(1, i, s)

    x, i, s = torch.randn(2, 4), torch.tensor([[0, 0, 3], [1, 2, 1]]), torch.randn(2, 3)
    assert_exports_like_eager(
        Fn3(fn), (x, i, s), opset=16, expect_ops=["aten::scatter_reduce", "aten::scatter_add", "aten::scatter"]
    )
    with pytest.raises(UnsupportedArgumentError, match="ScatterElements reduces by max/min from opset 18"):
        pt2onnx.export(Fn3(lambda t, i, s: t.scatter_reduce(1, i, s, "amax")), (x, i, s), opset=17)
    with pytest.raises(UnsupportedOpsError, match="the oldest that works: opset=16"):
        pt2onnx.export(Fn3(lambda t, i, s: t.scatter_add(1, i, s)), (x, i, s), opset=15)


def test_masked_scatter_broadcasts_self_to_the_masks_shape():
    # Thorough OpInfo: self (5,), mask (5, 5): the result is (5, 5).
    x, mask, source = torch.randn(5), torch.rand(5, 5) > 0.5, torch.randn(5, 5)
    assert_exports_like_eager(
        Fn3(lambda t, m, s: t.masked_scatter(m, s)), (x, mask, source), expect_ops=["aten::masked_scatter"]
    )
