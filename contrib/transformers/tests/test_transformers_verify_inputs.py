"""``verify`` and ``run`` of an ``export_causal_lm`` result take what a user of ``model(...)`` passes.

Issue #28: the capture takes ``use_cache=True`` too, so ``result.verify(input_ids=...,
attention_mask=..., cache=...)`` used to fail with two 20-line TreeSpecs. Now the constant
may be left out, the cache is taken under either of its names (``cache``, and the
deprecated ``past_key_values``), as a transformers cache or as its tensors by their ONNX
names, and what is missing is one line naming it.
"""

from __future__ import annotations

import pytest
import torch
from transformers.cache_utils import DynamicCache

import pt2onnx
import pt2onnx_transformers
from pt2onnx.errors import VerificationError
from pt2onnx_transformers import cache_argument, causal_lm_inputs, export_causal_lm

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def result(llama) -> pt2onnx.ExportResult:
    return export_causal_lm(llama)


@pytest.fixture(scope="module")
def step(llama) -> dict:
    """One decoding step's inputs as the model takes them: input_ids, attention_mask and the cache."""
    return causal_lm_inputs(llama, batch=1, sequence_length=2, past_sequence_length=4, seed=3)


def _error(call) -> str:
    with pytest.raises(VerificationError) as caught:
        call()
    message = caught.value.message
    assert "\n" not in message and "TreeSpec" not in str(caught.value), str(caught.value)
    return message


def test_verify_takes_the_inputs_of_a_model_call(result, step):
    assert set(step) == {"input_ids", "attention_mask", cache_argument(result._eager)}
    assert result.verify(**step).ok  # no use_cache=True: a constant of the graph
    assert result.verify(**step, use_cache=True).ok  # the call as captured


def test_the_cache_is_taken_under_its_deprecated_name_and_ids_by_position(result, step, llama):
    cache = step[cache_argument(llama)]
    assert result.verify(input_ids=step["input_ids"], attention_mask=step["attention_mask"], past_key_values=cache).ok
    assert result.verify(step["input_ids"], step["attention_mask"], past_key_values=cache).ok


def test_the_cache_is_taken_as_its_tensors_by_their_onnx_names(result, step, llama):
    cache = step[cache_argument(llama)]
    past = {
        f"past_key_values.{i}.{name}": tensor
        for i, layer in enumerate(cache.layers)
        for name, tensor in (("key", layer.keys), ("value", layer.values))
    }
    assert list(past) == [n for n in result.input_names if n.startswith("past_key_values.")]
    assert result.verify(input_ids=step["input_ids"], attention_mask=step["attention_mask"], **past).ok


def test_run_returns_the_cache_the_next_step_takes(result, llama):
    prompt = torch.tensor([[1, 5, 7, 9]])
    out = result.run(
        input_ids=prompt, attention_mask=torch.ones_like(prompt), cache=pt2onnx_transformers.empty_cache(result, 1)
    )
    cache = getattr(out, cache_argument(llama))  # the output's field is named as the keyword
    assert isinstance(cache, DynamicCache) and cache.get_seq_length() == 4
    with torch.no_grad():
        expected = llama(input_ids=prompt, use_cache=True)
    torch.testing.assert_close(out.logits, expected.logits, atol=1e-4, rtol=1e-4)
    token = out.logits[:, -1:].argmax(-1)
    assert result.verify(input_ids=token, attention_mask=torch.ones(1, 5, dtype=torch.int64), cache=cache).ok


def test_a_missing_input_is_one_line(result, step, llama):
    name = cache_argument(llama)
    message = _error(lambda: result.verify(input_ids=step["input_ids"], **{name: step[name]}))
    assert message == (
        "missing input 'attention_mask'; the exported model takes input_ids, attention_mask, "
        f"{name} (a DynamicCache of 2, each a dict {{key, value}}), use_cache=True"
    )


def test_use_cache_false_is_refused_in_one_line(result, step):
    message = _error(lambda: result.verify(**step, use_cache=False))
    assert message.startswith("input 'use_cache' is False, but the model was exported with True")


def test_an_empty_cache_object_is_named_with_what_the_model_takes(result, step, llama):
    name = cache_argument(llama)
    ids = step["input_ids"]
    message = _error(lambda: result.run(input_ids=ids, attention_mask=torch.ones_like(ids), **{name: DynamicCache()}))
    assert message == (
        f"input '{name}' is an empty DynamicCache; the exported model takes a DynamicCache of 2, "
        "each a dict {key, value}"
    )
