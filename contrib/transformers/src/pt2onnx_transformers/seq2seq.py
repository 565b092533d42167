"""Encoder-decoder models (T5, BART, Marian, Pegasus, Whisper) as the graphs optimum exports.

* ``encoder_model.onnx``: ``input_ids``, ``attention_mask`` (Whisper: ``input_features``) ->
  ``last_hidden_state``;
* ``decoder_model.onnx``, the first decoding step: ``input_ids`` (the decoder's tokens),
  ``encoder_hidden_states``, ``encoder_attention_mask`` (not Whisper's) -> ``logits``,
  ``present.{i}.decoder.key``/``.value`` (self-attention) and ``present.{i}.encoder.key``/``.value``
  (cross-attention, computed here from ``encoder_hidden_states``);
* ``decoder_with_past_model.onnx``, every later step: the same inputs and
  ``past_key_values.{i}.decoder.*`` and ``past_key_values.{i}.encoder.*`` (the previous step's
  ``present``) -> the same outputs; the self-attention keys grow by the new tokens, the
  cross-attention ones are returned as they came;
* ``decoder_model_merged.onnx``: both decoder graphs as the branches of an ``If`` on a
  ``use_cache_branch`` input, over one copy of the weights (:mod:`.merged`).

Two decoder captures: whether a layer's cross-attention keys are computed or read from the cache
is ``EncoderDecoderCache.is_updated``, a Python flag (the cache's pytree context), so one captured
graph does one or the other.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx_ir as ir
import onnxruntime as ort
import torch
from torch.export import Dim

import pt2onnx

from . import merged
from .caches import cache_dims
from .inputs import cache_argument, example_device, is_transformers_model
from .merged import USE_CACHE_BRANCH

__all__ = ["Seq2SeqExport", "export_seq2seq", "seq2seq_greedy_decode"]

PAST_PREFIX = "past_key_values."
PRESENT_PREFIX = "present."


class _Decoder(torch.nn.Module):
    """One decoding step of an encoder-decoder model, called by the decoder graph's input names."""

    def __init__(self, model: torch.nn.Module, takes_mask: bool) -> None:
        super().__init__()
        self.model = model
        self.takes_mask = takes_mask
        self.cache = cache_argument(model)

    def forward(
        self,
        input_ids: torch.Tensor,
        encoder_hidden_states: torch.Tensor,
        encoder_attention_mask: torch.Tensor | None = None,
        past_key_values: Any = None,
    ) -> dict[str, Any]:
        extra = {"attention_mask": encoder_attention_mask} if self.takes_mask else {}
        out = self.model(
            decoder_input_ids=input_ids,
            encoder_outputs=(encoder_hidden_states,),
            use_cache=True,
            **extra,
            **{self.cache: past_key_values},
        )
        return {"logits": out.logits, "present": getattr(out, self.cache)}


def _dims() -> Any:
    made: dict[str, Any] = {}

    def dim(name: str, size: int) -> Any:
        if size < 2:
            return Dim.AUTO  # torch specializes sizes 0 and 1
        return made.setdefault(name, Dim(name))

    return dim


@dataclass
class Seq2SeqExport:
    """The encoder and decoder graphs of an encoder-decoder model (:func:`export_seq2seq`).

    Attributes:
        encoder: ``encoder_model.onnx``.
        decoder: ``decoder_model.onnx``, the first decoding step (no past).
        decoder_with_past: ``decoder_with_past_model.onnx``, every later step.
        decoder_start_token_id: the token the decoder starts from.
    """

    encoder: pt2onnx.ExportResult
    decoder: pt2onnx.ExportResult
    decoder_with_past: pt2onnx.ExportResult
    decoder_start_token_id: int
    _merged: ir.Model | None = field(default=None, init=False, repr=False)
    _merged_session: ort.InferenceSession | None = field(default=None, init=False, repr=False)

    def merged_decoder(self) -> ir.Model:
        """``decoder_model_merged.onnx``: both decoder graphs behind an ``If`` on ``use_cache_branch``
        (made once; :func:`~pt2onnx_transformers.merged.merge_decoders`)."""
        if self._merged is None:
            self._merged = merged.merge_decoders(self.decoder.model, self.decoder_with_past.model)
        return self._merged

    def merged_session(self) -> ort.InferenceSession:
        """An onnxruntime session of :meth:`merged_decoder` (made once)."""
        if self._merged_session is None:
            self._merged_session = merged.session(self.merged_decoder())
        return self._merged_session

    def save(self, folder: str | os.PathLike[str]) -> list[Path]:
        """Write ``encoder_model.onnx``, ``decoder_model.onnx``, ``decoder_with_past_model.onnx`` and
        ``decoder_model_merged.onnx`` into ``folder`` (made if missing); returns the files written."""
        path = Path(folder)
        path.mkdir(parents=True, exist_ok=True)
        written = []
        for name, result in self.graphs().items():
            written += result.save(path / f"{name}.onnx")
        return written + merged.save_model(self.merged_decoder(), path / "decoder_model_merged.onnx")

    def graphs(self) -> dict[str, pt2onnx.ExportResult]:
        """The graphs by their file names (without ``.onnx``), as optimum names them."""
        return {
            "encoder_model": self.encoder,
            "decoder_model": self.decoder,
            "decoder_with_past_model": self.decoder_with_past,
        }


