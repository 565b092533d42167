"""Backward ops of the Core ATen opset, called directly, against eager."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from hypothesis import assume, given
from hypothesis import strategies as st

from lambda_modules import Variadic as Call
from pt2onnx.testing import FLOAT_DTYPES, assert_exports_like_eager, dtypes, tensors

# Gradients are sums: values whose sums and products stay finite (with NaN, inf, zeros and
# subnormals), since finite terms that overflow depend on the order of the additions,
# which differs between torch's vectorized kernels and onnxruntime's.
SUMMABLE = {"low": -1e3, "high": 1e3, "edge_values": ("nan", "inf", "zero", "subnormal")}
# torch's layer norm gradient cancels: b = (db * mean - ds) * rstd^3 / N multiplies the
# rounding of its sums (whose order differs between the libraries) by rstd^3, so its
# inputs are of unit scale, where float32 keeps that within tolerance.
UNIT = {**SUMMABLE, "low": -3, "high": 3}


@given(data=st.data(), dtype=dtypes(FLOAT_DTYPES), kernel=st.integers(1, 3), stride=st.integers(1, 3))
def test_max_pool2d_backward(data, dtype, kernel, stride):
    x = data.draw(tensors((2, 2, data.draw(st.integers(kernel, 6)), data.draw(st.integers(kernel, 6))), dtype))
    _, indices = F.max_pool2d(x, kernel, stride, return_indices=True)
    grad = data.draw(tensors(tuple(indices.shape), dtype, **SUMMABLE))
    op = torch.ops.aten.max_pool2d_with_indices_backward
    model = Call(lambda g, x, i: op(g, x, [kernel] * 2, [stride] * 2, [0, 0], [1, 1], False, i))
    atol = None
    if dtype in (torch.float16, torch.bfloat16):
        # Overlapping windows add up to kernel² gradients at one position: torch rounds each
        # partial sum to the half dtype, the export (float32 in onnxruntime) only the total.
        finite = grad[grad.isfinite()].float()
        atol = kernel**2 * torch.finfo(dtype).eps * float(finite.abs().max()) if finite.numel() else None
    assert_exports_like_eager(
        model, (grad, x, indices), atol=atol, expect_ops=["aten::max_pool2d_with_indices_backward"]
    )


@given(data=st.data(), dtype=dtypes(("float32", "float64")))
def test_adaptive_avg_pool2d_backward(data, dtype):
    sizes = [data.draw(st.integers(1, 6)) for _ in range(2)]
    outputs = [data.draw(st.integers(1, 5)) for _ in range(2)]
    x = data.draw(tensors((2, 2, *sizes), dtype))
    grad = data.draw(tensors((2, 2, *outputs), dtype, **SUMMABLE))
    model = Call(lambda g, x: torch.ops.aten._adaptive_avg_pool2d_backward(g, x))
    assert_exports_like_eager(model, (grad, x), expect_ops=["aten::_adaptive_avg_pool2d_backward"])


@given(data=st.data(), dtype=dtypes(("float32", "float64")), padding_idx=st.sampled_from([-1, 0, 2]))
def test_embedding_dense_backward(data, dtype, padding_idx):
    num = data.draw(st.integers(3, 6))
    # Indices name rows of the weight: no integer extremes (out of range for both libraries).
    indices = data.draw(tensors((2, data.draw(st.integers(1, 4))), torch.int64, low=0, high=num - 1, edge_values=False))
    grad = data.draw(tensors((*indices.shape, 3), dtype, **SUMMABLE))
    model = Call(lambda g, i: torch.ops.aten.embedding_dense_backward(g, i, num, padding_idx, False))
    assert_exports_like_eager(model, (grad, indices), expect_ops=["aten::embedding_dense_backward"])


@given(
    data=st.data(),
    dtype=dtypes(("float32", "float64")),
    affine=st.booleans(),
    mask=st.tuples(st.booleans(), st.booleans(), st.booleans()),
)
def test_native_layer_norm_backward(data, dtype, affine, mask):
    shape = (2, data.draw(st.integers(1, 3)), data.draw(st.integers(2, 4)))
    k = data.draw(st.integers(1, 2))
    normalized = list(shape[-k:])
    x, grad = data.draw(tensors(shape, dtype, **UNIT)), data.draw(tensors(shape, dtype, **UNIT))
    w = data.draw(tensors(tuple(normalized), dtype, **UNIT)) if affine else None
    b = data.draw(tensors(tuple(normalized), dtype, **UNIT)) if affine else None
    mask = list(mask) if affine else [mask[0], False, False]
    if not any(mask):
        mask[0] = True
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, normalized, w, b, 1e-5)
    if dtype == torch.float32:
        # Rows of close values (rstd above 2) make float32's roundings in the cancelling
        # formula, amplified by rstd^3, larger than its tolerance near zero gradients.
        assume(not bool((rstd > 2).any()))
    op = torch.ops.aten.native_layer_norm_backward

    def fn(g, x, mean, rstd):
        return [t for t in op(g, x, normalized, mean, rstd, w, b, mask) if t is not None]

    assert_exports_like_eager(Call(fn), (grad, x, mean, rstd), expect_ops=["aten::native_layer_norm_backward"])


def test_backward_ops_at_opset_16():
    # max_pool2d_with_indices_backward scatters with reduction="add": ScatterElements from opset 16.
    x = torch.randn(1, 2, 5, 5)
    _, indices = F.max_pool2d(x, 2, return_indices=True)
    op = torch.ops.aten.max_pool2d_with_indices_backward

    def fn(g, x, i, g2):
        return op(g, x, [2, 2], [2, 2], [0, 0], [1, 1], False, i), torch.ops.aten._adaptive_avg_pool2d_backward(g2, x)

    model = Call(fn)
    assert_exports_like_eager(model, (torch.randn(1, 2, 2, 2), x, indices, torch.randn(1, 2, 3, 3)), opset=16)
