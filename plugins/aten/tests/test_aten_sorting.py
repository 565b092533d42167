"""Sorting: sort (stable, descending) and topk (largest/smallest, sorted)."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from lambda_modules import Unary as Fn
from lambda_modules import Variadic as Call
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


# searchsorted has no bool kernel in torch; a NaN in the sorted sequence makes it unsorted
# (torch's answer then depends on its binary search's probe order, see sorting.py), so
# sequences draw every edge value but NaN. Values draw NaN too.
SEARCH_DTYPES = st.sampled_from([getattr(torch, n) for n in ALL_DTYPES if n != "bool"])
SEQUENCE_EDGES = ("inf", "zero", "subnormal", "extreme")


@given(
    data=st.data(),
    dtype=SEARCH_DTYPES,
    batched=st.booleans(),
    side=st.sampled_from(["left", "right", None]),
    right=st.booleans(),
    out_int32=st.booleans(),
    with_sorter=st.booleans(),
)
def test_searchsorted(data, dtype, batched, side, right, out_int32, with_sorter):
    length = data.draw(st.integers(0, 6))
    lead = data.draw(shapes(max_rank=2, max_side=3)) if batched else ()
    sequence = data.draw(tensors((*lead, length), dtype, low=-3, high=3, edge_values=SEQUENCE_EDGES))
    # Few distinct values: values equal to entries test left against right.
    values_shape = (*lead, data.draw(st.integers(0, 4))) if batched else data.draw(shapes(max_rank=2))
    values = data.draw(tensors(values_shape, dtype, low=-3, high=3))
    values = values.round() if dtype.is_floating_point else values
    sequence = sequence.round() if dtype.is_floating_point else sequence
    right = right if side is None else side == "right"  # torch refuses a side that contradicts right
    options = {"out_int32": out_int32, "right": right, "side": side}
    if with_sorter:
        # The sorter is computed in the model: the harness's input of other sizes then has one too.
        model = Call(lambda s, v: torch.searchsorted(s, v, sorter=torch.argsort(s, dim=-1, stable=True), **options))
    else:
        model = Call(lambda s, v: torch.searchsorted(torch.sort(s, dim=-1).values, v, **options))
    args = (sequence, values)
    assert_exports_like_eager(model, args, expect_ops=["aten::searchsorted.Tensor"])


@given(
    x=tensors(shapes(max_rank=3), SEARCH_DTYPES, low=-3, high=3),
    boundaries=tensors(
        shapes(min_rank=1, max_rank=1, min_side=0, max_side=6), low=-3, high=3, edge_values=SEQUENCE_EDGES
    ),
    right=st.booleans(),
    out_int32=st.booleans(),
)
def test_bucketize(x, boundaries, right, out_int32):
    # Boundaries of any dtype (torch compares in the promoted one); rounded values tie with them.
    x = x.round() if x.dtype.is_floating_point else x
    boundaries = boundaries.round() if boundaries.dtype.is_floating_point else boundaries
    boundaries = boundaries.to(torch.int64) if boundaries.dtype == torch.bool else boundaries
    model = Call(lambda t, b: torch.bucketize(t, torch.sort(b).values, right=right, out_int32=out_int32))
    assert_exports_like_eager(model, (x, boundaries), expect_ops=["aten::bucketize.Tensor"])


def test_searchsorted_and_bucketize_of_a_python_scalar_compare_in_the_promoted_dtype():
    # 2.5 against int64 entries compares as a float (2 entries precede it, not 1).
    def search(s, v):
        # Sorted in the model: the harness's inputs of other sizes and its witness (the
        # entries in another order) keep the contract too.
        s = torch.sort(s).values
        return (
            torch.searchsorted(s, 2.5),
            torch.searchsorted(s, 2.5, right=True),
            torch.bucketize(2.0, s),
            torch.searchsorted(s, v),
        )

    args = (torch.tensor([1, 2, 3, 3, 5]), torch.tensor([[0.5, 3.0, float("nan")], [3.5, 5.0, 9.0]]))
    ops = ["aten::searchsorted.Scalar", "aten::bucketize.Scalar", "aten::searchsorted.Tensor"]
    assert_exports_like_eager(Call(search), args, expect_ops=ops)


def test_isin_of_many_test_elements_exports():
    # Thorough OpInfo: torch's isin decomposition sorts and searches when test_elements is
    # large beside elements (no searchsorted converter before).
    elements = torch.tensor([0.0, 1.0, 2.5, float("nan"), -4.0])
    test = torch.arange(-10, 10).float()
    assert_exports_like_eager(Call(torch.isin), (elements, test), dynamic=False, expect_ops=["aten::searchsorted"])
