"""Causal LMs exported by the pack compile in OpenVINO and match eager as in onnxruntime.

Grouped-query attention with a per-head norm (Qwen3) left the attention in its 4-D form,
which OpenVINO (2026.4) does not compile with dynamic dims; the fusions pack's
``portable_grouped_attention`` gives it the 3-D form both runtimes compile.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch
import transformers as tf
from tiny_models import _COMMON, causal_lm

from pt2onnx_transformers import cache_argument, causal_lm_inputs, export_causal_lm

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("openvino") is None, reason="openvino is not installed"),
]


def _qwen3():
    torch.manual_seed(0)
    return tf.Qwen3ForCausalLM(tf.Qwen3Config(**_COMMON, head_dim=16)).eval()


def _feeds(model, inputs):
    """The ONNX inputs of one step, taken before eager runs (it appends to the cache)."""
    feeds = {"input_ids": inputs["input_ids"].numpy(), "attention_mask": inputs["attention_mask"].numpy()}
    for i, layer in enumerate(inputs[cache_argument(model)].layers):
        feeds[f"past_key_values.{i}.key"] = layer.keys.numpy().copy()
        feeds[f"past_key_values.{i}.value"] = layer.values.numpy().copy()
    return feeds


@pytest.mark.parametrize("name", ["llama", "qwen2", "qwen3"])
def test_openvino_compiles_and_matches(name, tmp_path):
    import openvino

    model = _qwen3() if name == "qwen3" else causal_lm(name)
    export_causal_lm(model, f=tmp_path / "model.onnx")
    compiled = openvino.Core().compile_model(str(tmp_path / "model.onnx"), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    for batch, sequence, past in ((1, 7, 1), (3, 2, 5)):
        inputs = causal_lm_inputs(model, batch=batch, sequence_length=sequence, past_sequence_length=past, seed=3)
        feeds = _feeds(model, inputs)
        with torch.no_grad():
            expected = model(**inputs, use_cache=True).logits
        got = compiled(feeds)[compiled.output("logits")]
        torch.testing.assert_close(torch.from_numpy(got), expected, atol=1e-4, rtol=1e-4)
