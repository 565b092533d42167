"""A causal LM over fixed-size cache buffers: the graph onnxruntime-genai runs with ``past_present_share_buffer``.

With ``past_present_share_buffer: true``, onnxruntime-genai (0.18) allocates every layer's key
and value once, at ``(batch, kv_heads, max_length, head_size)`` (the graph's own length when it
is static), binds ``past_key_values.{i}.key`` and ``present.{i}.key`` to that one buffer, and
feeds ``input_ids`` (batch, new tokens) and ``attention_mask`` (batch, tokens so far, the new
ones included; it grows by one a step: only graph capture and TensorRT-RTX make it
``max_length`` long, which this graph, reading the tokens so far from its length, cannot run).
``position_ids`` only if the graph takes it; this one does not.

:class:`StaticCacheLM` is that graph's forward: the new tokens' positions are the mask's length
less theirs; their keys and values are written there (a ``scatter``: ``ScatterElements`` in
ONNX, which onnxruntime runs without a copy when past and present are one buffer), and
attention reads the whole buffer with the mask padded with zeros to ``max_length`` (and the
causal mask) hiding its unwritten tail.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch.export import Dim
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer, StaticLayer

import pt2onnx

from .inputs import cache_argument, causal_lm_inputs

__all__ = ["StaticCacheLM", "buffers_cache", "export_static_causal_lm", "static_cache_inputs"]


def buffers_cache(tensors: list[tuple[torch.Tensor, torch.Tensor]]) -> DynamicCache:
    """A ``DynamicCache`` holding ``tensors`` (a key and a value per layer) as they are: the container of
    :class:`StaticCacheLM`'s buffers, whose pytree names them ``past_key_values.{i}.key`` in, ``present.{i}.key`` out."""
    cache = DynamicCache()
    for keys, values in tensors:
        layer = DynamicLayer()
        layer.keys, layer.values, layer.is_initialized = keys, values, True
        layer.device = keys.device
        cache.layers.append(layer)
    return cache


def _key_values(cache: Cache, model: torch.nn.Module) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each layer's key and value; ValueError for a layer that holds other states (linear attention)."""
    pairs = []
    for layer in cache.layers:
        if not isinstance(layer, DynamicLayer) or layer.keys is None or layer.values is None:
            raise ValueError(
                f"a static cache holds attention keys and values; {type(model).__name__} has a {type(layer).__name__}"
            )
        pairs.append((layer.keys, layer.values))
    return pairs


