"""Greedy decoding with an exported causal LM in onnxruntime, feeding ``present`` back as the past.

The past starts empty (a dynamic cache) or as zero buffers of the graph's ``max_length`` (a
static cache, ``export_causal_lm(cache="static")``): the same loop runs both.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.utils._pytree as pytree

import pt2onnx

__all__ = ["empty_cache", "empty_past", "greedy_decode", "static_cache_length"]

PAST_PREFIX = "past_key_values."
PRESENT_PREFIX = "present."


def static_cache_length(result: pt2onnx.ExportResult) -> int | None:
    """The length of the buffers of a static-cache export (``export_causal_lm(cache="static")``): the static
    length every ``past_key_values.*`` input and ``present.*`` output shares. None for any other graph (a
    dynamic past, or a ``present`` longer than its past: a cache grown by concatenation)."""
    values = [*result.model.graph.inputs, *result.model.graph.outputs]
    lengths = {
        value.shape[2] if value.shape is not None and value.shape.rank() == 4 else None
        for value in values
        if (value.name or "").startswith((PAST_PREFIX, PRESENT_PREFIX))
    }
    length = next(iter(lengths)) if len(lengths) == 1 else None
    return length if isinstance(length, int) else None


def empty_past(result: pt2onnx.ExportResult, batch: int) -> dict[str, np.ndarray]:
    """The prompt's past for every ``past_key_values.*`` input, of its dtype: ``(batch, heads, 0, head_dim)``,
    or zero buffers ``(batch, heads, max_length, head_dim)`` where the graph's length is static."""
    past = {}
    for value in result.model.graph.inputs:
        name = value.name or ""
        if not name.startswith(PAST_PREFIX):
            continue
        if value.shape is None or value.shape.rank() != 4:
            raise ValueError(f"{name} is not a (batch, heads, length, head_dim) key or value: {value.shape}")
        heads, length, head_dim = value.shape[1], value.shape[2], value.shape[3]
        if not isinstance(heads, int) or not isinstance(head_dim, int):
            raise ValueError(f"{name}: an empty past needs static heads and head_dim, not {value.shape}")
        shape = (batch, heads, length if isinstance(length, int) else 0, head_dim)
        dtype = value.dtype.numpy() if value.dtype is not None else np.dtype(np.float32)
        past[name] = np.zeros(shape, dtype=dtype)
    return past


def empty_cache(result: pt2onnx.ExportResult, batch: int) -> Any:
    """The cache argument of the prompt step in Python: the exported cache's type and layers, every tensor
    of length 0 (:func:`empty_past` as torch tensors), for ``result.run``/``result.verify``.

    ``result`` is an export of a causal LM with its cache (:func:`pt2onnx_transformers.export_causal_lm`).
    """
    spec = result.program.call_spec.in_spec
    keywords = list(spec.child(1).context) if spec is not None else []
    names = [name for name in ("cache", "past_key_values") if name in keywords]
    if spec is None or not names:
        raise ValueError("the exported model takes no cache argument (export it with export_causal_lm)")
    cache = spec.child(1).child(keywords.index(names[0]))
    past = [torch.from_numpy(tensor) for tensor in empty_past(result, batch).values()]
    if len(past) != cache.num_leaves:
        raise ValueError(
            f"the cache holds {cache.num_leaves} tensors, but the model takes {len(past)} past_key_values.*"
        )
    return pytree.tree_unflatten(past, cache)


def greedy_decode(result: pt2onnx.ExportResult, input_ids: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    """The prompt and ``max_new_tokens`` tokens, each the argmax of the last logits, decoded in onnxruntime.

    ``result`` is an export of a causal LM with its cache (:func:`pt2onnx_transformers.export_causal_lm`):
    the prompt runs with an empty past (zero buffers for a static cache), every next step with the
    previous step's ``present``.

    Raises:
        ValueError: a static cache's buffers are shorter than the prompt and the new tokens.
    """
    max_length = static_cache_length(result)
    if max_length is not None and input_ids.shape[1] + max_new_tokens > max_length:
        raise ValueError(
            f"the prompt ({input_ids.shape[1]} tokens) and {max_new_tokens} new tokens do not fit the static "
            f"cache of max_length {max_length}"
        )
    session = result.session()
    names = result.output_names
    takes_mask = "attention_mask" in result.input_names
    batch = input_ids.shape[0]
    tokens = input_ids
    step_ids = input_ids.numpy()
    past = empty_past(result, batch)
    length = 0
    for _ in range(max_new_tokens):
        feeds = {"input_ids": step_ids, **past}
        length += step_ids.shape[1]
        if takes_mask:
            feeds["attention_mask"] = np.ones((batch, length), dtype=np.int64)
        outputs = dict(zip(names, session.run(names, feeds)))
        next_ids = outputs["logits"][:, -1].argmax(-1)[:, None].astype(np.int64)
        tokens = torch.cat([tokens, torch.from_numpy(next_ids)], dim=1)
        past = {
            PAST_PREFIX + n.removeprefix(PRESENT_PREFIX): v for n, v in outputs.items() if n.startswith(PRESENT_PREFIX)
        }
        step_ids = next_ids
    return tokens
