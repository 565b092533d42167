"""Normalizations against eager: layer/group/instance/RMS/batch norm, every output of the native ops."""

from __future__ import annotations

import onnxruntime
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

import pt2onnx
from lambda_modules import Unary as Call
from lambda_modules import Variadic
from pt2onnx.testing import assert_exports_like_eager, dtypes, shapes, tensors

NORM_DTYPES = ("float32", "float16", "bfloat16", "float64")
# Inputs with NaN, inf, zeros and subnormals, but ordinary values of about unit scale:
# where the variance overflows, torch's Welford and onnxruntime's two-pass statistics give
# NaN, inf or 0 differently, and torch's folded x * alpha + beta cancels, so where
# |x * alpha| is large, onnxruntime's fused multiply-adds (BatchNormalization,
# LayerNormalization) differ from it by |x * alpha| * eps (kernel details no converter controls).
STATS = {"low": -10, "high": 10, "edge_values": ("nan", "inf", "zero", "subnormal")}
# Where the batch mean is an output, no infinities either: torch's Welford mean of a slice
# holding +-inf is NaN or +-inf depending on where the inf sits; onnxruntime's is +-inf.
MOMENTS = {**STATS, "edge_values": ("nan", "zero", "subnormal")}
# Weights of the inference form: onnxruntime's BatchNormalization folds weight * invstd into
# one scale and the mean into the shift, so an infinite weight gives x * scale + shift =
# inf - inf = NaN where torch's (x - mean) * invstd * weight is +-inf.
FINITE_STATS = {**STATS, "edge_values": ("nan", "zero", "subnormal")}
BATCH = ({0: torch.export.Dim("batch")},)


def _other_batch(x):
    return [((torch.cat([x, x[:1] * 2]),), {})]


def _maybe(data, shape, dtype):
    # Contiguous, as a module holds its weights: torch's native kernels read them raw (a strided
    # bias's gaps, holding the dtype's largest value, would reach eager's result).
    return data.draw(st.none() | tensors(shape, dtype, **STATS, contiguous=True))


def _running(data, channels, dtype):
    """Running mean and variance: onnxruntime's BatchNormalization folds them into the scale
    and shift in another order than torch, so they too stay where products do not overflow."""
    mean = data.draw(tensors((channels,), dtype, **STATS))
    # No zero or subnormal variances either: 1 / sqrt(eps) scales the fused-multiply-add difference.
    var = data.draw(tensors((channels,), dtype, low=0.5, high=2, edge_values=("nan", "inf")))
    return mean, var


@given(data=st.data(), dtype=dtypes(NORM_DTYPES), native=st.booleans(), opset=st.sampled_from([14, 26]))
def test_layer_norm(data, dtype, native, opset):
    shape = (2, *data.draw(shapes(min_rank=1, max_rank=3, min_side=2)))
    k = data.draw(st.integers(1, len(shape) - 1))
    x = data.draw(tensors(shape, dtype, **(MOMENTS if native else STATS)))
    w, b = _maybe(data, shape[-k:], dtype), _maybe(data, shape[-k:], dtype)
    eps = data.draw(st.sampled_from([1e-5, 1e-3]))
    if native:
        model = Call(lambda x: torch.ops.aten.native_layer_norm(x, shape[-k:], w, b, eps))
    else:
        model = Call(lambda x: F.layer_norm(x, shape[-k:], w, b, eps))
    assert_exports_like_eager(
        model,
        (x,),
        dynamic_shapes=BATCH,
        other_inputs=_other_batch(x),
        opset=opset,
        expect_ops=["aten::native_layer_norm" if native else "aten::layer_norm"],
    )


@pytest.mark.parametrize("native", [False, True])
@pytest.mark.parametrize("opset", [16, 17])
def test_layer_norm_on_both_sides_of_opset_17(native, opset):
    # LayerNormalization is opset 17: below it the until=16 converters spell it out.
    x, w, b = torch.randn(2, 5, 6), torch.rand(6) + 0.5, torch.randn(6)
    if native:
        model = Call(lambda x: torch.ops.aten.native_layer_norm(x, [6], w, b, 1e-5))
    else:
        model = Call(lambda x: F.layer_norm(x, [6], w, b, 1e-5))
    result = assert_exports_like_eager(
        model, (x,), opset=opset, expect_ops=["aten::native_layer_norm" if native else "aten::layer_norm"]
    )
    assert ("LayerNormalization" in {n.op_type for n in result.model.graph}) == (opset >= 17)


