"""Non-core overloads that captured transformer graphs carry: Python operators, to(device), min/max(other),
where with scalars, diff. Each converts directly, so such graphs need no re-trace."""

from __future__ import annotations

import operator

import torch
from hypothesis import example, given
from hypothesis import strategies as st

from lambda_modules import Variadic as Fn
from pt2onnx.testing import assert_exports_like_eager, dims, shapes, tensors

INT_OR_BOOL = st.sampled_from([torch.bool, torch.int32, torch.int64, torch.uint8])


@given(
    python_op=st.sampled_from([operator.and_, operator.or_, operator.xor]),
    dtype=INT_OR_BOOL,
    shape=shapes(max_rank=3),
    scalar=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_python_bitwise_operators(python_op, dtype, shape, scalar, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 4, shape, generator=g).to(dtype)
    y = torch.randint(0, 4, shape, generator=g).to(dtype)
    name = f"aten::__{python_op.__name__.rstrip('_')}__"
    # aten.__and__.Scalar is what torch's Python operator on a tensor and an int calls.
    if scalar:
        fn = Fn(lambda a: getattr(torch.ops.aten, name[6:]).Scalar(a, True if dtype == torch.bool else 3))
        assert_exports_like_eager(fn, (x,), expect_ops=[f"{name}.Scalar"])
    else:
        fn = Fn(lambda a, b: getattr(torch.ops.aten, name[6:]).Tensor(a, b))
        assert_exports_like_eager(fn, (x, y), expect_ops=[f"{name}.Tensor"])


@given(x=tensors(shapes(max_rank=3), "float32"), which=st.sampled_from(["max", "min"]))
def test_min_max_other(x, which):
    y = torch.flip(x, dims=list(range(x.dim())))
    fn = Fn(lambda a, b: getattr(torch, which)(a, b))
    assert_exports_like_eager(fn, (x, y), expect_ops=[f"aten::{which}.other"])


@given(
    x=tensors(shapes(max_rank=3), st.sampled_from([torch.float32, torch.float16, torch.int64])),
    form=st.sampled_from(["ScalarSelf", "ScalarOther", "Scalar"]),
)
# Each form once on values of both signs, so each overload is proven whatever the draws (an empty
# or one-valued integer draw leaves the harness no witness input).
@example(x=torch.tensor([[-1.5, 0.0, 2.0]]), form="ScalarSelf")
@example(x=torch.tensor([[-1.5, 0.0, 2.0]]), form="ScalarOther")
@example(x=torch.tensor([[-1.5, 0.0, 2.0]]), form="Scalar")
def test_where_with_scalars(x, form):
    def fn(a):
        cond = a > 0
        if form == "ScalarSelf":
            return torch.ops.aten.where.ScalarSelf(cond, 2, a)
        if form == "ScalarOther":
            return torch.ops.aten.where.ScalarOther(cond, a, -1)
        return torch.ops.aten.where.Scalar(cond, 1.5, -0.5)

    assert_exports_like_eager(Fn(fn), (x,), expect_ops=[f"aten::where.{form}"])


@given(
    x=tensors(shapes(max_rank=3), st.sampled_from([torch.float32, torch.int64, torch.bool])),
    dtype=st.sampled_from([torch.float16, torch.float32, torch.int32, torch.bool]),
)
def test_to_device_and_dtype(x, dtype):
    assert_exports_like_eager(Fn(lambda a: a.to("cpu", dtype)), (x,), expect_ops=["aten::to.device"])


@given(
    data=st.data(),
    x=tensors(
        shapes(min_rank=1, max_rank=3, min_side=1, max_side=5),
        st.sampled_from([torch.float32, torch.int64, torch.bool]),
    ),
    n=st.integers(0, 3),  # 0: the input itself, prepend and append ignored
    with_ends=st.booleans(),
)
def test_diff(data, x, n, with_ends):
    dim = data.draw(dims(x.dim()))
    if with_ends:
        edge = list(x.shape)
        edge[dim] = 1
        ends = (torch.ones(edge, dtype=x.dtype), torch.zeros(edge, dtype=x.dtype))
        fn = Fn(lambda a, p, q: torch.diff(a, n=n, dim=dim, prepend=p, append=q))
        assert_exports_like_eager(fn, (x, *ends), expect_ops=["aten::diff"])
    else:
        fn = Fn(lambda a: torch.diff(a, n=n, dim=dim))
        assert_exports_like_eager(fn, (x,), expect_ops=["aten::diff"])


def test_diff_of_order_zero_ignores_prepend_and_append():
    # Thorough OpInfo: diff(x, n=0, prepend=p, append=a) is x in torch; the export joined them.
    fn = Fn(lambda a, p, q: torch.diff(a, n=0, dim=0, prepend=p, append=q))
    assert_exports_like_eager(fn, (torch.randn(5, 5), torch.randn(1, 5), torch.randn(2, 5)), expect_ops=["aten::diff"])
