"""Element-wise math of one tensor, against eager PyTorch through onnxruntime."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from pt2onnx.errors import UnsupportedArgumentError
from pt2onnx.testing import (
    FLOAT_DTYPES,
    INT_DTYPES,
    assert_exports_like_eager,
    broadcast_shapes,
    dtypes,
    shapes,
    tensors,
)

_F32_16 = ("float32", "float16", "bfloat16")
# op name -> (function, dtypes, value range); onnxruntime runs some only in float32/float16.
UNARY = {
    "abs": (torch.abs, (*FLOAT_DTYPES, *INT_DTYPES), (-3, 3)),
    "acos": (torch.acos, _F32_16, (-1.2, 1.2)),
    "acosh": (torch.acosh, _F32_16, (0.5, 4)),
    "asin": (torch.asin, _F32_16, (-1.2, 1.2)),
    "asinh": (torch.asinh, _F32_16, (-3, 3)),
    "atan": (torch.atan, _F32_16, (-3, 3)),
    "atanh": (torch.atanh, _F32_16, (-1.2, 1.2)),
    "ceil": (torch.ceil, (*FLOAT_DTYPES, *INT_DTYPES), (-3, 3)),
    "cos": (torch.cos, (*FLOAT_DTYPES, *INT_DTYPES), (-3, 3)),
    "cosh": (torch.cosh, _F32_16, (-3, 3)),
    "erf": (torch.erf, _F32_16, (-3, 3)),
    "exp": (torch.exp, (*FLOAT_DTYPES, *INT_DTYPES), (-3, 3)),
    "expm1": (torch.expm1, (*FLOAT_DTYPES, *INT_DTYPES), (-3, 3)),
    "floor": (torch.floor, (*FLOAT_DTYPES, *INT_DTYPES), (-3, 3)),
    "log": (torch.log, (*FLOAT_DTYPES, *INT_DTYPES), (-1, 5)),
    "log10": (torch.log10, (*FLOAT_DTYPES, *INT_DTYPES), (-1, 5)),
    "log1p": (torch.log1p, (*FLOAT_DTYPES, *INT_DTYPES), (-2, 5)),
    "log2": (torch.log2, (*FLOAT_DTYPES, *INT_DTYPES), (-1, 5)),
    "neg": (torch.neg, (*FLOAT_DTYPES, "int8", "int16", "int32", "int64"), (-3, 3)),
    "reciprocal": (torch.reciprocal, (*FLOAT_DTYPES, *INT_DTYPES), (-3, 3)),
    "round": (torch.round, (*FLOAT_DTYPES, *INT_DTYPES), (-3, 3)),
    "rsqrt": (torch.rsqrt, (*FLOAT_DTYPES, *INT_DTYPES), (-1, 5)),
    "sigmoid": (torch.sigmoid, (*FLOAT_DTYPES, *INT_DTYPES), (-5, 5)),
    "sign": (torch.sign, (*FLOAT_DTYPES, *INT_DTYPES, "bool"), (-3, 3)),
    "sin": (torch.sin, (*FLOAT_DTYPES, *INT_DTYPES), (-3, 3)),
    "sinh": (torch.sinh, _F32_16, (-3, 3)),
    "sqrt": (torch.sqrt, (*FLOAT_DTYPES, *INT_DTYPES), (-1, 5)),
    "tan": (torch.tan, _F32_16, (-1.4, 1.4)),
    "tanh": (torch.tanh, (*FLOAT_DTYPES, *INT_DTYPES), (-3, 3)),
    "trunc": (torch.trunc, (*FLOAT_DTYPES, *INT_DTYPES), (-3, 3)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@given(data=st.data())
def test_unary(name, data):
    fn, names, (low, high) = UNARY[name]
    dtype = data.draw(dtypes(names))
    x = data.draw(tensors(shapes(max_rank=4, min_side=0), dtype, low=low, high=high))
    assert_exports_like_eager(lambda t: fn(t), (x,), expect_ops=[f"aten::{name}"])


@given(
    x=tensors(shapes(max_rank=3), dtypes(("float32", "float64")), low=-300, high=300),
    decimals=st.integers(-2, 3),
)
def test_round_decimals(x, decimals):
    assert_exports_like_eager(lambda t: torch.round(t, decimals=decimals), (x,), expect_ops=["aten::round.decimals"])


@given(data=st.data(), shapes_=broadcast_shapes(min_side=0), dtype=dtypes(("float32", "float16", "int32")))
def test_atan2(data, shapes_, dtype):
    # Integers compute in float32, as torch does.
    y, x = (data.draw(tensors(s, dtype)) for s in shapes_)
    assert_exports_like_eager(lambda a, b: torch.atan2(a, b), (y, x), expect_ops=["aten::atan2"])


def test_atan2_special_values():
    # Every pairing of signed zeros, infinities, NaN and finite values, in each quadrant.
    values = torch.tensor([0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan])
    y, x = torch.cartesian_prod(values, values).unbind(1)
    assert_exports_like_eager(lambda a, b: torch.atan2(a, b), (y, x), expect_ops=["aten::atan2"])


@pytest.mark.parametrize("name", ["sin", "exp", "sigmoid", "round", "abs", "sign"])
def test_unary_opset14_dynamic(name):
    x = torch.linspace(-3, 3, 24).reshape(4, 6)
    batch = torch.export.Dim("batch")
    fn = UNARY[name][0]
    assert_exports_like_eager(
        lambda t: fn(t),
        (x,),
        other_inputs=[((torch.linspace(-2, 2, 42).reshape(7, 6),), {})],
        dynamic_shapes=({0: batch},),
        opset=14,
        expect_ops=[f"aten::{name}"],
    )


class Tan(torch.nn.Module):
    def forward(self, t):
        return torch.tan(t)


def test_float64_without_onnxruntime_kernel_raises():
    # onnxruntime runs Tan in float32/float16 only; float32 would not be exact: a clear error.
    with pytest.raises(UnsupportedArgumentError, match="onnxruntime has no kernel") as info:
        assert_exports_like_eager(Tan(), (torch.ones(2, dtype=torch.float64),))
    message = str(info.value)
    assert "aten::tan.default" in message and "self='DOUBLE'" in message
    assert "test_aten_unary.py" in message and "return torch.tan(t)" in message
