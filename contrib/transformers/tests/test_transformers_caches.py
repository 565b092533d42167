"""transformers' caches as named graph inputs and outputs: one graph for the prompt and every step.

The pack is installed, so nothing here registers a pytree or names an input: a causal LM
exported with its cache takes ``past_key_values.{i}.key``/``.value`` and returns
``present.{i}.key``/``.value``, with dynamic batch, sequence and past length.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.export import Dim
from transformers import (
    LlamaForCausalLM,
    MambaConfig,
    MambaForCausalLM,
    StaticCache,
    T5Config,
    T5ForConditionalGeneration,
)
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

import pt2onnx
from pt2onnx.testing import assert_exports_like_eager
from pt2onnx_transformers import cache_argument, causal_lm_inputs, export_causal_lm

pytestmark = pytest.mark.slow

LAYERS, KV_HEADS, HEAD_DIM = 2, 2, 16
#: ``cache`` from transformers 5.24 on (which still takes ``past_key_values`` through ``**kwargs``).
CACHE = cache_argument(LlamaForCausalLM)


def _past(batch: int, length: int, seed: int) -> DynamicCache:
    g = torch.Generator().manual_seed(seed)
    return DynamicCache(
        [tuple(torch.randn(batch, KV_HEADS, length, HEAD_DIM, generator=g) for _ in range(2)) for _ in range(LAYERS)]
    )


def _step(ids: torch.Tensor, past: DynamicCache) -> dict:
    mask = torch.ones(ids.shape[0], past.get_seq_length() + ids.shape[1], dtype=torch.int64)
    return {"input_ids": ids, "attention_mask": mask, CACHE: past, "use_cache": True}


@pytest.fixture(scope="module")
def exported(llama):
    return assert_exports_like_eager(llama, (), {**causal_lm_inputs(llama), "use_cache": True})


def test_inputs_and_outputs_are_named_as_onnxruntime_genai_names_them(exported):
    names = [f"{i}.{kind}" for i in range(LAYERS) for kind in ("key", "value")]
    assert exported.input_names == ["input_ids", "attention_mask", *(f"past_key_values.{n}" for n in names)]
    assert exported.output_names == ["logits", *(f"present.{n}" for n in names)]
    shapes = {v.name: [str(d) for d in v.shape] for v in [*exported.model.graph.inputs, *exported.model.graph.outputs]}
    assert shapes["input_ids"] == ["batch", "sequence_length"]
    assert shapes["past_key_values.0.key"] == ["batch", str(KV_HEADS), "past_sequence_length", str(HEAD_DIM)]
    assert shapes["present.1.value"] == [
        "batch",
        str(KV_HEADS),
        "past_sequence_length+sequence_length",
        str(HEAD_DIM),
    ]
    assert exported.report.preparations == [
        "pytree transformers.cache_utils.DynamicCache (transformers [installed])",
        "dynamic_shapes transformers.dims (transformers [installed])",
    ]


@pytest.mark.skipif(CACHE == "past_key_values", reason="transformers < 5.24 names the argument past_key_values")
def test_the_deprecated_past_key_values_keyword_exports_the_same_inputs(llama, exported):
    # transformers 5.24 catches it in **kwargs, where torch.export cannot make a dim dynamic by itself.
    step = _step(torch.tensor([[5, 6, 7], [1, 2, 3]]), _past(2, 3, 4))
    step["past_key_values"] = step.pop(CACHE)
    result = pt2onnx.export(llama, (), step, dynamic_shapes="auto")
    assert result.input_names == exported.input_names
    shapes = {v.name: [str(d) for d in v.shape] for v in result.model.graph.inputs}
    assert shapes["past_key_values.1.value"] == ["batch", str(KV_HEADS), "past_sequence_length", str(HEAD_DIM)]
    other = _step(torch.tensor([[1], [2], [3]]), _past(3, 9, 5))
    other["past_key_values"] = other.pop(CACHE)
    check = result.verify(**other)
    assert check.ok, check


def test_the_prompt_runs_with_an_empty_past_and_decoding_with_present(exported, llama):
    prompt = torch.randint(0, 100, (3, 4), generator=torch.Generator().manual_seed(1))
    check = exported.verify(**_step(prompt, _past(3, 0, 0)))
    assert check.ok, check
    with torch.no_grad():
        eager = llama(**_step(prompt, _past(3, 0, 0)))
    # The next step is fed the ONNX model's own present outputs.
    outputs = dict(zip(exported.output_names, exported.session().run(None, _feeds(prompt, 3, 0))))
    present = DynamicCache(
        [
            (torch.from_numpy(outputs[f"present.{i}.key"]), torch.from_numpy(outputs[f"present.{i}.value"]))
            for i in range(LAYERS)
        ]
    )
    next_ids = eager.logits[:, -1:].argmax(-1)
    check = exported.verify(**_step(next_ids, present))
    assert check.ok, check
    assert present.get_seq_length() == 4


def _feeds(ids: torch.Tensor, batch: int, length: int) -> dict[str, np.ndarray]:
    feeds = {"input_ids": ids.numpy(), "attention_mask": np.ones((batch, length + ids.shape[1]), np.int64)}
    for i in range(LAYERS):
        for kind in ("key", "value"):
            feeds[f"past_key_values.{i}.{kind}"] = np.zeros((batch, KV_HEADS, length, HEAD_DIM), np.float32)
    return feeds


def test_a_long_past_and_another_batch_match_eager(exported):
    ids = torch.randint(0, 100, (1, 1), generator=torch.Generator().manual_seed(3))
    check = exported.verify(**_step(ids, _past(1, 17, 2)))
    assert check.ok, check


def test_export_causal_lm_is_the_same_graph_in_one_call(llama, exported):
    result = export_causal_lm(llama)
    assert result.input_names == exported.input_names and result.output_names == exported.output_names
    check = result.verify(**_step(torch.tensor([[5, 6]]), _past(1, 3, 4)))
    assert check.ok, check


def test_a_static_cache_is_updated_in_place_through_named_inputs(llama):
    cache = StaticCache(config=llama.config, max_cache_len=16)
    with torch.no_grad():
        llama(input_ids=torch.randint(0, 100, (2, 4)), past_key_values=cache, use_cache=True)
    ids = torch.randint(0, 100, (2, 3), generator=torch.Generator().manual_seed(5))
    result = assert_exports_like_eager(
        llama, (), {"input_ids": ids, "past_key_values": cache, "use_cache": True}, dynamic=False
    )
    assert "past_key_values.0.cumulative_length" in result.input_names
    assert "present.1.value" in result.output_names
    assert any("StaticCache" in p for p in result.report.preparations)


def _t5() -> T5ForConditionalGeneration:
    torch.manual_seed(0)
    config = T5Config(
        vocab_size=100, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, decoder_start_token_id=0
    )
    return T5ForConditionalGeneration(config).eval()


def test_an_encoder_decoder_cache_is_named_per_layer_for_decoder_and_encoder():
    model = _t5()
    source = torch.randint(1, 100, (2, 7), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        hidden = model.get_encoder()(input_ids=source).last_hidden_state
        start = model(encoder_outputs=(hidden,), decoder_input_ids=torch.zeros(2, 2, dtype=torch.int64), use_cache=True)
    assert isinstance(start.past_key_values, EncoderDecoderCache)
    step = {
        "encoder_outputs": (hidden,),
        "decoder_input_ids": torch.randint(1, 100, (2, 3), generator=torch.Generator().manual_seed(7)),
        "past_key_values": start.past_key_values,
        "use_cache": True,
    }
    result = assert_exports_like_eager(model, (), step)
    assert "past_key_values.1.decoder.key" in result.input_names
    assert "past_key_values.1.encoder.value" in result.input_names
    assert "present.0.decoder.value" in result.output_names
    shapes = {v.name: [str(d) for d in v.shape] for v in result.model.graph.inputs}
    assert shapes["past_key_values.0.encoder.key"][2] == "encoder_sequence_length"
    assert shapes["past_key_values.0.decoder.key"][2] == "past_sequence_length"


@pytest.mark.parametrize("dummy_layer", [True, False], ids=["DummyLayer", "no-DummyLayer"])
def test_a_state_space_cache_comes_out_as_conv_and_recurrent_states(monkeypatch, dummy_layer):
    if not dummy_layer:  # as in transformers 5.17, where looking it up failed every state-space cache
        from transformers import cache_utils

        monkeypatch.delattr(cache_utils, "DummyLayer", raising=False)
    torch.manual_seed(0)
    model = MambaForCausalLM(
        MambaConfig(vocab_size=100, hidden_size=32, state_size=8, num_hidden_layers=2, conv_kernel=4)
    ).eval()
    # The prompt keeps the last conv_kernel tokens as its conv state: torch needs the length >= 4.
    shapes = {"input_ids": {0: Dim("batch"), 1: Dim("sequence_length", min=4)}, "use_cache": None}
    ids = torch.randint(0, 100, (2, 6), generator=torch.Generator().manual_seed(8))
    result = assert_exports_like_eager(model, (), {"input_ids": ids, "use_cache": True}, dynamic_shapes=shapes)
    assert result.output_names == ["logits"] + [
        f"present.{i}.{s}" for i in range(2) for s in ("conv_state", "recurrent_state")
    ]


def test_a_cache_of_another_structure_is_refused_with_the_structure_named(exported):
    with pytest.raises(pt2onnx.errors.VerificationError, match="structure"):
        exported.run(
            **_step(torch.tensor([[1]]), DynamicCache([tuple(torch.zeros(1, KV_HEADS, 2, HEAD_DIM) for _ in range(2))]))
        )
