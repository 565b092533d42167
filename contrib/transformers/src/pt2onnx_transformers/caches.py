"""transformers' caches as pytree nodes: one named tensor per layer and role.

A cache flattens into one dict per layer, so its tensors become ONNX inputs and outputs
named as onnxruntime-genai and optimum name them (``past_key_values.0.key`` in,
``present.0.key`` out):

* attention layers (``DynamicLayer``, its sliding-window and static variants):
  ``key`` and ``value``; a static layer also ``cumulative_length``;
* linear-attention (state-space, convolution) layers: ``conv_state`` and
  ``recurrent_state`` (``conv_state_1``, ... when a layer keeps several);
* hybrid layers: both;
* ``EncoderDecoderCache``: ``{i}.decoder.*`` (self-attention) and ``{i}.encoder.*``
  (cross-attention).

Everything else a layer holds (its class, dtype, window size, flags) is the pytree
context, so a cache of another structure is another graph. The tensors a trace derives
from others (a sliding layer's token counter and window tensor) are rebuilt on
unflatten rather than flattened.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch
import torch.utils._pytree as pytree
from torch.export import Dim

from pt2onnx.plugin import PreparationRegistrar

# transformers is imported where a cache is at hand (so it is imported already), never when the
# plugin loads: every export loads the plugin, and most exports are not of transformers models.
if TYPE_CHECKING:
    from transformers.cache_utils import Cache, EncoderDecoderCache

__all__ = [
    "cache_dims",
    "flatten_cache",
    "flatten_encoder_decoder",
    "register",
    "unflatten_cache",
    "unflatten_encoder_decoder",
]

#: The input and output name templates (``{key}``: ``0.key``). Inputs are named
#: ``past_key_values.*`` whatever the argument is called (transformers 5.24 renamed it ``cache``).
INPUT_NAMES = "past_key_values.{key}"
OUTPUT_NAMES = "present.{key}"

# Attention tensors: attribute -> name. Linear-attention states: dict attribute -> name.
_ATTENTION = {"keys": "key", "values": "value"}
_STATES = {"conv_states": "conv_state", "recurrent_states": "recurrent_state"}
# Rebuilt on unflatten: a sliding layer's window tensor (from its size) and its Python token
# counter (from the keys' length); a trace bakes both in, so they cannot be graph inputs. The
# device a layer records is its tensors': ONNX has none, and a cache captured on the meta
# device (a model exported without its weights) is the same graph as one on the CPU.
_DERIVED = ("_sliding_window_tensor", "prefetch_stream", "device")


def _slots(layer: Any) -> Iterator[tuple[str, str, Any]]:
    """``(name, attribute, index)`` of each tensor a layer holds; ``index`` is None for plain attributes."""
    from transformers import cache_utils

    dummy = getattr(cache_utils, "DummyLayer", None)  # transformers 5.17 has none
    if isinstance(layer, cache_utils.CacheLayerMixin) or (dummy is not None and type(layer) is dummy):
        for attribute, name in _ATTENTION.items():
            if getattr(layer, attribute, None) is not None:
                yield name, attribute, None
        if isinstance(layer, cache_utils.StaticLayer):
            yield "cumulative_length", "cumulative_length", None
    if isinstance(layer, cache_utils.LinearAttentionCacheLayerMixin):
        for attribute, name in _STATES.items():
            for index, value in getattr(layer, attribute).items():
                if value is not None:
                    yield (name if index == 0 else f"{name}_{index}"), attribute, index


def _frozen(value: Any, where: str) -> Any:
    """A hashable, comparable form of a non-tensor attribute (``where`` names it in errors)."""
    if isinstance(value, dict):
        return ("dict", tuple((k, _frozen(v, where)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_frozen(v, where) for v in value))
    if isinstance(value, torch.Tensor):
        raise TypeError(
            f"{where} holds a tensor that pt2onnx-transformers does not know how to pass as a graph input "
            "(quantized and offloaded caches are not exportable); use a DynamicCache or StaticCache"
        )
    return value


def _thawed(value: Any) -> Any:
    if isinstance(value, tuple) and len(value) == 2 and value[0] in ("dict", "list", "tuple"):
        kind, items = value
        if kind == "dict":
            return {k: _thawed(v) for k, v in items}
        return (list if kind == "list" else tuple)(_thawed(v) for v in items)
    return value


def _flatten_layer(layer: Any) -> tuple[dict[str, Any], tuple[Any, ...]]:
    slots = list(_slots(layer))
    taken = {(attribute, index) for _, attribute, index in slots}
    tensors: dict[str, Any] = {}
    for name, attribute, index in slots:
        value = getattr(layer, attribute)
        tensors[name] = value if index is None else value[index]
    static = []
    for attribute, value in vars(layer).items():
        if attribute in _DERIVED or (attribute, None) in taken:
            continue
        if attribute == "cumulative_length" and not isinstance(value, torch.Tensor):
            continue  # a sliding layer's token counter (an int, symbolic while traced): rebuilt from the keys
        if attribute in _STATES:
            value = {i: v for i, v in value.items() if (attribute, i) not in taken}
        static.append((attribute, _frozen(value, f"{type(layer).__name__}.{attribute}")))
    return tensors, (type(layer), tuple(static), tuple((n, a, i) for n, a, i in slots))


def _unflatten_layer(tensors: dict[str, Any], context: tuple[Any, ...]) -> Any:
    from transformers import cache_utils

    cls, static, slots = context
    layer = cls.__new__(cls)
    for attribute, value in static:
        setattr(layer, attribute, _thawed(value))
    for name, attribute, index in slots:
        if index is None:
            setattr(layer, attribute, tensors[name])
        else:
            getattr(layer, attribute)[index] = tensors[name]
    held = [t for t in tensors.values() if isinstance(t, torch.Tensor)]
    if held:
        layer.device = held[0].device
    if hasattr(layer, "sliding_window") and isinstance(layer, cache_utils.DynamicSlidingWindowLayer):
        layer._sliding_window_tensor = torch.tensor(layer.sliding_window, dtype=torch.long)
        keys = tensors.get("key")
        layer.cumulative_length = keys.shape[-2] if isinstance(keys, torch.Tensor) else 0  # symbolic while traced
    return layer


def flatten_cache(cache: Cache) -> tuple[list[tuple[pytree.KeyEntry, dict[str, Any]]], Any]:
    """A ``Cache`` (dynamic, static, hybrid) as one ``{name: tensor}`` dict per layer, and its context."""
    children: list[tuple[pytree.KeyEntry, dict[str, Any]]] = []
    layers: list[Any] = []
    for i, layer in enumerate(cache.layers):
        tensors, context = _flatten_layer(layer)
        children.append((pytree.SequenceKey(i), tensors))
        layers.append(context)
    rest = tuple(
        (k, _frozen(v, f"{type(cache).__name__}.{k}"))
        for k, v in vars(cache).items()
        if k not in ("layers", "layer_class_to_replicate") and k not in _DERIVED
    )
    return children, (type(cache), tuple(layers), rest)


def unflatten_cache(children: Any, context: Any) -> Cache:
    """The cache ``flatten_cache`` took apart, holding ``children``' tensors as they are."""
    from transformers import cache_utils

    cls, layers, rest = context
    cache = cls.__new__(cls)
    for attribute, value in rest:
        setattr(cache, attribute, _thawed(value))
    cache.layers = [_unflatten_layer(tensors, layer) for tensors, layer in zip(children, layers)]
    # How a cache grows past its layers matters only for an empty one (made with or without a
    # config, a cache with all its layers behaves the same), so it is not part of the context.
    cache.layer_class_to_replicate = None if cache.layers else cache_utils.DynamicLayer
    if getattr(cache, "offloading", False):
        cache.prefetch_stream = torch.Stream()
    return cache


