"""Reductions and cumsum, against eager PyTorch through onnxruntime."""

from __future__ import annotations

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from pt2onnx.testing import (
    ALL_DTYPES,
    FLOAT_DTYPES,
    INT_DTYPES,
    assert_exports_like_eager,
    dims,
    dtypes,
    shapes,
    tensors,
)

aten = torch.ops.aten
NUMBER_DTYPES = (*FLOAT_DTYPES, *INT_DTYPES)


def _accepted(fn, *args):
    try:
        fn(*args)
    except (RuntimeError, TypeError, IndexError):
        return False
    return True


@st.composite
def dim_lists(draw, rank):
    """A list of distinct dims (maybe negative, maybe empty) of a tensor of ``rank``."""
    if rank == 0:
        return draw(st.sampled_from([[], [0], [-1]]))
    chosen = draw(st.lists(st.integers(0, rank - 1), unique=True, max_size=rank))
    return [d - rank if draw(st.booleans()) else d for d in chosen]


# Float sums whose finite terms overflow or cancel (1e308 + 1 - 1e308) depend on the order of
# the additions, which differs between torch and onnxruntime: floats stay well inside the
# dtype's range (with NaN, inf, zeros and subnormals); integers take their whole range and wrap.
_SUMMABLE = {"low": -1e3, "high": 1e3, "edge_values": ("nan", "inf", "zero", "subnormal")}

ACCUMULATING = {
    "sum": (aten.sum.dim_IntList, (*ALL_DTYPES,)),
    "mean": (aten.mean.dim, FLOAT_DTYPES),
}


@pytest.mark.parametrize("name", sorted(ACCUMULATING))
@given(data=st.data(), shape=shapes(min_side=0), keepdim=st.booleans(), to_dtype=st.sampled_from([None, torch.float64]))
def test_sum_mean_dims(name, data, shape, keepdim, to_dtype):
    # [] means every dim; dtype= converts before reducing; ints and bools sum as int64.
    fn, names = ACCUMULATING[name]
    dtype = data.draw(dtypes(names))
    x = data.draw(tensors(shape, dtype, **_SUMMABLE if dtype.is_floating_point else {}))
    dim = data.draw(dim_lists(len(shape)))
    model = lambda t: fn(t, dim, keepdim, dtype=to_dtype)  # noqa: E731
    assume(_accepted(model, x))
    assert_exports_like_eager(model, (x,), expect_ops=[f"aten::{name}"])


@pytest.mark.parametrize("name", ["sum", "mean", "prod"])
@given(data=st.data(), dtype=dtypes(ALL_DTYPES), to_dtype=st.sampled_from([None, torch.float32]))
def test_reduce_all(name, data, dtype, to_dtype):
    # Small ordinary values make products that stay in range; integer extremes wrap exactly.
    # No float extremes in products, and no subnormals beside inf: two subnormals multiply
    # to 0 and 0 * inf is NaN, inf * subnormal is inf: the order of the multiplications
    # decides (thorough run, seed 777: [inf, -2.9e-39, -2.9e-39, ...] NaN in torch).
    summable = dtype.is_floating_point and name != "prod"
    small = {"low": -2, "high": 2}
    if to_dtype is not None or (dtype.is_floating_point and name == "prod"):
        # Integer extremes too when dtype= makes the reduction a float one: 2**31 - 1 and
        # -2**31 cancel in float32, and what rounds away depends on the order of the sums.
        small["edge_values"] = ("nan", "inf", "zero") if name == "prod" else ("nan", "inf", "zero", "subnormal")
    x = data.draw(tensors(shapes(min_side=0), dtype, **(_SUMMABLE if summable else small)))
    fn = getattr(aten, name).default
    model = lambda t: fn(t, dtype=to_dtype)  # noqa: E731
    assume(_accepted(model, x))
    assert_exports_like_eager(model, (x,), expect_ops=[f"aten::{name}.default"])


