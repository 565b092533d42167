"""A Llama with a KV cache: ``past_key_values`` in, ``present`` out, one export for every step.

transformers' ``DynamicCache`` is flattened with pytree into one tensor per layer for keys
and values, so each becomes a named ONNX input (and output). The model is exported once
with a dynamic batch, sequence and past length, then checked against eager for a prefill
step (empty past) and one decode step fed with the ONNX model's own ``present`` outputs.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.utils._pytree as pytree

import pt2onnx

transformers = pytest.importorskip("transformers")
from transformers.cache_utils import DynamicCache, DynamicLayer  # noqa: E402

pytestmark = pytest.mark.slow

LAYERS, KV_HEADS, HEAD_DIM = 2, 2, 16


def _flatten(cache: DynamicCache) -> tuple[list[torch.Tensor], None]:
    return [layer.keys for layer in cache.layers] + [layer.values for layer in cache.layers], None


def _flatten_with_keys(cache: DynamicCache) -> tuple[list[tuple[pytree.KeyEntry, torch.Tensor]], None]:
    keys = [(pytree.MappingKey(f"key_{i}"), layer.keys) for i, layer in enumerate(cache.layers)]
    values = [(pytree.MappingKey(f"value_{i}"), layer.values) for i, layer in enumerate(cache.layers)]
    return keys + values, None


def _unflatten(tensors: list[torch.Tensor], _context: None = None) -> DynamicCache:
    """A cache holding ``tensors`` as they are (transformers' own unflatten would re-grow them by
    concatenating onto an empty tensor, which puts a legacy empty-tensor ``cat`` in the graph)."""
    tensors = list(tensors)
    half = len(tensors) // 2
    cache = DynamicCache()
    cache.layers = []
    for k, v in zip(tensors[:half], tensors[half:]):
        layer = DynamicLayer()
        # pytree also unflattens placeholders (e.g. ints, to name outputs): no dtype there.
        layer.dtype, layer.device = getattr(k, "dtype", None), getattr(k, "device", None)
        layer.keys, layer.values, layer.is_initialized = k, v, True
        cache.layers.append(layer)
    return cache


if DynamicCache not in pytree.SUPPORTED_NODES:
    pytree.register_pytree_node(
        DynamicCache,
        _flatten,
        _unflatten,
        serialized_type_name="transformers.cache_utils.DynamicCache",
        flatten_with_keys_fn=_flatten_with_keys,
    )


def _past(batch: int, length: int, seed: int) -> DynamicCache:
    g = torch.Generator().manual_seed(seed)
    return _unflatten([torch.randn(batch, KV_HEADS, length, HEAD_DIM, generator=g) for _ in range(2 * LAYERS)])


@pytest.fixture(scope="module")
def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=100,
        hidden_size=KV_HEADS * 2 * HEAD_DIM,
        intermediate_size=128,
        num_hidden_layers=LAYERS,
        num_attention_heads=KV_HEADS * 2,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=128,
    )
    model = LlamaForCausalLM(config).eval()
    batch, seq, past = torch.export.Dim("batch"), torch.export.Dim("seq"), torch.export.Dim("past_length")
    cache_dims = [{0: batch, 2: past}] * (2 * LAYERS)
    inputs = {"input_ids": torch.randint(0, 100, (2, 3)), "past_key_values": _past(2, 5, 0), "use_cache": True}
    result = pt2onnx.export(
        model,
        (),
        inputs,
        dynamic_shapes={"input_ids": {0: batch, 1: seq}, "past_key_values": cache_dims, "use_cache": None},
    )
    return model, result


def _onnx_step(result, input_ids: torch.Tensor, past: list[np.ndarray]) -> dict[str, np.ndarray]:
    feeds = {"input_ids": input_ids.numpy()}
    feeds.update({f"past_key_values_key_{i}": past[i] for i in range(LAYERS)})
    feeds.update({f"past_key_values_value_{i}": past[LAYERS + i] for i in range(LAYERS)})
    names = result.output_names
    return dict(zip(names, result.session().run(names, feeds)))


def _present(outputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    keys = [outputs[f"past_key_values.key_{i}"] for i in range(LAYERS)]
    return keys + [outputs[f"past_key_values.value_{i}"] for i in range(LAYERS)]


def _assert_close(got: np.ndarray, expected: torch.Tensor) -> None:
    assert got.shape == tuple(expected.shape)
    np.testing.assert_allclose(got, expected.numpy(), atol=1e-4, rtol=1e-4)


def test_inputs_and_outputs_are_named_after_the_cache(llama):
    _, result = llama
    keys = [f"past_key_values_key_{i}" for i in range(LAYERS)]
    values = [f"past_key_values_value_{i}" for i in range(LAYERS)]
    assert result.input_names == ["input_ids", *keys, *values]
    present_keys = [f"past_key_values.key_{i}" for i in range(LAYERS)]
    present_values = [f"past_key_values.value_{i}" for i in range(LAYERS)]
    assert result.output_names == ["logits", *present_keys, *present_values]
    past_input = result.model.graph.inputs[1]
    assert [str(d) for d in past_input.shape] == ["batch", str(KV_HEADS), "past_length", str(HEAD_DIM)]


def test_prefill_then_decode_match_eager(llama):
    model, result = llama
    batch, prompt = 3, 4
    prompt_ids = torch.randint(0, 100, (batch, prompt), generator=torch.Generator().manual_seed(1))
    empty = [np.zeros((batch, KV_HEADS, 0, HEAD_DIM), np.float32) for _ in range(2 * LAYERS)]

    with torch.no_grad():
        eager = model(input_ids=prompt_ids, past_key_values=_past(batch, 0, 0), use_cache=True)
    got = _onnx_step(result, prompt_ids, empty)
    _assert_close(got["logits"], eager.logits)
    for g, e in zip(_present(got), _flatten(eager.past_key_values)[0]):
        _assert_close(g, e)

    next_ids = eager.logits[:, -1:].argmax(-1)
    with torch.no_grad():
        eager_next = model(input_ids=next_ids, past_key_values=eager.past_key_values, use_cache=True)
    got_next = _onnx_step(result, next_ids, _present(got))
    _assert_close(got_next["logits"], eager_next.logits)
    present = _present(got_next)
    assert present[0].shape[2] == prompt + 1
    for g, e in zip(present, _flatten(eager_next.past_key_values)[0]):
        _assert_close(g, e)


def test_decode_with_a_longer_past_matches_eager(llama):
    model, result = llama
    past = _past(1, 17, 2)
    ids = torch.randint(0, 100, (1, 1), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        eager = model(input_ids=ids, past_key_values=_past(1, 17, 2), use_cache=True)
    got = _onnx_step(result, ids, [t.numpy() for t in _flatten(past)[0]])
    _assert_close(got["logits"], eager.logits)