def flatten_encoder_decoder(
    cache: EncoderDecoderCache,
) -> tuple[list[tuple[pytree.KeyEntry, dict[str, Any]]], Any]:
    """An ``EncoderDecoderCache`` as ``{"decoder": self-attention, "encoder": cross-attention}`` per layer."""
    own, own_context = flatten_cache(cache.self_attention_cache)
    cross, cross_context = flatten_cache(cache.cross_attention_cache)
    if len(own) != len(cross):
        raise ValueError(
            f"EncoderDecoderCache with {len(own)} self-attention and {len(cross)} cross-attention layers "
            "cannot be flattened per layer"
        )
    children = [(key, {"decoder": mine, "encoder": theirs}) for (key, mine), (_, theirs) in zip(own, cross)]
    updated = tuple(sorted(cache.is_updated.items()))
    return children, (own_context, cross_context, updated)


def unflatten_encoder_decoder(children: Any, context: Any) -> EncoderDecoderCache:
    """The ``EncoderDecoderCache`` ``flatten_encoder_decoder`` took apart."""
    from transformers.cache_utils import EncoderDecoderCache

    own_context, cross_context, updated = context
    cache = EncoderDecoderCache.__new__(EncoderDecoderCache)
    # Any Cache: transformers' __init__ takes two of any kind (mypy infers DynamicCache from its other branch).
    cache.self_attention_cache = unflatten_cache([c["decoder"] for c in children], own_context)  # type: ignore[assignment]
    cache.cross_attention_cache = unflatten_cache([c["encoder"] for c in children], cross_context)  # type: ignore[assignment]
    cache.is_updated = dict(updated)
    return cache


