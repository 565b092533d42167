"""How far a quantized export is from the float model: output differences, greedy-token agreement."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree

import pt2onnx

__all__ = ["Accuracy", "TokenAgreement", "accuracy", "token_agreement"]


@dataclass(frozen=True)
class Accuracy:
    """The quantized export's floating outputs (onnxruntime) against the float model's (eager), over every input."""

    #: The largest ``|export - float|`` of any output element.
    max_abs_diff: float
    #: The largest ``|float|``: the scale ``max_abs_diff`` is to be read against.
    max_abs_float: float
    #: How many inputs were compared.
    inputs: int

    @property
    def relative(self) -> float:
        """``max_abs_diff / max_abs_float`` (inf when the float outputs are all 0)."""
        return self.max_abs_diff / self.max_abs_float if self.max_abs_float else float("inf")

    def __str__(self) -> str:
        return (
            f"max |quantized - float| = {self.max_abs_diff:.3g} over {self.inputs} input(s) "
            f"({self.relative:.2%} of the largest float output, {self.max_abs_float:.3g})"
        )


def accuracy(
    float_model: torch.nn.Module, quantized: pt2onnx.ExportResult, inputs: Iterable[tuple[Any, ...] | dict[str, Any]]
) -> Accuracy:
    """Run ``quantized`` in onnxruntime and ``float_model`` in PyTorch on each input and compare.

    Each input is a tuple of positional arguments or a dict of keyword arguments, as both
    models are called (each with its own copy). Outputs are paired in pytree order;
    non-floating ones are skipped.
    """
    diff = peak = 0.0
    count = 0
    for given in inputs:
        args, kwargs = ((), given) if isinstance(given, dict) else (tuple(given), {})
        # Each side gets its own copy: a model may grow an input in place (a transformers cache).
        with torch.no_grad():
            expected = pytree.tree_leaves(float_model(*copy.deepcopy(args), **copy.deepcopy(kwargs)))
        actual = pytree.tree_leaves(quantized.run(*copy.deepcopy(args), **copy.deepcopy(kwargs)))
        if len(actual) != len(expected):
            raise ValueError(f"the export returns {len(actual)} outputs, the float model {len(expected)}")
        for a, e in zip(actual, expected):
            if isinstance(e, torch.Tensor) and e.is_floating_point() and e.numel():
                diff = max(diff, (a.double() - e.double()).abs().max().item())
                peak = max(peak, e.double().abs().max().item())
        count += 1
    return Accuracy(diff, peak, count)


@dataclass(frozen=True)
class TokenAgreement:
    """Greedy continuations of the same prompts by the float model (eager) and the quantized export."""

    #: How many prompts were continued.
    prompts: int
    #: New tokens per prompt.
    new_tokens: int
    #: Prompts whose every new token is the float model's.
    identical: int
    #: The share of new tokens before the first that differs, averaged over prompts (1.0: all agree).
    prefix: float

    def __str__(self) -> str:
        return (
            f"{self.identical}/{self.prompts} prompts continued identically for {self.new_tokens} tokens; "
            f"{self.prefix:.1%} of new tokens agree before the first difference"
        )


def token_agreement(
    float_model: torch.nn.Module,
    quantized: pt2onnx.ExportResult,
    prompts: Sequence[torch.Tensor] | torch.Tensor,
    new_tokens: int = 8,
) -> TokenAgreement:
    """Greedy-decode each prompt with both models and compare the new tokens.

    ``quantized`` is a causal LM exported with its cache
    (``pt2onnx_transformers.export_causal_lm``), decoded by
    ``pt2onnx_transformers.greedy_decode``; ``float_model`` (a transformers causal LM) is
    decoded in eager, without a cache. ``prompts``: token ids, ``[prompts, length]`` or
    one 1-D tensor per prompt.
    """
    from pt2onnx_transformers import greedy_decode

    identical, prefix = 0, 0.0
    for prompt in prompts:
        ids = prompt.reshape(1, -1)
        expected = _eager_greedy(float_model, ids, new_tokens)[0, ids.shape[1] :]
        actual = greedy_decode(quantized, ids, new_tokens)[0, ids.shape[1] :]
        same = (expected == actual).long()
        agreeing = int(same.cumprod(0).sum())
        identical += agreeing == new_tokens
        prefix += agreeing / new_tokens
    return TokenAgreement(len(prompts), new_tokens, identical, prefix / max(len(prompts), 1))


def _eager_greedy(model: torch.nn.Module, ids: torch.Tensor, new_tokens: int) -> torch.Tensor:
    with torch.no_grad():
        for _ in range(new_tokens):
            logits = model(input_ids=ids, use_cache=False).logits
            ids = torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return ids
