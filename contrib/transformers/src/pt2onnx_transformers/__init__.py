"""pt2onnx-transformers: Hugging Face models exported as they are.

Installed, the pack is picked up by every export (entry point ``transformers``); block
it with ``disable=["transformers"]`` or ``pt2onnx -p no:transformers``. It registers:

* capture preparations: every cache type of the installed transformers as a pytree node
  with named leaves (:mod:`.caches`), patches of untraceable model code (:mod:`.patches`),
  and a hint naming the dynamic dims of tokens, masks and caches (:mod:`.inputs`);
* a handler for the mixture-of-experts op ``transformers::grouped_mm_fallback``
  (:mod:`.moe`).

:func:`export_causal_lm` exports a causal LM with its cache in one call (CLI:
``pt2onnx-transformers causal-lm MODEL -o model.onnx``, MODEL a config or checkpoint, see
:mod:`.cli`); :func:`greedy_decode` runs the exported graph;
:func:`export_genai_folder` writes it as an onnxruntime-genai model folder with its
``genai_config.json`` (:mod:`.genai`; CLI: ``pt2onnx-transformers causal-lm MODEL --genai FOLDER``).
``export_causal_lm(model, cache="static", max_length=N)`` exports past buffers of ``N`` that
``present`` returns written in place, which genai runs with ``past_present_share_buffer: true``
(:mod:`.static`; CLI: ``--static-cache --max-length N``). ``export_causal_lm(folder)`` exports a
checkpoint folder without loading it (:func:`empty_causal_lm`, :mod:`.checkpoint`).
:func:`export_seq2seq` exports an encoder-decoder model (T5, BART, Marian, Pegasus, Whisper) as
optimum's three graphs with the cache, :func:`seq2seq_greedy_decode` decodes with them
(:mod:`.seq2seq`; CLI: ``pt2onnx-transformers seq2seq MODEL -o FOLDER``);
:func:`export_genai_whisper` writes Whisper as the onnxruntime-genai folder genai's model builder
writes (:mod:`.genai_whisper`; CLI: ``pt2onnx-transformers seq2seq WHISPER --genai FOLDER``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pt2onnx.plugin import CustomOpRegistrar, PreparationRegistrar, hookimpl

from . import moe
from .checkpoint import empty_causal_lm
from .genai import export_genai_folder, genai_config, save_genai_folder
from .genai_whisper import GenaiWhisper, export_genai_whisper
from .generation import empty_cache, greedy_decode
from .inputs import cache_argument, causal_lm_inputs, export_causal_lm
from .seq2seq import Seq2SeqExport, export_seq2seq, seq2seq_greedy_decode

if TYPE_CHECKING:
    from .static import buffers_cache, static_cache_inputs

__all__ = [
    "GenaiWhisper",
    "Seq2SeqExport",
    "buffers_cache",
    "cache_argument",
    "causal_lm_inputs",
    "empty_causal_lm",
    "empty_cache",
    "export_causal_lm",
    "export_genai_folder",
    "export_genai_whisper",
    "export_seq2seq",
    "genai_config",
    "greedy_decode",
    "save_genai_folder",
    "seq2seq_greedy_decode",
    "static_cache_inputs",
]

# Every export loads this plugin, so importing it must not import transformers: the names whose
# modules subclass transformers' types are imported on first use.
_LAZY = {"buffers_cache": ".static", "static_cache_inputs": ".static"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


@hookimpl
def pt2onnx_register_capture_preparations(register: PreparationRegistrar) -> None:
    from . import caches, inputs, patches

    caches.register(register)
    patches.register(register)
    register.dynamic_shapes("transformers.dims", inputs.dims_hint)


@hookimpl
def pt2onnx_register_custom_ops(register: CustomOpRegistrar) -> None:
    register.expand("transformers::grouped_mm_fallback", moe.grouped_mm_fallback)
