"""Activations and softmax, against eager PyTorch through onnxruntime."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given
from hypothesis import strategies as st

from pt2onnx.testing import FLOAT_DTYPES, assert_exports_like_eager, dims, dtypes, shapes, tensors

_F32_16 = ("float32", "float16", "bfloat16")
_NUMBERS = (*FLOAT_DTYPES, "int8", "int16", "int32", "int64", "uint8")
ACTIVATIONS = {
    "relu": (F.relu, _NUMBERS),
    "relu6": (F.relu6, _NUMBERS),
    "silu": (F.silu, FLOAT_DTYPES),
    "hardsigmoid": (F.hardsigmoid, FLOAT_DTYPES),
    "hardswish": (F.hardswish, FLOAT_DTYPES),
    "mish": (F.mish, FLOAT_DTYPES),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@given(data=st.data())
def test_activation(name, data):
    fn, names = ACTIVATIONS[name]
    x = data.draw(tensors(shapes(min_side=0), dtypes(names), low=-8, high=8))
    assert_exports_like_eager(lambda t: fn(t), (x,), expect_ops=[f"aten::{name}"])


@given(x=tensors(dtype=dtypes(FLOAT_DTYPES)), slope=st.sampled_from([0.01, 0.2, -0.5, 2.0]))
def test_leaky_relu(x, slope):
    assert_exports_like_eager(lambda t: F.leaky_relu(t, slope), (x,), expect_ops=["aten::leaky_relu"])


@given(x=tensors(dtype=dtypes(FLOAT_DTYPES)), alpha=st.sampled_from([1.0, 0.5, 2.0]), selu=st.booleans())
def test_elu(x, alpha, selu):
    # selu is elu with scale and alpha; celu has input_scale: one converter for all three.
    fn = (lambda t: torch.ops.aten.elu(t, alpha, 1.0507, 1 / alpha)) if selu else (lambda t: F.elu(t, alpha))
    assert_exports_like_eager(fn, (x,), expect_ops=["aten::elu"])


@given(x=tensors(dtype=dtypes(_NUMBERS)), bounds=st.sampled_from([(-1.0, 1.0), (0.0, 6.0), (-2.5, 0.5), (3, 100)]))
def test_hardtanh(x, bounds):
    # torch refuses negative limits for an unsigned input.
    assume(x.dtype != torch.uint8 or min(bounds) >= 0)
    assert_exports_like_eager(lambda t: F.hardtanh(t, *bounds), (x,), expect_ops=["aten::hardtanh"])


# No infinities or dtype extremes: torch's vectorized CPU gelu gives NaN for +inf and inf for
# |x| > finfo.max / 2 where its scalar path (a tensor's tail) gives inf and x: eager itself
# depends on the tensor's length there.
@pytest.mark.parametrize("opset", [None, 18])
@given(
    x=tensors(dtype=dtypes(_F32_16), edge_values=("nan", "zero", "subnormal")),
    approximate=st.sampled_from(["none", "tanh"]),
)
def test_gelu(opset, x, approximate):
    assert_exports_like_eager(
        lambda t: F.gelu(t, approximate=approximate), (x,), opset=opset, expect_ops=["aten::gelu"]
    )


@given(
    x=tensors(dtype=dtypes(FLOAT_DTYPES), low=-30, high=30),
    beta=st.sampled_from([1.0, 2.0, 0.5]),
    threshold=st.sampled_from([20.0, 1.0]),
)
def test_softplus(x, beta, threshold):
    assert_exports_like_eager(lambda t: F.softplus(t, beta, threshold), (x,), expect_ops=["aten::softplus"])


@pytest.mark.parametrize("name", ["_softmax", "_log_softmax"])
@given(data=st.data(), shape=shapes(max_rank=4, min_side=0), dtype=dtypes(FLOAT_DTYPES))
def test_softmax(name, data, shape, dtype):
    # The core ATen form (half_to_float is for CUDA only). No NaN/inf: onnxruntime's
    # Softmax differs from torch's on them.
    x = data.draw(tensors(shape, dtype, low=-10, high=10))
    dim = data.draw(dims(len(shape)))
    fn = getattr(torch.ops.aten, name)
    assert_exports_like_eager(lambda t: fn(t, dim, False), (x,), expect_ops=[f"aten::{name}"])


@pytest.mark.parametrize("fn", [torch.softmax, torch.log_softmax], ids=["softmax", "log_softmax"])
@given(data=st.data(), shape=shapes(max_rank=3), dtype=dtypes(FLOAT_DTYPES), to_float=st.booleans())
def test_softmax_int(fn, data, shape, dtype, to_float):
    # As captured (not decomposed), with and without dtype=.
    x = data.draw(tensors(shape, dtype, low=-10, high=10))
    dim = data.draw(dims(len(shape)))
    out = torch.float32 if to_float else None
    assert_exports_like_eager(lambda t: fn(t, dim, dtype=out), (x,), expect_ops=[f"aten::{fn.__name__}.int"])


@pytest.mark.parametrize("name", ["relu", "silu", "hardswish", "leaky_relu", "elu", "softplus"])
def test_activation_opset14_dynamic(name):
    fn = {
        "leaky_relu": F.leaky_relu,
        "elu": F.elu,
        "softplus": F.softplus,
        **{k: v[0] for k, v in ACTIVATIONS.items()},
    }[name]
    batch = torch.export.Dim("batch")
    assert_exports_like_eager(
        lambda t: fn(t),
        (torch.randn(4, 3),),
        other_inputs=[((torch.randn(7, 3),), {})],
        dynamic_shapes=({0: batch},),
        opset=14,
        expect_ops=[f"aten::{name}"],
    )
