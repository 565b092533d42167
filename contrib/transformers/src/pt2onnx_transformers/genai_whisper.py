"""Whisper as an onnxruntime-genai model folder: the graphs and names genai's model builder writes.

onnxruntime-genai runs Whisper (``model.type: "whisper"``) from two graphs:

* ``encoder.onnx``: ``audio_features`` (batch, mel bins, 3000 frames) -> ``hidden_states`` and each
  decoder layer's cross-attention keys and values, ``present_key_cross_{i}``/``present_value_cross_{i}``
  (batch, heads, 1500, head size): computed once per audio;
* ``decoder.onnx``: ``input_ids``, ``past_key_self_{i}``/``past_value_self_{i}`` (the decoder's own
  past, empty at the first step, when ``input_ids`` is the whole prompt) and
  ``past_key_cross_{i}``/``past_value_cross_{i}`` (the encoder's) -> ``logits`` and
  ``present_key_self_{i}``/``present_value_self_{i}``, the past and the new tokens' concatenated.

genai feeds each step's present back as the next past (``past_present_share_buffer: false``), and
positions count from the past's length. It fixes the audio at 3000 frames (30 s): a model whose
``max_source_positions`` is not 1500 cannot run there. With a feature extractor, the folder also
gets ``audio_processor_config.json``, which genai's ``MultiModalProcessor`` reads to turn audio into
``audio_features``; without one, feed them with ``Generator.set_model_input("audio_features", ...)``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch
from torch.export import Dim

import pt2onnx

from .genai import CONFIG_FILE, GenaiError, _special_token_ids
from .inputs import cache_argument, example_device, is_transformers_model

__all__ = [
    "GenaiWhisper",
    "audio_processor_config",
    "export_genai_whisper",
    "genai_whisper_config",
    "save_genai_whisper",
]

ENCODER_FILE = "encoder.onnx"
DECODER_FILE = "decoder.onnx"
AUDIO_PROCESSOR_FILE = "audio_processor_config.json"
#: onnxruntime-genai 0.18 refuses any other number of frames for Whisper ("Whisper uses num_frames = 3000").
FRAMES = 3000


class _Encoder(torch.nn.Module):
    """The encoder, and each decoder layer's cross-attention keys and values of its output."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.encoder = model.get_encoder()
        self.layers: Any = model.model.decoder.layers

    def forward(self, audio_features: torch.Tensor) -> dict[str, torch.Tensor]:
        states = self.encoder(audio_features).last_hidden_state
        outputs = {"hidden_states": states}
        for i, layer in enumerate(self.layers):
            attention = layer.encoder_attn
            heads = (states.shape[0], -1, attention.num_heads, attention.head_dim)
            outputs[f"present_key_cross_{i}"] = attention.k_proj(states).view(heads).transpose(1, 2)
            outputs[f"present_value_cross_{i}"] = attention.v_proj(states).view(heads).transpose(1, 2)
        return outputs


