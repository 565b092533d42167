"""Dtype conversions and tensor <-> scalar ops, against eager PyTorch through onnxruntime."""

from __future__ import annotations

import torch
from hypothesis import assume, example, given
from hypothesis import strategies as st

from pt2onnx.testing import ALL_DTYPES, assert_exports_like_eager, dtypes, shapes, tensors

aten = torch.ops.aten


def _castable(x, dtype):
    # Casting NaN/inf or out-of-range floats to integers is undefined behaviour in C (and so
    # in both torch and onnxruntime): the tests keep floats in range of the target.
    if dtype.is_floating_point or dtype == torch.bool or not x.is_floating_point():
        return not (dtype == torch.uint8 and x.dtype.is_signed and bool((x < 0).any()))
    return bool(x.isfinite().all()) and not (dtype == torch.uint8 and bool((x < 0).any()))


@given(x=tensors(shapes(min_side=0), dtypes(ALL_DTYPES)), dtype=dtypes(ALL_DTYPES))
def test_to_copy(x, dtype):
    assume(_castable(x, dtype))
    assert_exports_like_eager(
        lambda t: aten._to_copy(t, dtype=dtype, device=torch.device("cpu")), (x,), expect_ops=["aten::_to_copy"]
    )


@given(
    x=tensors(shapes(min_side=0), dtypes(ALL_DTYPES)),
    dtype=dtypes(ALL_DTYPES),
    form=st.sampled_from(["dtype", "dtype_layout", "type_as"]),
)
# Each form once on values, so each overload is proven whatever the draws (an empty or
# one-valued integer draw leaves the harness no witness input).
@example(x=torch.tensor([[1.5, -2.0, 3.25]]), dtype=torch.float16, form="dtype")
@example(x=torch.tensor([[1.5, -2.0, 3.25]]), dtype=torch.float16, form="dtype_layout")
@example(x=torch.tensor([[1.5, -2.0, 3.25]]), dtype=torch.float16, form="type_as")
def test_to(x, dtype, form):
    assume(_castable(x, dtype))
    if form == "dtype":
        model, expected = (lambda t: aten.to.dtype(t, dtype)), "aten::to.dtype"
    elif form == "dtype_layout":
        model, expected = (
            (lambda t: aten.to.dtype_layout(t, dtype=dtype, layout=torch.strided)),
            "aten::to.dtype_layout",
        )
    else:
        model, expected = (lambda t: aten.type_as(t, torch.zeros((), dtype=dtype))), "aten::type_as"
    assert_exports_like_eager(model, (x,), expect_ops=[expected])


@given(value=st.one_of(st.integers(-5, 5), st.floats(-5, 5, width=32), st.booleans()), dtype=dtypes(ALL_DTYPES))
def test_scalar_tensor(value, dtype):
    assume(_castable(torch.tensor(value), dtype))
    assert_exports_like_eager(
        lambda t: t + aten.scalar_tensor(value, dtype=dtype),
        (torch.zeros(2, dtype=dtype),),
        expect_ops=["aten::scalar_tensor"],
    )


def test_scalar_tensor_of_a_symbolic_size():
    # A SymInt (a 0-d INT64 Value) becomes a tensor of another dtype.
    model = lambda t: t * aten.scalar_tensor(t.shape[0], dtype=torch.float32)  # noqa: E731
    assert_exports_like_eager(
        model,
        (torch.ones(3, 2),),
        other_inputs=[((torch.ones(5, 2),), {})],
        dynamic_shapes=({0: torch.export.Dim("n")},),
        opset=14,
        expect_ops=["aten::scalar_tensor"],
    )


@given(x=tensors(shapes(max_rank=2)), scale=tensors((), dtypes(("float32", "float64", "int32", "int64", "bool"))))
@example(
    x=torch.tensor([2.828125, 1.25, -0.244140625], dtype=torch.bfloat16), scale=torch.tensor(3.4028234663852886e38)
)
def test_local_scalar_dense(x, scale):
    # .item() of a 0-d tensor is a symbolic scalar (SymInt, SymFloat or SymBool) used as a number.
    # torch multiplies a bfloat16 tensor by it in float32: the example's factor is finite
    # there and inf as a bfloat16 (found by the CI's run).
    assert_exports_like_eager(lambda t, s: t * s.item(), (x, scale), expect_ops=["aten::_local_scalar_dense"])
