"""onnxruntime-genai model folders: the exported causal LM, its ``genai_config.json`` and tokenizer.

:func:`export_genai_folder` exports a causal LM with :func:`~pt2onnx_transformers.export_causal_lm`
and writes a folder ``onnxruntime_genai.Model(folder)`` loads; :func:`save_genai_folder` writes
one from an export already made, :func:`genai_config` is the configuration alone. The schema is
the one onnxruntime-genai's model builder writes (``models/builder.py``, ``make_genai_config``),
read by its config loader (``src/config.cpp``), which refuses unknown keys and null ids.

The default graph grows its cache by concatenation (``present`` is the past and the new
tokens), so the config says ``past_present_share_buffer: false``: genai feeds each step's
``present`` back as the next step's past. A static-cache export
(``export_causal_lm(cache="static", max_length=N)``, :mod:`.static`) writes the new tokens
into past buffers of ``N``: its config says ``past_present_share_buffer: true`` and
``max_length: N``, and genai binds each layer's past and present to one buffer it allocates once.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import torch

import pt2onnx
from pt2onnx.errors import Pt2OnnxError

from .generation import PAST_PREFIX, PRESENT_PREFIX, static_cache_length
from .inputs import export_causal_lm, is_transformers_model

if TYPE_CHECKING:
    from transformers import PreTrainedConfig

__all__ = ["GENAI_TYPES", "GenaiError", "export_genai_folder", "genai_config", "save_genai_folder"]

#: ``config.model_type`` -> ``model.type`` of genai_config.json, for the types onnxruntime-genai
#: 0.18 runs under the same name as a plain decoder (one session, a key and a value cache per
#: layer). Every other causal LM runs as ``"decoder"``, genai's generic decoder-only type: the
#: same runtime without a name's particulars. GPT-2 is one of them: genai's ``"gpt2"`` takes
#: one combined past per layer (``past_%d``), which this pack's graph does not have.
GENAI_TYPES = {
    name: name
    for name in (
        "ernie4_5",
        "gemma",
        "gemma2",
        "gemma3_text",
        "granite",
        "internlm2",
        "llama",
        "mistral",
        "nemotron",
        "olmo",
        "phi",
        "phi3",
        "qwen2",
        "qwen3",
        "smollm3",
    )
}
GENERIC_TYPE = "decoder"
CONFIG_FILE = "genai_config.json"
MODEL_FILE = "model.onnx"

_TOKENS = ("input_ids", "attention_mask", "position_ids")
_PAST = re.compile(re.escape(PAST_PREFIX) + r"(\d+)\.(key|value)")
_PRESENT = re.compile(re.escape(PRESENT_PREFIX) + r"(\d+)\.(key|value)")
#: Search options genai shares with transformers' GenerationConfig, and genai's defaults
#: where the model's generation config leaves them unset (transformers 5 leaves them None).
_SEARCH_DEFAULTS: dict[str, Any] = {
    "do_sample": False,
    "no_repeat_ngram_size": 0,
    "repetition_penalty": 1.0,
    "temperature": 1.0,
    "top_k": 50,
    "top_p": 1.0,
}
#: Where the context length may be: ChatGLM's name, then Llama's and most others', GPT-2's, MPT's.
_CONTEXT_FIELDS = ("seq_length", "max_position_embeddings", "n_positions", "max_seq_len")


class GenaiError(Pt2OnnxError, ValueError):
    """The exported model or its config cannot be written as an onnxruntime-genai folder."""

    phase = "genai"


def genai_config(
    model: torch.nn.Module,
    result: pt2onnx.ExportResult,
    *,
    tokenizer: Any = None,
    max_length: int | None = None,
    filename: str = MODEL_FILE,
) -> dict[str, Any]:
    """The ``genai_config.json`` of ``result``, an export of ``model`` by :func:`export_causal_lm`.

    Filled as onnxruntime-genai's model builder fills it:

    * ``model.type``: :data:`GENAI_TYPES` of ``config.model_type``, ``"decoder"`` for the others;
    * ``model.decoder``: the graph's input and output names (``past_key_values.%d.key``,
      ``present.%d.key``, ...; ``position_ids`` only if the graph takes it); the number of
      layers, key/value heads and ``head_size`` read from the graph's past inputs, which are
      what genai feeds (the config's ``num_key_value_heads``, else ``num_attention_heads``; its
      ``head_dim``, else ``hidden_size // num_attention_heads``); ``hidden_size`` and
      ``num_attention_heads`` from the config; CPU session options;
    * ``context_length``: the config's ``seq_length``, ``max_position_embeddings``,
      ``n_positions`` or ``max_seq_len``, else ``max_length``;
    * ``eos_token_id`` (an int, or a list when there are several), ``bos_token_id`` and
      ``pad_token_id``: from the model's generation config, then its config, then
      ``tokenizer``; a missing ``bos_token_id`` or ``pad_token_id`` is the (first) eos id:
      genai reads ids as numbers and refuses null;
    * ``vocab_size``: the logits' last dim;
    * ``search``: ``max_length`` (``context_length`` unless given; a static cache's length
      unless given shorter), greedy or sampling options of the generation config
      (``do_sample``, ``temperature``, ``top_k``, ``top_p``, ``repetition_penalty``,
      ``no_repeat_ngram_size``; genai's defaults where unset), one beam, and
      ``past_present_share_buffer``: false for a graph that concatenates its cache, true for a
      static-cache export (past inputs of a static length, ``export_causal_lm(cache="static")``).

    Raises:
        GenaiError: the graph takes or returns more than genai feeds a decoder (``input_ids``,
            ``attention_mask``, ``position_ids``, a key and a value per layer): a transformers
            ``StaticCache`` (its token counter), a state-space or encoder-decoder cache; its
            layers' caches differ in shape; ``max_length`` exceeds a static cache's length; or
            the model names no end-of-sequence token, or no context length and no ``max_length``.
    """
    config = cast("PreTrainedConfig", model.config)
    text = config.get_text_config(decoder=True)
    layers, kv_heads, head_size = _decoder_cache(result)
    static_length = static_cache_length(result)
    if static_length is not None and max_length is not None and max_length > static_length:
        raise GenaiError(
            f"max_length {max_length} exceeds the static cache's {static_length}: genai writes no token past "
            "the graph's buffers",
            hint=f"pass max_length <= {static_length}, or export with cache='static', max_length={max_length}",
        )
    max_length = max_length if max_length is not None else static_length
    inputs = {name: name for name in _TOKENS if name in result.input_names}
    context_length = next((getattr(text, f) for f in _CONTEXT_FIELDS if getattr(text, f, None)), None)
    context_length = context_length or max_length
    if context_length is None:
        raise GenaiError(
            f"the config of {type(model).__name__} names no context length ({', '.join(_CONTEXT_FIELDS)})",
            hint="pass max_length=, the longest sequence genai generates",
        )
    bos, eos, pad = _special_token_ids(model, tokenizer)
    generation = getattr(model, "generation_config", None)
    search = {
        key: value if (value := getattr(generation, key, None)) is not None else default
        for key, default in _SEARCH_DEFAULTS.items()
    }
    return {
        "model": {
            "bos_token_id": bos,
            "context_length": int(context_length),
            "decoder": {
                "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
                "filename": filename,
                "head_size": head_size,
                "hidden_size": int(text.hidden_size),
                "inputs": {
                    **inputs,
                    "past_key_names": PAST_PREFIX + "%d.key",
                    "past_value_names": PAST_PREFIX + "%d.value",
                },
                "outputs": {
                    "logits": "logits",
                    "present_key_names": PRESENT_PREFIX + "%d.key",
                    "present_value_names": PRESENT_PREFIX + "%d.value",
                },
                "num_attention_heads": int(text.num_attention_heads),
                "num_hidden_layers": layers,
                "num_key_value_heads": kv_heads,
            },
            "eos_token_id": eos,
            "pad_token_id": pad,
            "type": GENAI_TYPES.get(config.model_type, GENERIC_TYPE),
            "vocab_size": _vocab_size(result, text),
        },
        "search": dict(
            sorted(
                {
                    **search,
                    "max_length": int(max_length if max_length is not None else context_length),
                    "min_length": 0,
                    "num_beams": 1,
                    "num_return_sequences": 1,
                    "past_present_share_buffer": static_length is not None,
                }.items()
            )
        ),
    }


def save_genai_folder(
    model: torch.nn.Module,
    result: pt2onnx.ExportResult,
    folder: str | os.PathLike[str],
    *,
    tokenizer: Any = None,
    max_length: int | None = None,
) -> list[Path]:
    """Write ``result`` (an export of ``model`` by :func:`export_causal_lm`) as an onnxruntime-genai folder.

    ``folder`` (made if missing) gets ``model.onnx`` with its weights in an external data file
    beside it, ``genai_config.json`` (:func:`genai_config`) and, if ``tokenizer`` is given (a
    transformers tokenizer), its files (``tokenizer.save_pretrained``), which
    ``onnxruntime_genai.Tokenizer`` reads. The config is made first: a model genai cannot run
    leaves the folder as it was. Returns the files written.
    """
    config = genai_config(model, result, tokenizer=tokenizer, max_length=max_length)
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    written = result.save(target / MODEL_FILE, external_data=True)
    config_path = target / CONFIG_FILE
    config_path.write_text(json.dumps(config, indent=4) + "\n")
    written.append(config_path)
    if tokenizer is not None:
        written.extend(Path(p) for p in tokenizer.save_pretrained(target))
    return written


def export_genai_folder(
    model: torch.nn.Module,
    folder: str | os.PathLike[str],
    *,
    tokenizer: Any = None,
    max_length: int | None = None,
    cache: Literal["dynamic", "static"] = "dynamic",
    **export_options: Any,
) -> pt2onnx.ExportResult:
    """Export a causal LM and write it as an onnxruntime-genai folder: ``onnxruntime_genai.Model(folder)`` loads it.

    :func:`export_causal_lm` (``export_options`` go to it; ``cache="static"`` exports buffers of
    ``max_length``, run with ``past_present_share_buffer: true``), then :func:`save_genai_folder`
    (``tokenizer``, ``max_length``). Returns the export's result (its report, ``verify``).
    """
    if not is_transformers_model(model):
        raise TypeError(f"export_genai_folder takes a transformers PreTrainedModel, got {type(model).__name__}")
    if getattr(model.config, "is_encoder_decoder", False):
        raise GenaiError(
            f"export_genai_folder writes a causal LM's folder, and {type(model).__name__} is an encoder-decoder model",
            hint="for Whisper, use pt2onnx_transformers.export_genai_whisper (genai runs no other encoder-decoder type)",
        )
    cache_options = {"cache": "static", "max_length": max_length} if cache == "static" else {"cache": cache}
    result = export_causal_lm(model, **cache_options, **export_options)
    save_genai_folder(model, result, folder, tokenizer=tokenizer, max_length=max_length)
    return result


def _decoder_cache(result: pt2onnx.ExportResult) -> tuple[int, int, int]:
    """Layers, key/value heads and head size of a graph genai can feed; GenaiError for any other graph."""
    past = [m for name in result.input_names if (m := _PAST.fullmatch(name))]
    present = [m for name in result.output_names if (m := _PRESENT.fullmatch(name))]
    other_inputs = [n for n in result.input_names if n not in _TOKENS and not _PAST.fullmatch(n)]
    other_outputs = [n for n in result.output_names if n != "logits" and not _PRESENT.fullmatch(n)]
    layers = len(past) // 2
    expected = {(str(i), kind) for i in range(layers) for kind in ("key", "value")}
    complete = (
        {m.groups() for m in past} == expected
        and {m.groups() for m in present} == expected
        and layers > 0
        and "input_ids" in result.input_names
        and "logits" in result.output_names
    )
    if other_inputs or other_outputs or not complete:
        extra = [*other_inputs, *other_outputs]
        found = f"it also has {', '.join(extra)}" if extra else "it has " + ", ".join(result.input_names)
        raise GenaiError(
            "onnxruntime-genai runs a decoder of inputs input_ids, attention_mask, position_ids and "
            "past_key_values.{i}.key/.value for every layer, outputs logits and present.{i}.key/.value; "
            f"{found}",
            hint="export a causal LM whose cache holds only attention keys and values with "
            "export_causal_lm (cache='static' for fixed buffers); a transformers StaticCache, state-space "
            "and encoder-decoder caches are not genai's decoder",
        )
    shapes: dict[str, tuple[Any, ...] | None] = {
        v.name: tuple(v.shape) if v.shape is not None else None
        for v in result.model.graph.inputs
        if v.name and _PAST.fullmatch(v.name)
    }
    kinds = {(s[1], s[3]) if s is not None and len(s) == 4 else None for s in shapes.values()}
    kind = next(iter(kinds)) if len(kinds) == 1 else None
    if kind is None or not all(isinstance(d, int) for d in kind):
        listed = ", ".join(f"{name} {shape}" for name, shape in shapes.items())
        raise GenaiError(
            f"onnxruntime-genai allocates every layer's past alike, (batch, kv_heads, length, head_size) with "
            f"static heads and size; the graph's are {listed}",
            hint="a model whose layers' caches differ in heads or head size cannot run in genai",
        )
    kv_heads, head_size = kind
    return layers, kv_heads, head_size


def _special_token_ids(model: torch.nn.Module, tokenizer: Any) -> tuple[int, int | list[int], int]:
    """bos, eos and pad ids: the generation config's, the config's, the tokenizer's; bos and pad default to eos."""
    config = cast("PreTrainedConfig", model.config)
    sources = [getattr(model, "generation_config", None), config.get_text_config(decoder=True), tokenizer]

    def resolve(attribute: str) -> Any:
        return next((v for s in sources if s is not None and (v := getattr(s, attribute, None)) is not None), None)

    eos = resolve("eos_token_id")
    if eos is None or eos == []:
        raise GenaiError(
            f"{type(model).__name__} names no eos_token_id (neither its generation config, its config "
            "nor the tokenizer): onnxruntime-genai needs the token that ends a sequence",
            hint="set model.generation_config.eos_token_id (an id or a list of ids), or pass the tokenizer",
        )
    eos_ids = [int(i) for i in eos] if isinstance(eos, (list, tuple)) else [int(eos)]
    bos, pad = resolve("bos_token_id"), resolve("pad_token_id")
    return (
        int(bos) if bos is not None else eos_ids[0],
        eos_ids if len(eos_ids) > 1 else eos_ids[0],
        int(pad) if pad is not None else eos_ids[0],
    )


def _vocab_size(result: pt2onnx.ExportResult, text: PreTrainedConfig) -> int:
    logits = next(v for v in result.model.graph.outputs if v.name == "logits")
    size = logits.shape[-1] if logits.shape is not None and logits.shape.rank() else None
    return size if isinstance(size, int) else int(text.vocab_size)