class _BufferLayer(StaticLayer):
    """A ``StaticLayer`` over given buffers that writes with ``scatter`` along the sequence dim: a
    ``ScatterElements`` in ONNX, where ``index_copy`` transposes each whole buffer there and back."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, past_length: Any) -> None:
        super().__init__(keys.shape[2])
        self.keys, self.values, self.is_initialized, self.device = keys, values, True, keys.device
        self.cumulative_length = torch.full((), past_length, dtype=torch.long, device=keys.device)

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the new keys and values at the positions after the past; returns the whole buffers."""
        positions = torch.arange(key_states.shape[2], device=self.device) + self.cumulative_length
        positions = positions.view(1, 1, -1, 1)
        # New tensors, not in place: the writes are the graph's output, not an update of its inputs.
        keys, values = self.buffers()
        self.keys = keys.scatter(2, positions.expand_as(key_states), key_states)
        self.values = values.scatter(2, positions.expand_as(value_states), value_states)
        return self.buffers()

    def buffers(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The key and value buffers (never None: given at construction)."""
        return cast(torch.Tensor, self.keys), cast(torch.Tensor, self.values)


class StaticCacheLM(torch.nn.Module):
    """``model`` (a transformers causal LM) called as onnxruntime-genai calls a graph with a shared past and present.

    ``forward(input_ids, attention_mask, past_key_values)``: ``past_key_values`` a
    :func:`buffers_cache` of ``(batch, kv_heads, max_length, head_dim)`` buffers, the tokens
    before ``input_ids`` written at their positions; ``attention_mask`` covers those tokens and
    ``input_ids``. Returns the model's output: ``logits``, and the cache (a :func:`buffers_cache`
    of the same shapes, ``present``) with the new tokens' keys and values written at positions
    ``mask length - new tokens`` onwards; the other rows are the past's.
    """

    _causal_lm: torch.nn.Module

    def __init__(self, model: torch.nn.Module, max_length: int) -> None:
        super().__init__()
        # The model's children are this module's, under their own names, and the model itself is
        # called but not registered: the parameters keep the names the model and its checkpoint
        # give them (``model.layers.0...``, not ``model.model.layers.0...``), which ``weights=`` matches.
        for name, child in model.named_children():
            self.add_module(name, child)
        if next(model.named_parameters(recurse=False), None) or next(model.named_buffers(recurse=False), None):
            raise ValueError(f"{type(model).__name__} holds tensors of its own, outside its submodules")
        object.__setattr__(self, "_causal_lm", model)
        self.max_length = max_length

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, past_key_values: DynamicCache) -> Any:
        batch, total = attention_mask.shape
        past_length = total - input_ids.shape[1]
        layers = [
            _BufferLayer(keys, values, past_length) for keys, values in _key_values(past_key_values, self._causal_lm)
        ]
        # The mask spans the buffer (attention's key length), zeros over its unwritten tail; padded
        # here, not by transformers, whose padding branches on the mask's length.
        mask = torch.cat([attention_mask, attention_mask.new_zeros(batch, self.max_length - total)], dim=1)
        name = cache_argument(self._causal_lm)
        cache = Cache(layers=[*layers])
        output = self._causal_lm(input_ids=input_ids, attention_mask=mask, use_cache=True, **{name: cache})
        output[name] = buffers_cache([layer.buffers() for layer in layers])
        return output


def static_cache_inputs(
    model: torch.nn.Module,
    max_length: int,
    *,
    batch: int = 2,
    sequence_length: int = 3,
    past_sequence_length: int = 5,
    seed: int = 0,
) -> dict[str, Any]:
    """Example inputs of one decoding step of :class:`StaticCacheLM`: ``input_ids``, ``attention_mask`` and
    ``past_key_values``, the past of :func:`~pt2onnx_transformers.causal_lm_inputs` written at the start of
    zero buffers of ``max_length``."""
    if past_sequence_length + sequence_length > max_length:
        raise ValueError(
            f"max_length {max_length} holds fewer tokens than the past and the new ones "
            f"({past_sequence_length} + {sequence_length})"
        )
    inputs = causal_lm_inputs(
        model, batch=batch, sequence_length=sequence_length, past_sequence_length=past_sequence_length, seed=seed
    )
    buffers = []
    for pair in _key_values(inputs.pop(cache_argument(model)), model):
        keys, values = (past.new_zeros(*past.shape[:2], max_length, past.shape[3]) for past in pair)
        keys[:, :, :past_sequence_length], values[:, :, :past_sequence_length] = pair
        buffers.append((keys, values))
    return {**inputs, "past_key_values": buffers_cache(buffers)}


def export_static_causal_lm(
    model: torch.nn.Module,
    max_length: int,
    *,
    batch: int = 2,
    sequence_length: int = 3,
    past_sequence_length: int = 5,
    **export_options: Any,
) -> pt2onnx.ExportResult:
    """Export ``model`` as :class:`StaticCacheLM` (``export_causal_lm(model, cache="static", max_length=...)``).

    The example's past is shortened to fit ``max_length``, but kept one token at least: a mask
    as long as ``input_ids`` could share its dim with theirs (torch gives equal sizes one symbol).
    """
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < sequence_length + 1:
        raise ValueError(
            f"a static cache needs max_length=, the longest sequence (prompt included) as an int of at least "
            f"sequence_length + 1 = {sequence_length + 1} (the example's tokens and one past token); got {max_length!r}"
        )
    past_sequence_length = max(1, min(past_sequence_length, max_length - sequence_length))
    inputs = static_cache_inputs(
        model, max_length, batch=batch, sequence_length=sequence_length, past_sequence_length=past_sequence_length
    )
    batch_dim = Dim("batch")
    buffer = {0: batch_dim, 1: Dim.AUTO, 2: Dim.STATIC, 3: Dim.AUTO}
    dynamic_shapes = {
        "input_ids": {0: batch_dim, 1: Dim("sequence_length")},
        # AUTO: torch bounds it by max_length (the zeros padding it), which no named Dim states.
        "attention_mask": {0: batch_dim, 1: Dim.AUTO},
        "past_key_values": [dict.fromkeys(("key", "value"), buffer) for _ in inputs["past_key_values"].layers],
    }
    result = pt2onnx.export(
        StaticCacheLM(model, max_length).eval(), (), inputs, dynamic_shapes=dynamic_shapes, **export_options
    )
    result.input_aliases.update(cache="past_key_values")
    return result