@given(data=st.data(), shape=shapes(min_side=0), keepdim=st.booleans())
def test_prod_dim(data, shape, keepdim):
    # No dtype extremes: a product that overflows a half-precision dtype is inf or finite in
    # torch by the row's length (its kernel accumulates in float16 on some paths). No
    # subnormals beside inf: see test_reduce_all.
    x = data.draw(tensors(shape, dtypes(ALL_DTYPES), low=-2, high=2, edge_values=("nan", "inf", "zero")))
    dim = data.draw(dims(len(shape)))
    assert_exports_like_eager(lambda t: torch.prod(t, dim, keepdim), (x,), expect_ops=["aten::prod.dim_int"])


@pytest.mark.parametrize("fn", [torch.amax, torch.amin], ids=["amax", "amin"])
@given(data=st.data(), shape=shapes(), keepdim=st.booleans())
def test_amax_amin(fn, data, shape, keepdim):
    x = data.draw(tensors(shape, dtypes(ALL_DTYPES)))
    dim = data.draw(dim_lists(len(shape)))
    assert_exports_like_eager(lambda t: fn(t, dim, keepdim), (x,), expect_ops=[f"aten::{fn.__name__}"])


@given(data=st.data(), shape=shapes(min_side=0), form=st.sampled_from(["drawn", "all true", "one false"]))
def test_is_all_true(data, shape, form):
    # torch.distributions' argument check: all true, or one value false, matter most.
    x = data.draw(tensors(shape, dtypes(["bool"])))
    if form != "drawn":
        x = torch.ones(x.shape, dtype=torch.bool)
        if form == "one false" and x.numel():
            x.view(-1)[data.draw(st.integers(0, x.numel() - 1))] = False
    assert_exports_like_eager(lambda t: torch._is_all_true(t), (x,), expect_ops=["aten::_is_all_true"])


@given(data=st.data(), shape=shapes(min_side=0), keepdim=st.booleans(), form=st.sampled_from(["all", "dim", "dims"]))
def test_any(data, shape, keepdim, form):
    x = data.draw(tensors(shape, dtypes(ALL_DTYPES), low=-1, high=1))
    if form == "all":
        model, expected = (lambda t: torch.any(t)), "aten::any.default"
    elif form == "dim":
        dim = data.draw(dims(len(shape)))
        model, expected = (lambda t: torch.any(t, dim, keepdim)), "aten::any.dim"
    else:
        dim = data.draw(dim_lists(len(shape)))
        model, expected = (lambda t: aten.any.dims(t, dim, keepdim)), "aten::any.dims"
    assume(_accepted(model, x))
    assert_exports_like_eager(model, (x,), expect_ops=[expected])


@pytest.mark.parametrize("keepdim", [False, True])
def test_any_over_a_list_of_dims(keepdim):
    # test_any's draws may leave aten::any.dims without a witness (empty or one-valued inputs): this
    # input has one, so the overload is proven whatever they drew.
    x = torch.tensor([[[0.0, 0.5], [0.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]], [[-2.0, 0.0], [0.0, 1.0]]])
    assert_exports_like_eager(lambda t: aten.any.dims(t, [0, 2], keepdim), (x,), expect_ops=["aten::any.dims"])


@pytest.mark.parametrize("fn", [torch.argmax, torch.argmin], ids=["argmax", "argmin"])
@given(data=st.data(), shape=shapes(), keepdim=st.booleans(), all_dims=st.booleans())
def test_argmax_argmin(fn, data, shape, keepdim, all_dims):
    # Small integer ranges make ties: torch picks the first occurrence.
    x = data.draw(tensors(shape, dtypes(NUMBER_DTYPES), low=-2, high=2))
    dim = None if all_dims else data.draw(dims(len(shape)))
    assert_exports_like_eager(lambda t: fn(t, dim, keepdim), (x,), expect_ops=[f"aten::{fn.__name__}"])


@pytest.mark.parametrize("fn", [torch.max, torch.min], ids=["max", "min"])
@given(data=st.data(), shape=shapes(), keepdim=st.booleans())
def test_max_min_dim(fn, data, shape, keepdim):
    x = data.draw(tensors(shape, dtypes(ALL_DTYPES), low=-2, high=2))
    dim = data.draw(dims(len(shape)))
    assert_exports_like_eager(lambda t: tuple(fn(t, dim, keepdim)), (x,), expect_ops=[f"aten::{fn.__name__}.dim"])