@given(data=st.data(), dtype=dtypes(NORM_DTYPES), native=st.booleans())
def test_group_norm(data, dtype, native):
    groups = data.draw(st.integers(1, 3))
    channels = groups * data.draw(st.integers(1, 2))
    # Groups of one element have variance 0: the result is torch's rounding of x - mean times 1/sqrt(eps).
    spatial = data.draw(shapes(min_rank=1, max_rank=2, min_side=2, max_side=4))
    # torch's native_group_norm kernel takes contiguous inputs only (group_norm makes them so).
    x = data.draw(tensors((2, channels, *spatial), dtype, **(MOMENTS if native else STATS), contiguous=native or None))
    w, b = _maybe(data, (channels,), dtype), _maybe(data, (channels,), dtype)
    if native:
        hw = 1
        for s in spatial:
            hw *= s
        model = Call(lambda x: torch.ops.aten.native_group_norm(x, w, b, x.shape[0], channels, hw, groups, 1e-5))
        assert_exports_like_eager(model, (x,), expect_ops=["aten::native_group_norm"])
    else:
        model = Call(lambda x: F.group_norm(x, groups, w, b))
        assert_exports_like_eager(
            model, (x,), dynamic_shapes=BATCH, other_inputs=_other_batch(x), expect_ops=["aten::group_norm"]
        )


@pytest.mark.parametrize(("shape", "native"), [((0, 2), True), ((0, 2), False), ((0, 4, 3), False), ((2, 4), True)])
def test_group_norm_of_an_empty_batch_or_no_spatial_dims(shape, native):
    # Thorough OpInfo: group_norm of a (0, 2) input; Reshape cannot infer -1 beside 0, and
    # onnxruntime's shape inference refused a literal 0 batch beside a symbolic channel count.
    channels = shape[1]
    if native:
        model = Variadic(lambda x, w, b: torch.ops.aten.native_group_norm(x, w, b, x.shape[0], x.shape[1], 1, 2, 1e-5))
    else:
        model = Variadic(lambda x, w, b: F.group_norm(x, 2, w, b))
    expect = "aten::native_group_norm" if native else "aten::group_norm"
    args = (torch.randn(shape), torch.rand(channels) + 0.5, torch.randn(channels))
    assert_exports_like_eager(model, args, expect_ops=[expect])


@given(data=st.data(), dtype=dtypes(NORM_DTYPES), use_input_stats=st.booleans())
def test_instance_norm(data, dtype, use_input_stats):
    channels = data.draw(st.integers(1, 3))
    spatial = data.draw(shapes(min_rank=1, max_rank=3, min_side=2, max_side=4))
    x = data.draw(tensors((2, channels, *spatial), dtype, **STATS))
    w, b = _maybe(data, (channels,), dtype), _maybe(data, (channels,), dtype)
    mean, var = _running(data, channels, dtype)
    model = Call(lambda x: F.instance_norm(x, mean, var, w, b, use_input_stats))
    assert_exports_like_eager(
        model, (x,), dynamic_shapes=BATCH, other_inputs=_other_batch(x), expect_ops=["aten::instance_norm"]
    )


@given(data=st.data(), dtype=dtypes(NORM_DTYPES), opset=st.sampled_from([14, 26]))
def test_rms_norm(data, dtype, opset):
    shape = (2, *data.draw(shapes(min_rank=1, max_rank=3, min_side=2)))
    k = data.draw(st.integers(1, len(shape) - 1))
    x = data.draw(tensors(shape, dtype, **STATS))
    w = _maybe(data, shape[-k:], dtype)
    eps = data.draw(st.sampled_from([None, 1e-5]))
    model = Call(lambda x: F.rms_norm(x, shape[-k:], w, eps))
    assert_exports_like_eager(
        model, (x,), dynamic_shapes=BATCH, other_inputs=_other_batch(x), opset=opset, expect_ops=["aten::rms_norm"]
    )


@given(data=st.data(), dtype=dtypes(("float32", "float16", "float64")))
def test_batch_norm_batch_statistics(data, dtype):
    channels = data.draw(st.integers(1, 3))
    spatial = data.draw(shapes(min_rank=0, max_rank=2, min_side=2, max_side=4))
    # Contiguous: at an infinite weight torch's result depends on the input's layout (NaN for a
    # contiguous input, +-inf for a transposed one); the export gives the contiguous one.
    x = data.draw(tensors((2, channels, *spatial), dtype, **MOMENTS, contiguous=True))
    w, b = _maybe(data, (channels,), dtype), _maybe(data, (channels,), dtype)
    model = Call(lambda x: torch.ops.aten._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5))
    assert_exports_like_eager(model, (x,), expect_ops=["aten::_native_batch_norm_legit"])
    # batch_norm with running statistics (inference form) on the same data, finite weights (FINITE_STATS).
    mean, var = _running(data, channels, dtype)
    w, b = (data.draw(st.none() | tensors((channels,), dtype, **FINITE_STATS, contiguous=True)) for _ in range(2))
    model = Call(lambda x: F.batch_norm(x, mean, var, w, b, False))
    assert_exports_like_eager(model, (x,), dynamic_shapes=BATCH, other_inputs=_other_batch(x), decompose_all=False)


