"""Linear layers torchao quantized weight-only, exported as MatMulNBits with torchao's own values.

Skipped where torchao is not installed. torchao's ``Int4WeightOnlyConfig`` is not here: its
layouts run on CUDA (on CPU it needs the ``mslk`` package); ``IntxWeightOnlyConfig`` with
``weight_dtype=torch.int4`` is its CPU form.
"""

from __future__ import annotations

import pytest
import torch

import pt2onnx_quant.plugin
from pt2onnx.testing import assert_exports_like_eager
from pt2onnx_quant import QuantizedLinear, dequantize, from_torchao

torchao = pytest.importorskip("torchao")
from torchao.quantization import (  # noqa: E402
    Int8DynamicActivationInt8WeightConfig,
    Int8WeightOnlyConfig,
    IntxWeightOnlyConfig,
    MappingType,
    quantize_,
)
from torchao.quantization.granularity import PerAxis, PerGroup  # noqa: E402

EXPECT = {"pt2onnx_quant::matmul_nbits": "pt2onnx_quant.plugin"}

# name -> (config, bits, torchao's group size: the layers take 3 and 2 groups of inputs).
CONFIGS = {
    # Per row, 144 and 96 inputs: not powers of 2, so MatMulNBits' last block is padded.
    "int8 per row": (Int8WeightOnlyConfig(), 8, 48),
    "int8 groups of 32": (Int8WeightOnlyConfig(granularity=PerGroup(32)), 8, 32),
    "int4 groups of 32": (IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)), 4, 32),
    "int4 groups of 64, asymmetric": (
        IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(64), mapping_type=MappingType.ASYMMETRIC),
        4,
        64,
    ),
    # Groups of 48: MatMulNBits blocks of 16, three to a group.
    "int8 groups of 48, asymmetric": (
        IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerGroup(48), mapping_type=MappingType.ASYMMETRIC),
        8,
        48,
    ),
    "int4 per row": (IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerAxis(0)), 4, 48),
}


def _model(group=32):
    torch.manual_seed(0)
    linear = torch.nn.Linear
    return torch.nn.Sequential(linear(3 * group, 2 * group), torch.nn.SiLU(), linear(2 * group, 16, bias=False))


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_torchao_weights_export_with_their_own_values(name):
    config, bits, group = CONFIGS[name]
    model = _model(group)
    quantize_(model, config)
    torchao_weights = [m.weight.dequantize() for m in (model[0], model[2])]
    x = torch.randn(3, 5, model[0].in_features)
    with torch.no_grad():
        expected = model(x)
    from_torchao(model)
    for layer, weight in zip((model[0], model[2]), torchao_weights):
        assert isinstance(layer, QuantizedLinear) and layer.bits == bits
        ours = dequantize(layer.packed, layer.scales, layer.zero_points, layer.in_features, bits, layer.block_size)
        assert torch.equal(ours, weight)
    torch.testing.assert_close(model(x), expected, atol=1e-5, rtol=1e-5)
    assert_exports_like_eager(model, (x,), plugins=[pt2onnx_quant.plugin], expect_ops=EXPECT)


def test_an_asymmetric_torchao_weight_keeps_its_zero_points_and_a_symmetric_one_none():
    model = _model(64)
    quantize_(model, CONFIGS["int4 groups of 64, asymmetric"][0])
    from_torchao(model)
    assert model[0].zero_points is not None and model[0].block_size == 64
    model = _model()
    quantize_(model, CONFIGS["int4 groups of 32"][0])
    from_torchao(model)
    assert model[0].zero_points is None and model[0].block_size == 32


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (Int8DynamicActivationInt8WeightConfig(), "quantizes activations too"),
        (IntxWeightOnlyConfig(weight_dtype=torch.int2, granularity=PerGroup(32)), "int4 or int8"),
        (IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(8)), "multiple of 16"),
    ],
)
def test_what_matmul_nbits_cannot_express_is_a_clear_error(config, message):
    model = _model()
    quantize_(model, config)
    with pytest.raises(ValueError, match=message):
        from_torchao(model)


def test_a_model_without_torchao_weights_is_an_error():
    with pytest.raises(ValueError, match="no linear layer of the model holds a torchao-quantized weight"):
        from_torchao(_model())