@given(
    data=st.data(),
    shape=shapes(min_side=0),
    keepdim=st.booleans(),
    correction=st.sampled_from([None, 0, 1, 2, 0.5]),
    form=st.sampled_from(["correction", "dim"]),
)
def test_var(data, shape, keepdim, correction, form):
    # Within +-1e3: squares that overflow float32 are inf or NaN in torch by the tensor's
    # size (its vectorized kernel is not all float64), as sums of such terms are.
    x = data.draw(
        tensors(shape, dtypes(FLOAT_DTYPES), low=-1e3, high=1e3, edge_values=("nan", "inf", "zero", "subnormal"))
    )
    dim = data.draw(st.one_of(st.none(), dim_lists(len(shape))))
    if form == "dim":
        model = lambda t: aten.var.dim(t, dim, correction != 0, keepdim)  # noqa: E731
    else:
        model = lambda t: aten.var.correction(t, dim, correction=correction, keepdim=keepdim)  # noqa: E731
    assume(_accepted(model, x))
    assert_exports_like_eager(model, (x,), expect_ops=[f"aten::var.{form}"])


@given(data=st.data(), shape=shapes(min_side=0), to_dtype=st.sampled_from([None, torch.float64, torch.int32]))
def test_cumsum(data, shape, to_dtype):
    x = data.draw(tensors(shape, dtypes(ALL_DTYPES)))
    dim = data.draw(dims(len(shape)))
    assert_exports_like_eager(lambda t: torch.cumsum(t, dim, dtype=to_dtype), (x,), expect_ops=["aten::cumsum"])


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "argmax", "max", "var", "cumsum", "any", "prod"])
def test_reduction_opset14_dynamic(name):
    fns = {
        "sum": lambda t: t.sum(0),
        "mean": lambda t: t.mean((0, -1), keepdim=True),
        "amax": lambda t: t.amax(0),
        "argmax": lambda t: t.argmax(0),
        "max": lambda t: tuple(t.max(0)),
        "var": lambda t: t.var(0),
        "cumsum": lambda t: t.cumsum(0),
        "any": lambda t: (t > 0).any(0),
        "prod": lambda t: t.prod(0),
    }
    batch = torch.export.Dim("batch")
    assert_exports_like_eager(
        fns[name],
        (torch.randn(4, 3),),
        other_inputs=[((torch.randn(7, 3),), {})],
        dynamic_shapes=({0: batch},),
        opset=14,
        expect_ops=[f"aten::{name}"],
    )


def test_integer_sums_and_products_wrap_around_like_torch():
    # onnxruntime's ReduceSum/ReduceProd saturate here (and round int64 above 2**53).
    assert_exports_like_eager(lambda t: t.sum(), (torch.tensor([2**62] * 3),), expect_ops=["aten::sum.default"])
    assert_exports_like_eager(
        lambda t: t.prod(dtype=torch.int32), (torch.full((40,), 3, dtype=torch.int32),), expect_ops=["aten::prod"]
    )
    assert_exports_like_eager(lambda t: t.sum(0), (torch.tensor([[2**60 + 1], [2**60]]),), expect_ops=["aten::sum"])
    assert_exports_like_eager(
        lambda t: t ** t.abs().clamp(max=70), (torch.tensor([3, -5, 7]),), expect_ops=["aten::pow"]
    )


def test_nan_is_the_extreme_torch_points_at():
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([[1.0, nan, 3.0, nan], [inf, 2.0, nan, 1.0], [1.0, 2.0, 3.0, 0.0], [-inf, nan, inf, nan]])
    assert_exports_like_eager(lambda t: (t.argmax(1), t.argmin(1)), (x,), expect_ops=["aten::argmax", "aten::argmin"])
    assert_exports_like_eager(lambda t: (*t.max(1), *t.min(1)), (x,), expect_ops=["aten::max.dim", "aten::min.dim"])
    assert_exports_like_eager(lambda t: (t.amax(1), t.amin(0)), (x,), expect_ops=["aten::amax", "aten::amin"])
