"""A tiny Llama quantized to int8 and int4, exported with its cache: onnxruntime against the float model.

Random weights (transformers' LlamaConfig, hidden 64, 2 layers, no hub): their logits lie
close together, so greedy tokens are a sensitive measure, and int4's error (a sixteenth of
each block's range per weight) flips some of them. The bounds below are what the pack
measures with margin (numbers in the comments, onnxruntime 1.32, torch 2.13); a packing that
reads the nibbles in the other order agrees on no prompt, which the last test shows.
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

import pt2onnx_quant.plugin
from pt2onnx_quant import QuantizedLinear, accuracy, quantize_weights, token_agreement

pytest.importorskip("pt2onnx_transformers")
import transformers as tf

from pt2onnx_transformers import empty_cache, export_causal_lm

pytestmark = pytest.mark.slow

PROMPTS = torch.randint(0, 256, (20, 8), generator=torch.Generator().manual_seed(1))
NEW_TOKENS = 4


@pytest.fixture(scope="module")
def llama() -> torch.nn.Module:
    torch.manual_seed(0)
    config = tf.LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tf.LlamaForCausalLM(config).eval()


def _prompt_step(result, batch=4):
    ids = PROMPTS[:batch]
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "cache": empty_cache(result, batch)}


def _export(model):
    return export_causal_lm(model, plugins=[pt2onnx_quant.plugin])


# bits, block size, symmetric; the largest |logit difference| as a share of the largest |logit|,
# and how many of the 20 prompts must continue identically for 4 tokens.
CASES = {
    "int8": (8, 32, True, 0.03, 19),  # measured: 0.99%, 20/20
    "int4": (4, 32, False, 0.30, 10),  # measured: 15.4%, 14/20 (76% of the new tokens)
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_quantized_llama_exports_and_stays_near_the_float_model(llama, case):
    bits, block_size, symmetric, bound, agreeing = CASES[case]
    quantized = quantize_weights(copy.deepcopy(llama), bits, block_size, symmetric=symmetric)
    assert sum(isinstance(m, QuantizedLinear) for m in quantized.modules()) == 15  # 7 per layer and lm_head
    result = _export(quantized)
    assert sum(node.op_type == "MatMulNBits" for node in result.model.graph) == 15
    assert result.report.provider("pt2onnx_quant::matmul_nbits.default") == "pt2onnx_quant.plugin"
    # The export computes what the quantized model computes in PyTorch ...
    assert result.verify(**_prompt_step(result)).ok
    # ... which is near the float model.
    error = accuracy(llama, result, [_prompt_step(result)])
    assert 0 < error.relative < bound, error
    tokens = token_agreement(llama, result, PROMPTS, NEW_TOKENS)
    assert tokens.identical >= agreeing, tokens


def test_int4_packing_read_in_the_other_nibble_order_agrees_on_no_prompt(llama):
    # The control of the bounds above: they tell a right packing from a wrong one.
    broken = quantize_weights(copy.deepcopy(llama), 4, 32, symmetric=False)
    for layer in broken.modules():
        if isinstance(layer, QuantizedLinear):
            layer.packed = (layer.packed << 4) | (layer.packed >> 4)
    result = _export(broken)
    assert accuracy(llama, result, [_prompt_step(result)]).relative > CASES["int4"][3]
    assert token_agreement(llama, result, PROMPTS, NEW_TOKENS).identical < CASES["int4"][4]


def test_lm_head_can_stay_in_float(llama):
    quantized = quantize_weights(copy.deepcopy(llama), 4, 32, exclude=["lm_head"])
    assert type(quantized.lm_head) is torch.nn.Linear
    result = _export(quantized)
    assert sum(node.op_type == "MatMulNBits" for node in result.model.graph) == 14
    assert result.verify(**_prompt_step(result)).ok