def export_seq2seq(
    model: torch.nn.Module,
    *,
    batch: int = 2,
    encoder_sequence_length: int = 7,
    sequence_length: int = 3,
    past_sequence_length: int = 5,
    **export_options: Any,
) -> Seq2SeqExport:
    """Export an encoder-decoder model (``...ForConditionalGeneration``) as an encoder and two decoder graphs.

    Dynamic dims ``batch``, ``encoder_sequence_length`` (the encoder's tokens, its output and the
    cross-attention keys; a speech encoder's input is fixed by its config), ``sequence_length`` (the
    decoder's new tokens) and ``past_sequence_length`` (its self-attention past). The example sizes
    are the keyword arguments; ``export_options`` go to each :func:`pt2onnx.export`.
    """
    if not is_transformers_model(model) or not hasattr(model, "get_encoder"):
        raise TypeError(f"export_seq2seq takes a transformers encoder-decoder model, got {type(model).__name__}")
    model = model.eval()
    config: Any = model.config
    start = getattr(model.generation_config, "decoder_start_token_id", None)
    start = config.decoder_start_token_id if start is None else start
    if start is None:
        raise ValueError(f"{type(model).__name__} has no decoder_start_token_id in its config or generation_config")
    generator = torch.Generator().manual_seed(0)
    device = example_device(model)
    dim = _dims()
    encoder = model.get_encoder()  # type: ignore[operator]
    speech = "input_features" in inspect.signature(encoder.forward).parameters  # Whisper's: mel frames, not tokens
    if speech:
        # Whisper's encoder takes exactly 2 * max_source_positions frames: only the batch is dynamic.
        features = torch.randn(batch, config.num_mel_bins, 2 * config.max_source_positions, generator=generator)
        features = features.to(device, next(encoder.parameters()).dtype)
        encoder_inputs: dict[str, Any] = {"input_features": features}
        encoder_shapes: dict[str, Any] = {"input_features": {0: dim("batch", batch)}}
    else:
        ids = torch.randint(0, config.vocab_size, (batch, encoder_sequence_length), generator=generator).to(device)
        axes = {0: dim("batch", batch), 1: dim("encoder_sequence_length", encoder_sequence_length)}
        encoder_inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        encoder_shapes = {"input_ids": axes, "attention_mask": axes}
    encoder_result = pt2onnx.export(encoder, (), encoder_inputs, dynamic_shapes=encoder_shapes, **export_options)

    with torch.no_grad():
        states = encoder(**encoder_inputs).last_hidden_state
    step = _Decoder(model, takes_mask=not speech).eval()
    states_axes = {0: dim("batch", batch), 1: dim("encoder_sequence_length", states.shape[1])}
    inputs: dict[str, Any] = {
        "input_ids": torch.randint(0, config.vocab_size, (batch, sequence_length), generator=generator).to(device),
        "encoder_hidden_states": states,
    }
    shapes: dict[str, Any] = {
        "input_ids": {0: dim("batch", batch), 1: dim("sequence_length", sequence_length)},
        "encoder_hidden_states": states_axes,
    }
    if not speech:
        inputs["encoder_attention_mask"] = torch.ones(batch, states.shape[1], dtype=torch.int64, device=device)
        shapes["encoder_attention_mask"] = states_axes
    decoder = pt2onnx.export(step, (), inputs, dynamic_shapes=shapes, **export_options)

    with torch.no_grad():
        past_ids = torch.randint(0, config.vocab_size, (batch, past_sequence_length), generator=generator).to(device)
        past = step(**{**inputs, "input_ids": past_ids})["present"]
    with_past = pt2onnx.export(
        step,
        (),
        {**inputs, "past_key_values": past},
        dynamic_shapes={**shapes, "past_key_values": cache_dims(past, dim)},
        **export_options,
    )
    return Seq2SeqExport(encoder_result, decoder, with_past, int(start))