class _Decoder(torch.nn.Module):
    """One decoding step over the self-attention past and the encoder's cross-attention keys, by genai's names."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.decoder: Any = model.model.decoder
        self.proj_out = model.proj_out
        self.width = int(model.config.d_model)
        self.cache = cache_argument(self.decoder)

    def forward(self, input_ids: torch.Tensor, **past: torch.Tensor) -> dict[str, torch.Tensor]:
        from transformers.cache_utils import DynamicCache, EncoderDecoderCache

        layers = range(len(self.decoder.layers))
        own = DynamicCache([(past[f"past_key_self_{i}"], past[f"past_value_self_{i}"]) for i in layers])
        cross = DynamicCache([(past[f"past_key_cross_{i}"], past[f"past_value_cross_{i}"]) for i in layers])
        cache = EncoderDecoderCache(own, cross)
        cache.is_updated = dict.fromkeys(layers, True)  # cross-attention reads its keys from the cache
        # Cross-attention runs only when it is given encoder states, which the filled cache makes unread.
        unread = past["past_key_cross_0"].new_zeros(input_ids.shape[0], 1, self.width)
        out = self.decoder(input_ids=input_ids, encoder_hidden_states=unread, use_cache=True, **{self.cache: cache})
        outputs = {"logits": self.proj_out(out.last_hidden_state)}
        for i, layer in enumerate(cast("list[Any]", own.layers)):
            outputs[f"present_key_self_{i}"] = layer.keys
            outputs[f"present_value_self_{i}"] = layer.values
        return outputs


@dataclass
class GenaiWhisper:
    """The two graphs of a Whisper model for onnxruntime-genai (:func:`export_genai_whisper`).

    Attributes:
        encoder: ``encoder.onnx``.
        decoder: ``decoder.onnx``.
    """

    encoder: pt2onnx.ExportResult
    decoder: pt2onnx.ExportResult


def _check_whisper(model: torch.nn.Module) -> None:
    config: Any = getattr(model, "config", None)
    if not is_transformers_model(model) or getattr(config, "model_type", None) != "whisper":
        raise GenaiError(
            f"onnxruntime-genai's encoder-decoder type is Whisper's; got {type(model).__name__}",
            hint="pass a WhisperForConditionalGeneration; export other encoder-decoder models with export_seq2seq",
        )
    if 2 * config.max_source_positions != FRAMES:
        raise GenaiError(
            f"onnxruntime-genai runs Whisper on {FRAMES} frames (30 s of audio), and this model's encoder takes "
            f"2 * max_source_positions = {2 * config.max_source_positions}",
            hint=f"export a model with max_source_positions={FRAMES // 2}, as every released Whisper has",
        )


def export_genai_whisper(
    model: torch.nn.Module,
    folder: str | os.PathLike[str] | None = None,
    *,
    feature_extractor: Any = None,
    tokenizer: Any = None,
    max_length: int | None = None,
    batch: int = 2,
    sequence_length: int = 3,
    past_sequence_length: int = 5,
    **export_options: Any,
) -> GenaiWhisper:
    """Export a Whisper model as onnxruntime-genai runs it, and write the folder if ``folder`` is given.

    Dims ``batch_size``, ``sequence_length`` and ``past_sequence_length`` are dynamic, the audio's 3000
    frames static; the example sizes are the keyword arguments, ``export_options`` go to each
    :func:`pt2onnx.export`. The folder gets ``encoder.onnx`` and ``decoder.onnx`` with their weights in
    external data files, ``genai_config.json`` (:func:`genai_whisper_config`), the tokenizer's files
    with ``tokenizer`` and ``audio_processor_config.json`` with ``feature_extractor`` (a transformers
    ``WhisperFeatureExtractor``). The config is made before anything is written.

    Raises:
        GenaiError: the model is not a Whisper model, its encoder does not take 3000 frames, or it
            names no end-of-sequence token.
    """
    _check_whisper(model)
    if folder is not None:
        _special_token_ids(model, tokenizer)  # a model genai cannot stop fails before two exports
    model = model.eval()
    config: Any = model.config
    device = example_device(model)
    generator = torch.Generator().manual_seed(0)
    dtype = next(model.parameters()).dtype
    features = torch.randn(batch, config.num_mel_bins, FRAMES, generator=generator).to(device, dtype)
    batch_dim = Dim("batch_size")
    encoder_module = _Encoder(model).eval()
    encoder = pt2onnx.export(encoder_module, (features,), dynamic_shapes=({0: batch_dim},), **export_options)

    with torch.no_grad():
        cross = encoder_module(features)
    heads = config.decoder_attention_heads
    self_past = (batch, heads, past_sequence_length, config.d_model // heads)
    past: dict[str, torch.Tensor] = {}
    past_dims: dict[str, Any] = {}
    for i in range(config.decoder_layers):
        for kind in ("key", "value"):
            past[f"past_{kind}_self_{i}"] = torch.randn(*self_past, generator=generator).to(device, dtype)
            past_dims[f"past_{kind}_self_{i}"] = {0: batch_dim, 2: Dim("past_sequence_length")}
            past[f"past_{kind}_cross_{i}"] = cross[f"present_{kind}_cross_{i}"]
            past_dims[f"past_{kind}_cross_{i}"] = {0: batch_dim}
    ids = torch.randint(0, config.vocab_size, (batch, sequence_length), generator=generator).to(device)
    decoder = pt2onnx.export(
        _Decoder(model).eval(),
        (ids,),
        past,
        dynamic_shapes={"input_ids": {0: batch_dim, 1: Dim("sequence_length")}, "past": past_dims},
        **export_options,
    )
    exported = GenaiWhisper(encoder, decoder)
    if folder is not None:
        save_genai_whisper(
            model, exported, folder, feature_extractor=feature_extractor, tokenizer=tokenizer, max_length=max_length
        )
    return exported


def genai_whisper_config(
    model: torch.nn.Module, exported: GenaiWhisper, *, tokenizer: Any = None, max_length: int | None = None
) -> dict[str, Any]:
    """The ``genai_config.json`` of a Whisper export, as genai's model builder writes it for Whisper.

    ``context_length`` is ``max_target_positions``; ``search.max_length`` is ``max_length`` (the
    prompt's tokens included), else ``max_target_positions``; greedy search on one beam, genai's
    defaults elsewhere; eos, bos and pad ids as :func:`~pt2onnx_transformers.genai_config` finds them.
    """
    _check_whisper(model)
    config: Any = model.config
    bos, eos, pad = _special_token_ids(model, tokenizer)
    session = {"log_id": "onnxruntime-genai", "provider_options": []}
    logits = next(v for v in exported.decoder.model.graph.outputs if v.name == "logits")
    vocab = logits.shape[-1] if logits.shape is not None and isinstance(logits.shape[-1], int) else config.vocab_size

    def part(filename: str, heads: int, layers: int, names: dict[str, dict[str, str]]) -> dict[str, Any]:
        return {
            "session_options": session,
            "filename": filename,
            "head_size": config.d_model // heads,
            "hidden_size": config.d_model,
            **names,
            "num_attention_heads": heads,
            "num_hidden_layers": layers,
            "num_key_value_heads": heads,
        }

    decoder_names = {
        "inputs": {
            "input_ids": "input_ids",
            "past_key_names": "past_key_self_%d",
            "past_value_names": "past_value_self_%d",
            "cross_past_key_names": "past_key_cross_%d",
            "cross_past_value_names": "past_value_cross_%d",
        },
        "outputs": {
            "logits": "logits",
            "present_key_names": "present_key_self_%d",
            "present_value_names": "present_value_self_%d",
        },
    }
    encoder_names = {
        "inputs": {"audio_features": "audio_features"},
        "outputs": {
            "encoder_hidden_states": "hidden_states",
            "cross_present_key_names": "present_key_cross_%d",
            "cross_present_value_names": "present_value_cross_%d",
        },
    }
    return {
        "model": {
            "bos_token_id": bos,
            "context_length": int(config.max_target_positions),
            "decoder": part(DECODER_FILE, config.decoder_attention_heads, config.decoder_layers, decoder_names),
            "encoder": part(ENCODER_FILE, config.encoder_attention_heads, config.encoder_layers, encoder_names),
            "eos_token_id": eos,
            "pad_token_id": pad,
            "type": "whisper",
            "vocab_size": int(vocab),
        },
        "search": {
            "do_sample": False,
            "max_length": int(max_length if max_length is not None else config.max_target_positions),
            "min_length": 0,
            "no_repeat_ngram_size": 0,
            "num_beams": 1,
            "num_return_sequences": 1,
            "past_present_share_buffer": False,
            "repetition_penalty": 1.0,
            "temperature": 1.0,
            "top_k": 1,
            "top_p": 1.0,
        },
    }


def audio_processor_config(feature_extractor: Any) -> dict[str, Any]:
    """``audio_processor_config.json``: the log-mel features genai computes from audio, with the
    feature extractor's window, hop, chunk and mel bins (the pipeline genai's model builder writes)."""
    n_fft, hop = int(feature_extractor.n_fft), int(feature_extractor.hop_length)
    stft = {"n_fft": n_fft, "frame_length": n_fft, "hop_length": hop}
    mel = {
        "chunk_size": int(feature_extractor.chunk_length),
        "hop_length": hop,
        "n_fft": n_fft,
        "n_mel": int(feature_extractor.feature_size),
    }
    return {
        "feature_extraction": {
            "sequence": [
                {"operation": {"name": "audio_decoder", "type": "AudioDecoder"}},
                {"operation": {"name": "STFT", "type": "STFTNorm", "attrs": stft}},
                {"operation": {"name": "log_mel_spectrogram", "type": "LogMelSpectrum", "attrs": mel}},
            ]
        }
    }


def save_genai_whisper(
    model: torch.nn.Module,
    exported: GenaiWhisper,
    folder: str | os.PathLike[str],
    *,
    feature_extractor: Any = None,
    tokenizer: Any = None,
    max_length: int | None = None,
) -> list[Path]:
    """Write ``exported`` as an onnxruntime-genai folder (:func:`export_genai_whisper`); returns the files written."""
    config = genai_whisper_config(model, exported, tokenizer=tokenizer, max_length=max_length)
    processor = audio_processor_config(feature_extractor) if feature_extractor is not None else None
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    written = exported.encoder.save(target / ENCODER_FILE, external_data=True)
    written += exported.decoder.save(target / DECODER_FILE, external_data=True)
    files = {CONFIG_FILE: config, AUDIO_PROCESSOR_FILE: processor}
    for name, content in files.items():
        if content is not None:
            (target / name).write_text(json.dumps(content, indent=4) + "\n")
            written.append(target / name)
    if tokenizer is not None:
        written.extend(Path(p) for p in cast("list[str]", tokenizer.save_pretrained(target)))
    return written
