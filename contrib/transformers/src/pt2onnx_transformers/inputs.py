"""Example inputs and dynamic shapes from a model's config, as optimum's input generators build them.

:func:`export_causal_lm` exports a causal LM with its KV cache in one call: one graph
for the prompt (an empty past) and every decoding step, with named dynamic dims
``batch``, ``sequence_length`` and ``past_sequence_length`` (the mask's length is
dynamic too). :func:`dims_hint` is the dynamic-shape hint this pack
registers: with ``dynamic_shapes="auto"`` it names those dims on any transformers
model's token, mask and cache arguments.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, cast

import torch
from torch.export import Dim

import pt2onnx

from .caches import cache_dims
from .checkpoint import empty_causal_lm, is_checkpoint, on_meta, past_without_weights

if TYPE_CHECKING:
    from transformers import PreTrainedConfig

__all__ = ["cache_argument", "causal_lm_inputs", "dims_hint", "export_causal_lm", "is_transformers_model"]

#: Token-like arguments: (batch, sequence) with these dim names.
_TOKENS = {
    "input_ids": "sequence_length",
    "position_ids": "sequence_length",
    "token_type_ids": "sequence_length",
    "inputs_embeds": "sequence_length",
    # An encoder-decoder's two lengths are independent: one name would make them equal.
    "decoder_input_ids": "decoder_sequence_length",
    "decoder_position_ids": "decoder_sequence_length",
}
#: Masks: (batch, past + sequence). torch relates their length to the others' by a guard no
#: named ``Dim`` can state (``mask >= past + sequence``), so it stays ``Dim.AUTO``.
_MASKS = {"attention_mask", "decoder_attention_mask"}
#: Arguments read from the encoder's output: (batch, encoder sequence).
_ENCODER = {"encoder_hidden_states", "encoder_attention_mask", "encoder_outputs"}


def is_transformers_model(model: Any) -> bool:
    """Whether ``model`` is a transformers ``PreTrainedModel`` (without importing transformers' models)."""
    modeling = sys.modules.get("transformers.modeling_utils")
    return modeling is not None and isinstance(model, modeling.PreTrainedModel)


def example_device(model: torch.nn.Module) -> torch.device:
    """Where example inputs for ``model`` go: its weights' device (a model on a GPU takes GPU inputs).

    The CPU for a model built on the meta device (exported with ``weights=``) or without weights.
    """
    tensor: torch.Tensor | None = next(iter(model.parameters()), None)
    if tensor is None:
        tensor = next(iter(model.buffers()), None)
    if tensor is None or tensor.device.type == "meta":
        return torch.device("cpu")
    return tensor.device


def _dims(maxima: dict[str, int] | None = None) -> Callable[[str, int], Any]:
    """``dim(name, size)``: one shared ``Dim(name)`` per name, bounded by ``maxima[name]`` where given;
    ``Dim.AUTO`` for sizes 0 and 1, which torch specializes."""
    made: dict[str, Any] = {}
    bounds = maxima or {}

    def dim(name: str, size: int) -> Any:
        if size < 2:
            return Dim.AUTO
        if name not in made:
            made[name] = Dim(name, max=bounds[name]) if name in bounds else Dim(name)
        return made[name]

    return dim


def _position_table_length(model: torch.nn.Module) -> int | None:
    """The length of the ``position_ids`` table an absolute-position model slices its positions from
    (BERT's ``embeddings.position_ids``, ``(1, max_position_embeddings)``), or None.

    Slicing it bounds the sequence; named without that bound, torch refuses the dim and pt2onnx
    captures a second time with torch's suggested fix, which costs a whole capture.
    """
    for name, buffer in model.named_buffers():
        if name.rpartition(".")[2] == "position_ids" and buffer.dim() == 2 and buffer.shape[0] == 1:
            return int(buffer.shape[1])
    return None


def dims_hint(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """Named dynamic dims for a transformers model's tokens, masks, encoder states and caches.

    The capture-preparation hint of this pack: with ``dynamic_shapes="auto"``, these
    replace the anonymous ``Dim.AUTO`` of the arguments it knows. None for other models.
    """
    if not is_transformers_model(model):
        return None
    from transformers.cache_utils import Cache, EncoderDecoderCache

    signature = _signature(model)
    try:
        bound = dict(signature.bind_partial(*args, **kwargs).arguments)
    except TypeError:
        return None
    # Keywords the model's **kwargs catches (past_key_values from transformers 5.24 on) are
    # arguments of their own in dynamic_shapes, as pt2onnx captures them.
    for name, param in signature.parameters.items():
        if param.kind is param.VAR_KEYWORD:
            bound.update(bound.pop(name, {}))
    table = _position_table_length(model)
    dim = _dims({"sequence_length": table} if table is not None else None)
    spec: dict[str, Any] = {}
    for name, value in bound.items():
        if isinstance(value, (Cache, EncoderDecoderCache)):
            spec[name] = cache_dims(value, dim)
        elif isinstance(value, torch.Tensor) and value.dim() >= 2 and name in _TOKENS:
            spec[name] = {0: dim("batch", value.shape[0]), 1: dim(_TOKENS[name], value.shape[1])}
        elif isinstance(value, torch.Tensor) and value.dim() == 2 and name in _MASKS:
            spec[name] = {0: dim("batch", value.shape[0]), 1: Dim.AUTO}
        elif name in _ENCODER:
            spec[name] = _encoder_dims(value, dim)
    return spec or None


def _encoder_dims(value: Any, dim: Callable[[str, int], Any]) -> Any:
    if isinstance(value, torch.Tensor):
        return {0: dim("batch", value.shape[0]), 1: dim("encoder_sequence_length", value.shape[1])}
    if isinstance(value, (tuple, list)):
        return type(value)(_encoder_dims(v, dim) for v in value)
    return None


def _signature(model: Any) -> Any:
    import inspect

    return inspect.signature(model.forward)


def cache_argument(model: torch.nn.Module | type[torch.nn.Module]) -> str:
    """The name of the cache argument (and output field) of a model or model class: ``cache`` from
    transformers 5.24 on, ``past_key_values`` before. Its ONNX inputs are ``past_key_values.*`` either way."""
    return "cache" if "cache" in _signature(model).parameters else "past_key_values"


def causal_lm_inputs(
    model: torch.nn.Module, *, batch: int = 2, sequence_length: int = 3, past_sequence_length: int = 5, seed: int = 0
) -> dict[str, Any]:
    """Example inputs of one decoding step of a causal LM: ``input_ids``, ``attention_mask`` and the cache
    (keyed by :func:`cache_argument`).

    The cache is the one the model itself builds for ``past_sequence_length`` random tokens,
    so its layer types (full, sliding, linear attention) and shapes are the model's own.
    Attention layers are built as plain ``DynamicLayer``: a sliding window is then applied
    by the attention mask alone, and the graph does not bake in a token counter.
    """
    from transformers.cache_utils import DynamicCache, get_layer_types_and_kwargs

    config = cast("PreTrainedConfig", model.config)
    vocab = config.get_text_config(decoder=True).vocab_size
    generator = torch.Generator().manual_seed(seed)
    device = example_device(model)
    past_ids = torch.randint(0, vocab, (batch, past_sequence_length), generator=generator).to(device)
    ids = torch.randint(0, vocab, (batch, sequence_length), generator=generator).to(device)
    layer_types, _ = get_layer_types_and_kwargs(config.get_text_config(decoder=True))
    attention_only = set(layer_types) <= {"full_attention", "sliding_attention", "chunked_attention"}
    empty = DynamicCache() if attention_only else DynamicCache(config=config)
    cache = cache_argument(model)
    if on_meta(model):
        past = past_without_weights(model, past_ids, cache, empty, seed)
    else:
        with torch.no_grad():
            past = getattr(model(input_ids=past_ids, use_cache=True, **{cache: empty}), cache)
    mask = torch.ones(batch, past_sequence_length + sequence_length, dtype=torch.int64, device=device)
    return {"input_ids": ids, "attention_mask": mask, cache: past}


def export_causal_lm(
    model: torch.nn.Module | str | os.PathLike[str],
    *,
    batch: int = 2,
    sequence_length: int = 3,
    past_sequence_length: int = 5,
    cache: Literal["dynamic", "static"] = "dynamic",
    max_length: int | None = None,
    **export_options: Any,
) -> pt2onnx.ExportResult:
    """Export a causal LM with its KV cache: one graph for the prompt and every decoding step.

    Inputs ``input_ids`` (batch, sequence_length), ``attention_mask`` (batch, past +
    sequence length) and ``past_key_values.{i}.key``/``.value`` (batch, heads,
    past_sequence_length, head_dim); outputs ``logits`` and ``present.{i}.key``/``.value``.
    Feed an empty past (length 0) for the prompt and each step's ``present`` back as the
    next step's past. ``export_options`` go to :func:`pt2onnx.export`.

    ``model`` may be a checkpoint folder (``save_pretrained``'s ``config.json`` and safetensors):
    the model is then built without its weights (:func:`~pt2onnx_transformers.checkpoint.empty_causal_lm`)
    and exported with ``weights=`` the folder, each weight read from its file as it is written, so the
    export never holds the model in memory. Such a result verifies against a loaded model
    (``result.verify(..., _eager=AutoModelForCausalLM.from_pretrained(folder))``).

    In Python the result is called as the model is: ``result.run(input_ids=...,
    attention_mask=..., cache=...)`` (``use_cache=True``, a constant of the graph, may be
    left out; the cache under either of its names, ``cache`` or ``past_key_values``, as a
    transformers cache of the exported structure or as its tensors by their ONNX names;
    :func:`~pt2onnx_transformers.generation.empty_cache` is the prompt's) returns what the
    model returns: the logits and the cache holding ``present``.

    ``cache="static"`` exports the graph onnxruntime-genai runs with ``past_present_share_buffer``
    (:mod:`.static`): the past inputs are buffers of ``max_length`` (an int, the longest
    sequence, prompt included), ``present`` has their shape, with the new tokens' keys and values
    written at positions ``attention_mask``'s length less ``input_ids``' onwards, and attention
    ignores the rows after the mask. Feed zero buffers for the prompt
    (:func:`~pt2onnx_transformers.generation.empty_cache`) and each ``present`` back; in Python
    the cache is a DynamicCache holding the buffers (:func:`~pt2onnx_transformers.static.buffers_cache`).
    """
    if isinstance(model, (str, os.PathLike)):
        if not is_checkpoint(model):
            raise TypeError(
                f"export_causal_lm takes a transformers PreTrainedModel or a checkpoint folder (a config.json and "
                f"*.safetensors weights); {os.fspath(model)!r} is neither"
            )
        export_options.setdefault("weights", model)
        model = empty_causal_lm(model)
    if not is_transformers_model(model):
        raise TypeError(f"export_causal_lm takes a transformers PreTrainedModel, got {type(model).__name__}")
    if cache == "static":
        from .static import export_static_causal_lm

        if max_length is None:
            raise ValueError(
                "export_causal_lm(cache='static') needs max_length=, the longest sequence, prompt included"
            )
        return export_static_causal_lm(
            model.eval(),
            max_length,
            batch=batch,
            sequence_length=sequence_length,
            past_sequence_length=past_sequence_length,
            **export_options,
        )
    if cache != "dynamic":
        raise ValueError(f"cache={cache!r}: 'dynamic' (the default) or 'static'")
    if max_length is not None:
        raise ValueError("max_length= sizes a static cache: pass cache='static' with it")
    inputs = causal_lm_inputs(
        model.eval(), batch=batch, sequence_length=sequence_length, past_sequence_length=past_sequence_length
    )
    export_options.setdefault("dynamic_shapes", "auto")
    result = pt2onnx.export(model, (), {**inputs, "use_cache": True}, **export_options)
    # run() and verify() take the cache by either name, whatever this transformers calls it
    # (5.24 renamed past_key_values to cache and still takes the old keyword).
    result.input_aliases.update(past_key_values="cache", cache="past_key_values")
    return result
