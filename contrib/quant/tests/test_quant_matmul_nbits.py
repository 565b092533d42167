"""``pt2onnx_quant::matmul_nbits`` exported as ``MatMulNBits``: onnxruntime against the eager op.

The eager op is the product with the dequantized weight (:func:`pt2onnx_quant.dequantize`),
so these tests prove the export reads the packed bytes, scales and zero points as the
eager op does: a nibble order, zero point or padding the two read differently changes the
products far beyond the float32 tolerance.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import pt2onnx
import pt2onnx_quant.plugin
from pt2onnx.errors import UnsupportedArgumentError
from pt2onnx.testing import assert_exports_like_eager, tensors
from pt2onnx_quant import BLOCK_SIZES, QuantizedLinear, dequantize, quantize_weights

OP = "pt2onnx_quant::matmul_nbits"
EXPECT = {OP: "pt2onnx_quant.plugin"}


def _nodes(result):
    return [n for n in result.model_proto.graph.node if n.domain == "com.microsoft"]


def _attributes(node):
    return {a.name: a.i for a in node.attribute}


@st.composite
def quantized_layers(draw, dtype=torch.float32):
    """A QuantizedLinear of drawn width, bits, block size and symmetry, its weight of a drawn magnitude."""
    bits = draw(st.sampled_from([4, 8]))
    block_size = draw(st.sampled_from(BLOCK_SIZES[:3]))
    # K often not a multiple of the block: the last block is padded.
    in_features = draw(st.integers(1, 3 * block_size))
    out_features = draw(st.integers(1, 9))
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    magnitude = draw(st.sampled_from([1e-3, 1.0, 30.0]))
    linear = torch.nn.Linear(in_features, out_features, bias=draw(st.booleans()))
    with torch.no_grad():
        linear.weight.copy_(torch.randn(out_features, in_features, generator=generator) * magnitude)
        if linear.bias is not None:
            linear.bias.copy_(torch.randn(out_features, generator=generator))
    symmetric = draw(st.booleans())
    return QuantizedLinear.from_linear(linear.to(dtype), bits, block_size, symmetric)


def _summation_tolerance(layer: QuantizedLinear, x: torch.Tensor) -> float:
    """What two float32 sums of K products may differ by in another order: sqrt(K) roundings of the
    largest sum of magnitudes (seed 2269546645 drew K=116 with |x| up to 100: 0.0098 apart on an
    output of 87, beyond the default 1e-5 + 1e-4 * 87; a misread nibble or scale is off by whole
    quantization steps). Non-finite inputs count as 0: their positions are compared exactly."""
    weight = dequantize(layer.packed, layer.scales, layer.zero_points, layer.in_features, layer.bits, layer.block_size)
    finite = torch.where(x.isfinite(), x, torch.zeros_like(x)).abs()
    largest = float((finite @ weight.abs().T).max()) if finite.numel() else 0.0
    return max(1e-5, 4 * layer.in_features**0.5 * torch.finfo(torch.float32).eps * largest)


# x: moderate finite values with NaN, inf, zeros and subnormals among them. Where finite
# products overflow, the sum depends on the order of the additions, which differs between
# torch's and onnxruntime's kernels (as for aten's matmul, plugins/aten/tests/test_aten_linear.py).
@given(data=st.data(), layer=quantized_layers(), batch=st.lists(st.integers(1, 3), max_size=2))
def test_matmul_nbits_matches_the_eager_op(data, layer, batch):
    x = data.draw(
        tensors(
            (*batch, layer.in_features), "float32", low=-100, high=100, edge_values=("nan", "inf", "zero", "subnormal")
        )
    )
    # K is fixed by the weight, and torch specializes batch dims of size 1: without a larger one nothing is dynamic.
    result = assert_exports_like_eager(
        layer,
        (x,),
        plugins=[pt2onnx_quant.plugin],
        expect_ops=EXPECT,
        dynamic=any(size > 1 for size in batch),
        atol=_summation_tolerance(layer, x),
    )
    [node] = _nodes(result)
    assert node.op_type == "MatMulNBits"
    assert _attributes(node) == {
        "K": layer.in_features,
        "N": layer.out_features,
        "bits": layer.bits,
        "block_size": layer.block_size,
    }
    # MatMulNBits(A, B, scales, zero_points, g_idx, bias), trailing absent inputs left out.
    inputs = ["x", "packed", "scales", "" if layer.zero_points is None else "zero_points", "", "bias"]
    assert list(node.input) == inputs[: 6 if layer.bias is not None else 4 if layer.zero_points is not None else 3]


# float16: onnxruntime's kernel accumulates in its own order and precision, so the tolerance
# is float16's, scaled by the size of the sums.
@settings(max_examples=8)
@given(data=st.data(), layer=quantized_layers(torch.float16))
def test_matmul_nbits_in_float16(data, layer):
    x = data.draw(tensors((2, layer.in_features), "float16", low=-2, high=2, edge_values=False))
    bound = 2e-2 * max(1.0, float(layer(x).abs().max()))
    assert_exports_like_eager(
        layer, (x,), plugins=[pt2onnx_quant.plugin], expect_ops=EXPECT, atol=bound, rtol=2e-2, dynamic=False
    )


@pytest.mark.parametrize("bits", [4, 8])
def test_accuracy_level_4_quantizes_the_input_and_stays_near_the_eager_op(bits):
    # Level 4 lets onnxruntime quantize x to int8 per block: not eager's exact product, by design.
    torch.manual_seed(0)
    model = quantize_weights(torch.nn.Sequential(torch.nn.Linear(96, 32)), bits, 32, accuracy_level=4)
    x = torch.randn(4, 96)
    result = pt2onnx.export(model, (x,), plugins=[pt2onnx_quant.plugin])
    [node] = _nodes(result)
    assert _attributes(node)["accuracy_level"] == 4
    expected, actual = model(x), result.run(x)
    error = (actual - expected).abs().max() / expected.abs().max()
    assert 1e-6 < error < 2e-2, error


def test_float64_is_refused_with_what_to_do():
    model = quantize_weights(torch.nn.Sequential(torch.nn.Linear(32, 8)).double(), 8, 16)
    with pytest.raises(UnsupportedArgumentError, match="MatMulNBits computes in float32 or float16") as e:
        pt2onnx.export(model, (torch.randn(2, 32, dtype=torch.float64),), plugins=[pt2onnx_quant.plugin])
    assert "cast the model to float32" in str(e.value)


def test_without_the_plugin_the_op_is_unsupported():
    model = quantize_weights(torch.nn.Sequential(torch.nn.Linear(32, 8)), 4, 16)
    with pytest.raises(pt2onnx.errors.Pt2OnnxError, match="pt2onnx_quant::matmul_nbits"):
        pt2onnx.export(model, (torch.randn(2, 32),), disable=["quant"])
