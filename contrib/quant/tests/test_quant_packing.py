"""The quantizer: onnxruntime's own bytes, and an error bounded by each block's scale."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

# The C++ quantizers behind onnxruntime's MatMulNBitsQuantizer: the reference for the layout.
from onnxruntime.capi._pybind_state import quantize_matmul_4bits, quantize_matmul_8bits

from pt2onnx_quant import BLOCK_SIZES, QuantizedLinear, dequantize, quantize, quantize_weights
from pt2onnx_quant.packing import unpack_bits


@st.composite
def weights(draw):
    n, k = draw(st.integers(1, 8)), draw(st.integers(1, 300))
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    weight = torch.randn(n, k, generator=generator) * draw(st.sampled_from([1e-4, 1.0, 100.0]))
    if draw(st.booleans()):  # blocks of one sign: the asymmetric range does not hold 0 inside
        weight = weight.abs()
    return weight


def _values(packed, bits, k):
    return unpack_bits(packed, bits).reshape(packed.shape[0], -1)[:, :k]


@given(
    weight=weights(),
    bits=st.sampled_from([4, 8]),
    block_size=st.sampled_from(BLOCK_SIZES),
    symmetric=st.booleans(),
)
def test_quantize_gives_onnxruntimes_quantizer_values(weight, bits, block_size, symmetric):
    n, k = weight.shape
    k_blocks = -(-k // block_size)
    packed = np.zeros((n, k_blocks, block_size * bits // 8), np.uint8)
    scales = np.zeros((n, k_blocks), np.float32)
    zero_points = np.zeros((n, -(-k_blocks * bits // 8)), np.uint8)
    reference = quantize_matmul_4bits if bits == 4 else quantize_matmul_8bits
    # onnxruntime takes MatMul's B, [K, N].
    reference(packed, weight.T.contiguous().numpy(), scales, zero_points, block_size, n, k, symmetric)
    ours = quantize(weight, bits, block_size, symmetric)
    assert ours.packed.shape == packed.shape and ours.scales.shape == scales.shape
    # The values of the weight, not of the padding (onnxruntime leaves that 0; ours stands for weights of 0).
    assert torch.equal(_values(ours.packed, bits, k), _values(torch.from_numpy(packed), bits, k))
    assert torch.equal(ours.scales, torch.from_numpy(scales))
    if symmetric:
        assert ours.zero_points is None
    else:
        assert ours.zero_points is not None and ours.zero_points.shape == zero_points.shape
        expected = unpack_bits(torch.from_numpy(zero_points), bits)[:, :k_blocks]
        assert torch.equal(unpack_bits(ours.zero_points, bits)[:, :k_blocks], expected)


@given(
    weight=weights(),
    bits=st.sampled_from([4, 8]),
    block_size=st.sampled_from(BLOCK_SIZES),
    symmetric=st.booleans(),
)
def test_the_quantization_error_is_bounded_by_each_blocks_scale(weight, bits, block_size, symmetric):
    q = quantize(weight, bits, block_size, symmetric)
    restored = dequantize(q.packed, q.scales, q.zero_points, q.in_features, bits, block_size)
    step = q.scales.abs().repeat_interleave(block_size, dim=1)[:, : weight.shape[1]]
    # Rounding is off by half a step; the symmetric grid's one level short of the top
    # (-8..7 for a block whose largest magnitude maps to -8) by up to a whole step.
    bound = step * (1.0 if symmetric else 0.5) * (1 + 1e-5) + 1e-30
    assert ((restored - weight).abs() <= bound).all()
    # And a layer's outputs are off by at most sum |x| * bound.
    layer = QuantizedLinear(q)
    x = torch.randn(3, weight.shape[1])
    error = (layer(x) - x @ weight.T).abs()
    assert (error <= x.abs() @ bound.T * (1 + 1e-4) + 1e-5).all()


def test_8_bits_are_16_times_as_exact_as_4():
    torch.manual_seed(0)
    weight = torch.randn(64, 256)
    errors = {}
    for bits in (4, 8):
        q = quantize(weight, bits, 32)
        errors[bits] = (dequantize(q.packed, q.scales, None, 256, bits, 32) - weight).abs().mean()
    assert 12 < errors[4] / errors[8] < 20


def test_a_block_of_zeros_stays_zero():
    weight = torch.zeros(2, 40)
    weight[1, :16] = 3.0
    for symmetric in (True, False):
        q = quantize(weight, 4, 16, symmetric)
        assert torch.equal(dequantize(q.packed, q.scales, q.zero_points, 40, 4, 16), weight)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bits": 3}, "bits=3: pt2onnx-quant quantizes weights to 4 or 8 bits"),
        ({"bits": 2}, "4 or 8 bits"),
        ({"block_size": 24}, "block_size=24: MatMulNBits takes a power of 2 from 16 to 256"),
        ({"block_size": 8}, "a power of 2 from 16"),
        ({"block_size": 512}, "a power of 2 from 16 to 256"),
        ({"accuracy_level": 5}, "accuracy_level=5: MatMulNBits takes 0"),
        ({"exclude": ["lm_haed"]}, r"exclude=\['lm_haed'\]: no layer this replaces is named so"),
    ],
)
def test_bad_options_are_clear_errors(options, message):
    model = torch.nn.Sequential(torch.nn.Linear(32, 8))
    with pytest.raises(ValueError, match=message):
        quantize_weights(model, **options)
    assert type(model[0]) is torch.nn.Linear  # nothing replaced


def test_a_weight_holding_nan_is_refused():
    with pytest.raises(ValueError, match="NaN or inf"):
        quantize(torch.tensor([[1.0, float("nan")]]), 4, 16)


def test_exclude_leaves_the_named_layers_in_float_and_only_plain_linear_layers_are_replaced():
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up, self.down = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)
            self.attention = torch.nn.MultiheadAttention(16, 2)  # its out_proj is read as a weight

    model = torch.nn.ModuleDict({"a": Block(), "b": Block(), "lm_head": torch.nn.Linear(16, 50)})
    quantize_weights(model, 8, exclude=["lm_head", "*.down"])
    kinds = {name: type(m).__name__ for name, m in model.named_modules() if "Linear" in type(m).__name__}
    assert kinds == {
        "a.up": "QuantizedLinear",
        "a.down": "Linear",
        "a.attention.out_proj": "NonDynamicallyQuantizableLinear",
        "b.up": "QuantizedLinear",
        "b.down": "Linear",
        "b.attention.out_proj": "NonDynamicallyQuantizableLinear",
        "lm_head": "Linear",
    }


def test_a_bare_linear_layer_is_returned_quantized():
    linear = torch.nn.Linear(16, 4)
    quantized = quantize_weights(linear, 8, 16)
    assert isinstance(quantized, QuantizedLinear) and quantized.out_features == 4
