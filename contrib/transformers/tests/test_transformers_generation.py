"""Greedy decoding in onnxruntime gives the tokens ``model.generate(do_sample=False)`` gives.

Each model is exported once with its cache (:func:`export_causal_lm`), then decodes 20
tokens: the prompt with an empty past, every next token with the previous step's
``present`` fed back as ``past_key_values``. Tiny random-weight models from config
classes: the logits of such models are close together, so a wrong cache, mask or
position shows up as another token within a few steps.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_models import CAUSAL_LMS, causal_lm
from transformers import T5Config, T5ForConditionalGeneration

import pt2onnx
from pt2onnx_transformers import export_causal_lm, greedy_decode

pytestmark = pytest.mark.slow

NEW_TOKENS = 20


def _eager_greedy(model: torch.nn.Module, prompt: torch.Tensor, **inputs) -> torch.Tensor:
    config = model.generation_config
    config.eos_token_id, config.pad_token_id = None, 0  # decode all 20 tokens, whatever comes
    with torch.no_grad():
        return model.generate(prompt, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False, **inputs)


@pytest.mark.drawn(2, "each architecture decodes through the same pack code")
@pytest.mark.parametrize("name", sorted(CAUSAL_LMS))
def test_greedy_tokens_match_generate(name):
    model = causal_lm(name)
    result = export_causal_lm(model)
    prompt = torch.randint(0, 100, (2, 5), generator=torch.Generator().manual_seed(11))
    got = greedy_decode(result, prompt, NEW_TOKENS)
    expected = _eager_greedy(model, prompt)
    assert got.tolist() == expected.tolist()


def test_encoder_decoder_greedy_tokens_match_generate():
    torch.manual_seed(0)
    config = T5Config(
        vocab_size=100, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, decoder_start_token_id=0
    )
    model = T5ForConditionalGeneration(config).eval()
    source = torch.randint(1, 100, (2, 7), generator=torch.Generator().manual_seed(12))
    encoder = pt2onnx.export(model.get_encoder(), (), {"input_ids": source}, dynamic_shapes="auto")
    with torch.no_grad():
        hidden = model.get_encoder()(input_ids=source).last_hidden_state
        start = model(encoder_outputs=(hidden,), decoder_input_ids=torch.zeros(2, 2, dtype=torch.int64), use_cache=True)
    step = {"encoder_outputs": (hidden,), "decoder_input_ids": torch.ones(2, 3, dtype=torch.int64), "use_cache": True}
    # Two decoder graphs, as optimum has them: the first step computes the cross-attention
    # keys and values from the encoder's output, the others read them from the cache.
    first = pt2onnx.export(model, (), step, dynamic_shapes="auto")
    later = pt2onnx.export(model, (), {**step, "past_key_values": start.past_key_values}, dynamic_shapes="auto")

    (states,) = encoder.session().run(None, {"input_ids": source.numpy()})
    tokens = np.zeros((2, 1), np.int64)
    outputs = dict(
        zip(first.output_names, first.session().run(None, {"encoder_outputs_0": states, "decoder_input_ids": tokens}))
    )
    for step_index in range(NEW_TOKENS):
        tokens = np.concatenate([tokens, outputs["logits"][:, -1].argmax(-1)[:, None]], axis=1)
        if step_index == NEW_TOKENS - 1:
            break
        feeds = {"encoder_outputs_0": states, "decoder_input_ids": tokens[:, -1:]}
        feeds.update(
            {f"past_key_values.{n[len('present.') :]}": v for n, v in outputs.items() if n.startswith("present.")}
        )
        outputs = dict(zip(later.output_names, later.session().run(None, feeds)))
    assert tokens.tolist() == _eager_greedy(model, source).tolist()