def register(register: PreparationRegistrar) -> None:
    """Register ``DynamicCache``, ``StaticCache`` and ``EncoderDecoderCache`` as pytree nodes.

    They are named by path: an export registers them once transformers is imported. Their layer types cover transformers' hybrid and state caches (sliding-window, linear
    attention, convolution, hybrid layers). Subclasses for speculative decoding
    (``MtpCache``, ``DFlashCache``) and model-specific ones are not registered: register
    one with :func:`flatten_cache` and :func:`unflatten_cache` in your own plugin.
    """
    for cls in ("DynamicCache", "StaticCache"):
        register.pytree(
            f"transformers.cache_utils:{cls}",
            flatten_cache,
            unflatten_cache,
            input_names=INPUT_NAMES,
            output_names=OUTPUT_NAMES,
        )
    register.pytree(
        "transformers.cache_utils:EncoderDecoderCache",
        flatten_encoder_decoder,
        unflatten_encoder_decoder,
        input_names=INPUT_NAMES,
        output_names=OUTPUT_NAMES,
    )


def cache_dims(cache: Cache | EncoderDecoderCache, dim: Callable[[str, int], Any]) -> list[Any]:
    """Dynamic shapes for a cache argument, mirroring its flattened children.

    ``dim(name, size)`` gives the ``Dim`` for a dim (``"batch"``, ``"past_sequence_length"``,
    ``"encoder_sequence_length"``) of the example's size. Key and value tensors have their
    batch and length dynamic (a static cache's length is fixed); states their batch; every
    other dim is ``Dim.AUTO`` (torch fixes heads and head sizes, as the model does).
    """
    from transformers.cache_utils import EncoderDecoderCache, StaticCache

    if isinstance(cache, EncoderDecoderCache):
        own = cache_dims(cache.self_attention_cache, dim)
        cross = cache_dims(cache.cross_attention_cache, lambda name, size: dim(_cross(name), size))
        return [{"decoder": mine, "encoder": theirs} for mine, theirs in zip(own, cross)]
    children, _ = flatten_cache(cache)
    static = isinstance(cache, StaticCache)
    specs = []
    for _, tensors in children:
        spec: dict[str, Any] = {}
        for name, tensor in tensors.items():
            # Heads and head sizes: AUTO, so torch fixes them where the model does (it always does).
            axes: dict[int, Any] = dict.fromkeys(range(tensor.dim()), Dim.AUTO)
            if name in ("key", "value") and tensor.dim() == 4:
                axes[0] = dim("batch", tensor.shape[0])
                axes[2] = None if static else dim("past_sequence_length", tensor.shape[2])
            elif name.startswith(("conv_state", "recurrent_state")) and tensor.dim() >= 1:
                axes[0] = dim("batch", tensor.shape[0])
            spec[name] = axes
        specs.append(spec)
    return specs


def _cross(name: str) -> str:
    return "encoder_sequence_length" if name == "past_sequence_length" else name