def _run(session: ort.InferenceSession, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    names = [o.name for o in session.get_outputs()]
    wanted = {i.name for i in session.get_inputs()}
    return dict(zip(names, session.run(names, {k: v for k, v in feeds.items() if k in wanted})))


def seq2seq_greedy_decode(
    exported: Seq2SeqExport,
    inputs: torch.Tensor,
    max_new_tokens: int,
    *,
    attention_mask: torch.Tensor | None = None,
    eos_token_id: int | None = None,
    pad_token_id: int = 0,
    merged: bool = False,
) -> torch.Tensor:
    """The decoder start token and up to ``max_new_tokens`` tokens, each the argmax of the last logits,
    decoded in onnxruntime as ``model.generate(inputs, do_sample=False, num_beams=1)`` decodes them.

    ``inputs`` is the encoder's input: token ids (with their ``attention_mask``, ones if None), or a
    speech model's ``input_features``. The encoder runs once; the first step runs ``decoder_model``,
    every later one ``decoder_with_past_model`` with the previous step's ``present`` as its past. With
    ``eos_token_id``, a sequence that produced it gets ``pad_token_id`` after it, and decoding stops
    when every sequence has. With ``merged``, every step runs ``decoder_model_merged`` instead, as
    optimum runs it: ``use_cache_branch`` false and a past of length 1 (zeros, unread) first.
    """
    if "input_features" in exported.encoder.input_names:
        encoder_feeds = {"input_features": inputs.numpy()}
        mask = None
    else:
        mask = (torch.ones_like(inputs) if attention_mask is None else attention_mask).to(torch.int64).numpy()
        encoder_feeds = {"input_ids": inputs.to(torch.int64).numpy(), "attention_mask": mask}
    states = _run(exported.encoder.session(), encoder_feeds)["last_hidden_state"]
    batch = states.shape[0]
    feeds: dict[str, np.ndarray] = {"encoder_hidden_states": states}
    if mask is not None:
        feeds["encoder_attention_mask"] = mask
    tokens = np.full((batch, 1), exported.decoder_start_token_id, dtype=np.int64)
    done = np.zeros(batch, dtype=bool)
    session = exported.merged_session() if merged else exported.decoder.session()
    if merged:
        feeds.update(_first_past(exported.decoder_with_past, batch))
        feeds[USE_CACHE_BRANCH] = np.array([False])
    for _ in range(max_new_tokens):
        outputs = _run(session, {**feeds, "input_ids": tokens[:, -1:]})
        next_ids = outputs["logits"][:, -1].argmax(-1).astype(np.int64)
        if eos_token_id is not None:
            next_ids = np.where(done, pad_token_id, next_ids)
            done |= next_ids == eos_token_id
        tokens = np.concatenate([tokens, next_ids[:, None]], axis=1)
        if done.all():
            break
        feeds.update(
            {
                PAST_PREFIX + n.removeprefix(PRESENT_PREFIX): v
                for n, v in outputs.items()
                if n.startswith(PRESENT_PREFIX)
            }
        )
        if merged:
            feeds[USE_CACHE_BRANCH] = np.array([True])
        else:
            session = exported.decoder_with_past.session()
    return torch.from_numpy(tokens)


def _first_past(with_past: pt2onnx.ExportResult, batch: int) -> dict[str, np.ndarray]:
    """The merged decoder's past inputs for its first step, which its no-past branch never reads:
    zeros of the batch and one position (optimum's choice)."""
    past = {}
    for value in with_past.model.graph.inputs:
        if value.name and value.name.startswith(PAST_PREFIX) and value.shape is not None:
            dims = [batch if i == 0 else d if isinstance(d, int) else 1 for i, d in enumerate(value.shape)]
            past[value.name] = np.zeros(dims, dtype=value.dtype.numpy() if value.dtype else np.float32)
    return past