@given(data=st.data(), dtype=dtypes(("float32", "float64")), training=st.booleans())
def test_batch_norm_training_updates_running_statistics(data, dtype, training):
    channels = data.draw(st.integers(1, 3))
    # Contiguous, as in test_batch_norm_batch_statistics: at an infinite weight torch's result
    # depends on the input's layout.
    x = data.draw(tensors((3, channels, 2), dtype, **MOMENTS, contiguous=True))
    if training:
        w, b = _maybe(data, (channels,), dtype), _maybe(data, (channels,), dtype)
    else:  # the inference form: finite weights (FINITE_STATS)
        w, b = (data.draw(st.none() | tensors((channels,), dtype, **FINITE_STATS, contiguous=True)) for _ in range(2))
    mean, var = _running(data, channels, dtype)
    op = torch.ops.aten._native_batch_norm_legit_functional
    outputs = (0, 3, 4) if not training else (0, 1, 2, 3, 4)  # saved stats are empty in inference
    model = Call(lambda x: [op(x, w, b, mean, var, training, 0.1, 1e-5)[i] for i in outputs])
    assert_exports_like_eager(model, (x,), expect_ops=["aten::_native_batch_norm_legit_functional"])


class LegitBatchNorm(torch.nn.Module):
    def __init__(self, mean, var, no_training):
        super().__init__()
        self.register_buffer("mean", mean)
        self.register_buffer("var", var)
        self.no_training = no_training

    def forward(self, x):
        if self.no_training:
            return torch.ops.aten._native_batch_norm_legit_no_training(x, None, None, self.mean, self.var, 0.1, 1e-5)[0]
        return torch.ops.aten._native_batch_norm_legit.default(x, None, None, self.mean, self.var, False, 0.1, 1e-5)[0]


@given(data=st.data(), no_training=st.booleans())
def test_batch_norm_legit_inference(data, no_training):
    # _native_batch_norm_legit.default mutates its running statistics, so export functionalizes it.
    x = data.draw(tensors((2, 3, 4), torch.float32, **STATS))
    mean, var = _running(data, 3, torch.float32)
    expected = (
        "aten::_native_batch_norm_legit_no_training" if no_training else "aten::_native_batch_norm_legit_functional"
    )
    assert_exports_like_eager(LegitBatchNorm(mean, var, no_training), (x,), expect_ops=[expected])


def test_training_batch_norm_model_updates_its_running_statistics():
    model = torch.nn.Sequential(torch.nn.BatchNorm1d(3), torch.nn.InstanceNorm1d(3, affine=True))
    model.train()
    x = torch.randn(4, 3, 5)
    result = pt2onnx.export(model, (x,))
    session = onnxruntime.InferenceSession(result.model_proto.SerializeToString())
    names = [o.name for o in session.get_outputs()]
    got = dict(zip(names, session.run(None, {session.get_inputs()[0].name: x.numpy()})))
    expected = model(x)  # updates the running statistics, as the ONNX model's extra outputs do
    torch.testing.assert_close(torch.from_numpy(got["output"]), expected, atol=1e-5, rtol=1e-4)
    for name in ("running_mean", "running_var"):
        torch.testing.assert_close(torch.from_numpy(got[f"0.{name}.updated"]), getattr(model[0], name))


# No NaN or inf: torch's bfloat16 (oneDNN) convolution gives NaN where the sum is +-inf and
# outside the windows a NaN reaches, unlike its own float32 convolution of the same values.
@given(x=tensors((2, 3, 5, 5), torch.bfloat16, low=-10, high=10, edge_values=("zero", "subnormal")))
def test_bfloat16_conv_batch_norm_runs(x):
    # onnxruntime has no bfloat16 BatchNormalization kernel (NOT_IMPLEMENTED when run): it
    # computes in float32, as torch's bfloat16 kernel does.
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(4)
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.5, 2)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), bn).to(torch.bfloat16)
    assert_exports_like_eager(model, (x,), expect_ops=["aten::batch_norm"])
