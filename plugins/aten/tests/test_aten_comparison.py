"""Comparisons, logical and bitwise ops, isnan/isinf, against eager PyTorch through onnxruntime."""

from __future__ import annotations

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from pt2onnx.testing import (
    ALL_DTYPES,
    INT_DTYPES,
    assert_exports_like_eager,
    broadcast_shapes,
    dtypes,
    tensors,
)

aten = torch.ops.aten
COMPARISONS = ["eq", "ne", "lt", "le", "gt", "ge"]
scalars = st.one_of(st.integers(-3, 3), st.floats(-3, 3, width=16), st.booleans())


def _accepted(fn, *args):
    try:
        fn(*args)
    except (RuntimeError, TypeError):
        return False
    return True


@pytest.mark.parametrize("name", COMPARISONS)
@given(data=st.data(), shapes_=broadcast_shapes(min_side=0))
def test_comparison_tensors(name, data, shapes_):
    # Operands of different dtypes compare in the promoted dtype (int vs float as float).
    a, b = (data.draw(tensors(s, dtypes(ALL_DTYPES))) for s in shapes_)
    fn = getattr(torch, name)
    assume(_accepted(fn, a, b))
    assert_exports_like_eager(lambda x, y: fn(x, y), (a, b), expect_ops=[f"aten::{name}.Tensor"])


@pytest.mark.parametrize("name", COMPARISONS)
@given(x=tensors(dtype=dtypes(ALL_DTYPES)), other=scalars)
def test_comparison_scalar(name, x, other):
    fn = getattr(aten, name).Scalar
    assume(_accepted(fn, x, other))
    assert_exports_like_eager(lambda t: fn(t, other), (x,), expect_ops=[f"aten::{name}.Scalar"])


@pytest.mark.parametrize("fn", [torch.isnan, torch.isinf], ids=["isnan", "isinf"])
@given(x=tensors(dtype=dtypes(ALL_DTYPES)))
def test_isnan_isinf(fn, x):
    assert_exports_like_eager(lambda t: fn(t), (x,), expect_ops=[f"aten::{fn.__name__}"])


LOGICAL = ["logical_and", "logical_or", "logical_xor"]


@pytest.mark.parametrize("name", LOGICAL)
@given(data=st.data(), shapes_=broadcast_shapes(min_side=0))
def test_logical(name, data, shapes_):
    # Any dtype, as truth values (NaN is true).
    a, b = (data.draw(tensors(s, dtypes(ALL_DTYPES), low=-1, high=1)) for s in shapes_)
    fn = getattr(torch, name)
    assert_exports_like_eager(lambda x, y: fn(x, y), (a, b), expect_ops=[f"aten::{name}"])


@given(x=tensors(dtype=dtypes(ALL_DTYPES), low=-1, high=1))
def test_logical_not(x):
    assert_exports_like_eager(lambda t: torch.logical_not(t), (x,), expect_ops=["aten::logical_not"])


BITWISE = ["bitwise_and", "bitwise_or", "bitwise_xor"]


@pytest.mark.parametrize("name", BITWISE)
@given(data=st.data(), shapes_=broadcast_shapes(min_side=0))
def test_bitwise(name, data, shapes_):
    a, b = (data.draw(tensors(s, dtypes((*INT_DTYPES, "bool")), low=-100, high=100)) for s in shapes_)
    fn = getattr(torch, name)
    assume(_accepted(fn, a, b))
    assert_exports_like_eager(lambda x, y: fn(x, y), (a, b), expect_ops=[f"aten::{name}.Tensor"])


@pytest.mark.parametrize("name", BITWISE)
@given(x=tensors(dtype=dtypes((*INT_DTYPES, "bool")), low=-100, high=100), other=st.integers(0, 100))
def test_bitwise_scalar(name, x, other):
    fn = getattr(aten, name).Scalar
    assume(_accepted(fn, x, other))
    assert_exports_like_eager(lambda t: fn(t, other), (x,), expect_ops=[f"aten::{name}.Scalar"])


@pytest.mark.parametrize("name", ["__and__", "__or__", "__xor__"])
@pytest.mark.parametrize("overload", ["Scalar", "Tensor"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.bool])
def test_python_bitwise_operators(name, overload, dtype):
    # The overloads `t & 6` and `t & u` trace to; every run converts each of them (the
    # property tests above reach them only by their draws).
    x = torch.tensor([[-7, 0, 5], [6, 127, -128]]).to(dtype)
    other = (True if dtype == torch.bool else 6) if overload == "Scalar" else torch.tensor([3, -1, 0]).to(dtype)
    fn = getattr(getattr(aten, name), overload)
    assert_exports_like_eager(lambda t: fn(t, other), (x,), expect_ops={f"aten::{name}.{overload}": "aten"})


@given(x=tensors(dtype=dtypes((*INT_DTYPES, "bool")), low=-100, high=100))
def test_bitwise_not(x):
    assert_exports_like_eager(lambda t: torch.bitwise_not(t), (x,), expect_ops=["aten::bitwise_not"])


@pytest.mark.parametrize("name", ["lt", "ne", "logical_and", "bitwise_xor", "isnan"])
def test_comparison_opset14_dynamic(name):
    fns = {
        "lt": lambda x, y: x < y,
        "ne": lambda x, y: x != y,
        "logical_and": lambda x, y: torch.logical_and(x, y),
        "bitwise_xor": lambda x, y: torch.bitwise_xor(x > 0, y > 0),
        "isnan": lambda x, y: torch.isnan(x / y),
    }
    batch = torch.export.Dim("batch")
    x, y = torch.randn(4, 3), torch.randn(1, 3)
    assert_exports_like_eager(
        fns[name],
        (x, y),
        other_inputs=[((torch.randn(9, 3), torch.zeros(1, 3)), {})],
        dynamic_shapes=({0: batch}, None),
        opset=14,
        expect_ops=[f"aten::{name}"],
    )


def _extremes(dtype):
    if dtype == torch.bool:
        return torch.tensor([True, False, True, False, True])
    info = torch.iinfo(dtype)
    return torch.tensor([info.min, info.max, 0, 5, max(info.min, -1)], dtype=dtype)


@pytest.mark.parametrize("opset", [14, 17])
@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
@pytest.mark.parametrize("name", [*BITWISE, "bitwise_not"])
def test_bitwise_below_opset_18_is_computed_on_the_bits(name, dtype, opset):
    # ONNX has no bitwise op on integers before 18: each of the 64 bits is computed as a bool.
    fn = getattr(torch, name)
    x = _extremes(dtype)
    args = (x,) if name == "bitwise_not" else (x, x.flip(0).reshape(1, -1).expand(2, -1).clone())
    assert_exports_like_eager(lambda *xs: fn(*xs), args, opset=opset, expect_ops=[f"aten::{name}"])
