"""erfc, erfinv, exp2, hypot, logaddexp, logaddexp2, signbit against eager PyTorch, edge values included."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lambda_modules import Binary, Unary
from pt2onnx.testing import INT_DTYPES, assert_exports_like_eager, broadcast_shapes, shapes, tensors

NUMBERS = st.sampled_from([torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32])


@pytest.mark.parametrize(("fn", "name"), [(torch.erfc, "aten::erfc"), (torch.special.erfc, "aten::special_erfc")])
@given(x=tensors(shapes(max_rank=3), st.sampled_from([torch.float32, torch.float16, torch.bfloat16, torch.int64])))
def test_erfc(fn, name, x):
    assert_exports_like_eager(Unary(fn), (x,), expect_ops={name: "aten"})


def test_erfc_in_float64_is_a_clear_error():
    from pt2onnx.errors import UnsupportedArgumentError

    with pytest.raises(UnsupportedArgumentError, match="no kernel"):
        assert_exports_like_eager(Unary(torch.special.erfc), (torch.randn(3, dtype=torch.float64),))


@given(
    x=tensors(shapes(max_rank=3), st.sampled_from([torch.float32, torch.float16, torch.int64]), low=-1.1, high=1.1),
    edges=st.lists(st.sampled_from([1.0, -1.0, 0.0, 0.999999, -0.9999, 1e-30, 0.5, 1.5, float("nan")]), max_size=9),
)
def test_erfinv(x, edges):
    # Gemma3n's MLP draws a Gaussian threshold with Normal.icdf, which is erfinv.
    if edges and x.is_floating_point():
        x = torch.cat([x.flatten(), torch.tensor(edges, dtype=x.dtype)])
    assert_exports_like_eager(Unary(torch.erfinv), (x,), expect_ops={"aten::erfinv": "aten"})


def test_erfinv_in_float64_is_a_clear_error():
    from pt2onnx.errors import UnsupportedArgumentError

    with pytest.raises(UnsupportedArgumentError, match="no kernel"):
        assert_exports_like_eager(Unary(torch.erfinv), (torch.rand(3, dtype=torch.float64),))


@pytest.mark.parametrize(("fn", "name"), [(torch.exp2, "aten::exp2"), (torch.special.exp2, "aten::special_exp2")])
@given(x=tensors(shapes(max_rank=3), NUMBERS))
def test_exp2(fn, name, x):
    assert_exports_like_eager(Unary(fn), (x,), expect_ops={name: "aten"})


@pytest.mark.parametrize("name", ["hypot", "logaddexp", "logaddexp2"])
@given(data=st.data(), shapes_=broadcast_shapes(2, max_rank=3))
def test_binary_special_functions(name, data, shapes_):
    dtype = data.draw(st.sampled_from([torch.float32, torch.float64, torch.float16, torch.bfloat16]))
    x, y = (data.draw(tensors(s, dtype)) for s in shapes_)
    model = Binary(getattr(torch, name))
    assert_exports_like_eager(model, (x, y), expect_ops={f"aten::{name}": "aten"})


@given(
    x=tensors(
        shapes(max_rank=3),
        st.sampled_from([getattr(torch, n) for n in ("float32", "float64", "float16", *INT_DTYPES, "bool")]),
    )
)
def test_signbit(x):
    # Edge values include -0.0 (sign bit set) and NaN (drawn positive: ONNX cannot read a NaN's sign).
    assert_exports_like_eager(Unary(torch.signbit), (x,), expect_ops={"aten::signbit": "aten"})
