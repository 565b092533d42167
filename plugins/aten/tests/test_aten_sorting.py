"""Sorting: sort (stable, descending) and topk (largest/smallest, sorted)."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from lambda_modules import Unary as Fn
from pt2onnx.testing import ALL_DTYPES, assert_exports_like_eager, dims, shapes, tensors

DTYPES = st.sampled_from([getattr(torch, n) for n in ALL_DTYPES])


@given(
    data=st.data(),
    x=tensors(shapes(max_rank=3, min_side=0, max_side=5), DTYPES, low=-2, high=2),
    descending=st.booleans(),
    stable=st.booleans(),
)
def test_sort_is_stable_with_ties(data, x, descending, stable):
    # Small integer-valued data has many ties: indices agree only if both sorts are stable.
    x = x.round() if x.dtype.is_floating_point else x
    d = data.draw(dims(x.dim()))
    if stable:
        model = Fn(lambda t: torch.sort(t, dim=d, descending=descending, stable=True))
    else:
        model = Fn(lambda t: torch.sort(t, dim=d, descending=descending))
    assert_exports_like_eager(model, (x,), expect_ops=["aten::sort.stable" if stable else "aten::sort.default"])


@st.composite
def distinct(draw, shape, dtype):
    """Values without ties (which top-k may break either way), in ``dtype``; floats may
    hold one NaN (torch's largest), one inf and one -inf."""
    n = torch.Size(shape).numel()
    values = torch.tensor(draw(st.permutations(range(n))), dtype=torch.float64) - n // 2
    if dtype.is_floating_point:
        edges = draw(st.lists(st.sampled_from([float("nan"), float("inf"), -float("inf")]), unique=True))[:n]
        values[draw(st.permutations(range(n)))[: len(edges)]] = torch.tensor(edges, dtype=torch.float64)
    return values.reshape(shape).to(dtype)


@given(
    data=st.data(),
    shape=shapes(min_rank=1, max_rank=3, max_side=5),
    dtype=st.sampled_from([getattr(torch, n) for n in ALL_DTYPES if n not in ("bool", "int8", "uint8")]),
    largest=st.booleans(),
    sorted_=st.booleans(),
)
def test_topk(data, shape, dtype, largest, sorted_):
    x = data.draw(distinct(shape, dtype))
    d = data.draw(dims(x.dim()))
    k = data.draw(st.integers(0, x.shape[d]))

    def fn(t):
        values, indices = torch.topk(t, k, d, largest, sorted_)
        if not sorted_:
            # Unsorted top-k may come in any order: compare them sorted.
            order = torch.sort(indices, dim=d).indices
            values, indices = values.gather(d, order), indices.gather(d, order)
        return values, indices

    # A second input of other sizes, also without ties: the harness's default one repeats
    # slices, and torch breaks ties in top-k in an order it leaves undefined. (Sizes of 1
    # stay: torch specializes them.)
    other = data.draw(distinct(tuple(n + 1 if n > 1 else n for n in shape), dtype))
    assert_exports_like_eager(Fn(fn), (x,), other_inputs=[((other,), {})], expect_ops=["aten::topk"])


def test_sort_and_topk_of_dynamic_length_at_opset_14():
    seq = torch.export.Dim("seq", min=3)
    model = Fn(lambda t: (torch.sort(t, descending=True), torch.topk(t, 2, largest=False)))
    x = torch.randperm(6).float().reshape(1, 6)
    assert_exports_like_eager(
        model,
        (x,),
        dynamic_shapes=({1: seq},),
        other_inputs=[((torch.randperm(11).float().reshape(1, 11),), {})],
        opset=14,
        expect_ops=["aten::sort", "aten::topk"],
    )
