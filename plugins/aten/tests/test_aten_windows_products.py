"""unfold, addbmm and bilinear (_trilinear) against eager PyTorch."""

from __future__ import annotations

import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from lambda_modules import Ternary, Unary, Variadic
from pt2onnx.testing import assert_exports_like_eager, shapes, tensors

FLOATS = st.sampled_from([torch.float32, torch.float64])


@given(data=st.data(), shape=shapes(min_rank=1, max_rank=3, max_side=6))
def test_unfold(data, shape):
    x = data.draw(tensors(shape, st.sampled_from([torch.float32, torch.int64, torch.bool])))
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    size = data.draw(st.integers(1, shape[dim]))
    step = data.draw(st.integers(1, 3))
    model = Unary(lambda t: t.unfold(dim, size, step))
    assert_exports_like_eager(model, (x,), expect_ops={"aten::unfold": "aten"})


@given(
    data=st.data(),
    sizes=st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.integers(1, 4)),
    beta=st.sampled_from([0, 1, 0.5]),
    alpha=st.sampled_from([1, 2.0]),
)
def test_addbmm(data, sizes, beta, alpha):
    b, n, k, m = sizes
    dtype = data.draw(st.sampled_from([torch.float32, torch.float64, torch.int64]))
    assume(dtype.is_floating_point or (isinstance(beta, int) and isinstance(alpha, int)))
    # Small values: sums of products of the dtype's extremes overflow differently in each.
    s, x, y = (
        data.draw(tensors(shape, dtype, low=-4, high=4, edge_values=False)) for shape in [(n, m), (b, n, k), (b, k, m)]
    )
    model = Ternary(lambda s, x, y: torch.addbmm(s, x, y, beta=beta, alpha=alpha))
    assert_exports_like_eager(model, (s, x, y), expect_ops={"aten::addbmm": "aten"})


@given(
    data=st.data(),
    batch=shapes(max_rank=2, max_side=3),
    features=st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4)),
    bias=st.booleans(),
)
def test_bilinear(data, batch, features, bias):
    in1, in2, out = features
    dtype = data.draw(FLOATS)
    x1 = data.draw(tensors((*batch, in1), dtype, low=-2, high=2, edge_values=False))
    x2 = data.draw(tensors((*batch, in2), dtype, low=-2, high=2, edge_values=False))
    weight = data.draw(tensors((out, in1, in2), dtype, low=-2, high=2, edge_values=False))
    args = [x1, x2, weight] + ([data.draw(tensors((out,), dtype, low=-2, high=2))] if bias else [])
    model = Variadic(lambda *a: torch.nn.functional.bilinear(*a))
    assert_exports_like_eager(model, tuple(args), expect_ops={"aten::_trilinear": "aten"})
