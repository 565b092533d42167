"""A causal LM built from a checkpoint folder without its weights, for an export that streams them.

:func:`empty_causal_lm` builds the model of a checkpoint's ``config.json`` on the ``meta``
device (shapes and dtypes, no memory) and rebuilds the buffers no checkpoint holds (a
rotary embedding's ``inv_freq``, Gemma's ``embed_scale``, ...) on the CPU the way
``from_pretrained`` does: each module's ``_init_weights`` recomputes them. Exported with
``weights=`` the checkpoint, each weight is then read from its file as it is written, so the
export holds about one tensor at a time (:doc:`large_models`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from pt2onnx.errors import WeightsError

from .caches import _slots

if TYPE_CHECKING:
    from transformers import PreTrainedModel

__all__ = ["empty_causal_lm", "is_checkpoint", "materialized_cache", "on_meta", "past_without_weights"]

#: What ``save_pretrained`` writes the weights as.
WEIGHT_FILES = ("*.safetensors", "model.safetensors.index.json")


def is_checkpoint(name: str | os.PathLike[str]) -> bool:
    """Whether ``name`` is a local folder holding a ``config.json`` and safetensors weights."""
    path = Path(name)
    return (path / "config.json").is_file() and any(any(path.glob(pattern)) for pattern in WEIGHT_FILES)


def on_meta(model: torch.nn.Module) -> bool:
    """Whether ``model``'s parameters are on the ``meta`` device (built without their values)."""
    return any(p.is_meta for p in model.parameters())


def empty_causal_lm(checkpoint: str | os.PathLike[str]) -> PreTrainedModel:
    """The causal LM of ``checkpoint``'s config, its parameters on ``meta``, its computed buffers real.

    The model is built in the checkpoint's dtype, as ``from_pretrained`` loads it. Export it
    with ``weights=checkpoint``; it cannot run eagerly (``result.verify(..., _eager=real)``
    compares with a loaded model). A buffer the model's ``_init_weights`` does not recompute
    raises a :class:`~pt2onnx.errors.WeightsError` naming it rather than exporting garbage.
    """
    from transformers import AutoConfig, AutoModelForCausalLM

    if not is_checkpoint(checkpoint):
        raise WeightsError(
            f"{os.fspath(checkpoint)!r} is not a checkpoint folder: it needs a config.json and the "
            "*.safetensors weights save_pretrained writes"
        )
    config = AutoConfig.from_pretrained(checkpoint)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=config.dtype or torch.float32)
    _rebuild_computed_buffers(model)
    return model.eval()


def _rebuild_computed_buffers(model: PreTrainedModel) -> None:
    """Each non-persistent buffer made real on the CPU and recomputed by its module's ``_init_weights``.

    Filled first with a value no init leaves (NaN, or the integer minimum), so a buffer its
    model does not recompute is found, not exported.
    """
    buffers = list(model.named_non_persistent_buffers())
    owners: dict[str, torch.nn.Module] = {}
    for key, buffer in buffers:
        owner_name, _, attribute = key.rpartition(".")
        owner = model.get_submodule(owner_name)
        owner.register_buffer(attribute, torch.full_like(buffer, _unset(buffer.dtype), device="cpu"), persistent=False)
        owners[owner_name] = owner
    for owner in owners.values():
        model._init_weights(owner)
    unset = [key for key, buffer in buffers if _still_unset(model.get_buffer(key))]
    if unset:
        raise WeightsError(
            f"{type(model).__name__} computes buffers that are in no checkpoint and that its _init_weights "
            f"does not rebuild: {', '.join(unset)}. Build the model yourself (with those modules off the "
            "meta device, see docs/large_models.md) and pass it to export_causal_lm with weights=CHECKPOINT"
        )


def _unset(dtype: torch.dtype) -> Any:
    if dtype.is_floating_point or dtype.is_complex:
        return float("nan")
    if dtype == torch.bool:
        return False
    return torch.iinfo(dtype).min


def _still_unset(buffer: torch.Tensor) -> bool:
    if buffer.numel() == 0 or buffer.dtype == torch.bool:
        return False
    if buffer.dtype.is_floating_point or buffer.dtype.is_complex:
        return bool(buffer.isnan().all())
    return bool((buffer == torch.iinfo(buffer.dtype).min).all())


def materialized_cache(cache: Any, seed: int) -> Any:
    """``cache`` (a transformers cache a meta-device model returned) with each tensor real: random
    values of its shape and dtype, as example inputs of an export need values, not weights."""
    generator = torch.Generator().manual_seed(seed)
    for layer in cache.layers:
        for _, attribute, index in _slots(layer):
            value = getattr(layer, attribute) if index is None else getattr(layer, attribute)[index]
            if not value.is_meta:
                continue
            real = torch.randn(value.shape, generator=generator).to(value.dtype)
            if index is None:
                setattr(layer, attribute, real)
            else:
                getattr(layer, attribute)[index] = real
    return cache


def past_without_weights(model: torch.nn.Module, past_ids: torch.Tensor, name: str, empty: Any, seed: int) -> Any:
    """The cache a meta-device ``model`` returns for ``past_ids`` (its shapes and layer types), holding
    random values: the example past of an export that never loads the weights.

    ``name`` is the model's cache argument and ``empty`` the cache to fill.
    """
    # torch's meta kernel of grouped_mm takes bfloat16 only (its CPU kernel any float): mixture-of-experts
    # layers run their shape-only pass as batched matmuls, which give the same shapes.
    grouped = getattr(model.config, "_experts_implementation", None) == "grouped_mm"
    if grouped:
        model.set_experts_implementation("batched_mm")  # type: ignore[operator]
    try:
        with torch.no_grad():
            past = getattr(model(input_ids=past_ids.to("meta"), use_cache=True, **{name: empty}), name)
    finally:
        if grouped:
            model.set_experts_implementation("grouped_mm")  # type: ignore[operator]
    return materialized_cache(past, seed)
