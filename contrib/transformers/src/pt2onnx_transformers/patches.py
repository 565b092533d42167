"""Per-architecture patches: model code torch.export cannot trace, swapped while capture runs.

Each patch is a capture preparation ``patch(model)``: a context manager for the models
that need it, None for the others. The swap is a module attribute, made under the
capture lock and restored on exit, so eager calls elsewhere never see it.

* ``mamba_selective_scan``: Mamba's slow path runs its selective scan as a Python loop
  over the sequence, so torch specializes the sequence length. The patch runs the same
  recurrence through ``torch._higher_order_ops.scan.scan`` (an ONNX ``Scan``), so the
  length stays dynamic.
* ``sliding_window_layers``: a ``DynamicSlidingWindowLayer`` counts tokens in a Python
  int, which a trace bakes into the mask sizes. While capturing, it updates and measures
  itself as a plain ``DynamicLayer`` (the sliding window still applies through the
  mask), as transformers' own exporter does.
* ``fsmt_padding_mask``: FSMT drops its decoder's padding mask when it masks nothing
  (``if not padding_mask.any()``), a branch on tensor values no trace takes. While
  capturing, the mask is always kept: a mask of no padding changes no attention weight.
* ``eager_experts``: the ``eager`` implementation of transformers' mixture-of-experts
  layers loops over the experts some token picked (``expert_hit = (...).nonzero()``), a
  loop over tensor values no trace takes. OpenAI's privacy filter asks for it by default,
  and any model can be loaded with it. While capturing, those layers run ``grouped_mm``,
  the same sums in one grouped product per expert (the pack's handler of
  ``transformers::grouped_mm_fallback``).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.functional as F

from pt2onnx.plugin import PreparationRegistrar

from .inputs import is_transformers_model

__all__ = [
    "eager_experts",
    "fsmt_padding_mask",
    "mamba_selective_scan",
    "register",
    "scanned_selective_scan",
    "sliding_window_layers",
]

_MAMBA = "transformers.models.mamba.modeling_mamba"
_FSMT = "transformers.models.fsmt.modeling_fsmt"


@contextlib.contextmanager
def _swapped(owner: Any, replacements: dict[str, Any]) -> Iterator[None]:
    originals = {name: getattr(owner, name) for name in replacements}
    try:
        for name, value in replacements.items():
            setattr(owner, name, value)
        yield
    finally:
        for name, value in originals.items():
            setattr(owner, name, value)


def scanned_selective_scan(
    hidden_states: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
    z: torch.Tensor | None = None,
    delta_bias: torch.Tensor | None = None,
    delta_softplus: bool = False,
    return_last_state: bool = False,
    **kwargs: Any,
) -> Any:
    """transformers' ``mamba_selective_scan`` (its recurrent path), with the loop over time as one ``scan``."""
    from torch._higher_order_ops.scan import scan

    input_dtype = hidden_states.dtype
    if delta_bias is not None:
        dt = dt + delta_bias.to(dt.dtype)[..., None]
    if delta_softplus:
        dt = F.softplus(dt)
    B, C = B.transpose(1, 2), C.transpose(1, 2)
    discrete_A = torch.exp(A[None, :, None, :] * dt[:, :, :, None])
    deltaB_u = dt[:, :, :, None] * B[:, None, :, :].float() * hidden_states[:, :, :, None].float()

    def step(state: torch.Tensor, x: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> Any:
        a, bu, c = x
        state = a * state + bu
        return state, torch.matmul(state.to(input_dtype), c.unsqueeze(-1))[:, :, 0]

    batch, channels, _, states = deltaB_u.shape
    initial = torch.zeros(batch, channels, states, dtype=deltaB_u.dtype, device=hidden_states.device)
    # Time first: scan walks dim 0 of every input.
    xs = (discrete_A.permute(2, 0, 1, 3), deltaB_u.permute(2, 0, 1, 3), C.permute(1, 0, 2))
    ssm_state, outputs = scan(step, initial, xs)
    scan_output = outputs.permute(1, 2, 0)
    if D is not None:
        scan_output = scan_output + hidden_states * D[None, :, None]
    if z is not None:
        scan_output = scan_output * F.silu(z)
    return (scan_output, ssm_state) if return_last_state else scan_output


def mamba_selective_scan(model: Any) -> contextlib.AbstractContextManager[None] | None:
    """The scan patch, for models with a ``MambaMixer``."""
    module = sys.modules.get(_MAMBA)
    if module is None or not any(isinstance(m, module.MambaMixer) for m in model.modules()):
        return None
    return _swapped(module, {"mamba_selective_scan": scanned_selective_scan})


def sliding_window_layers(model: Any) -> contextlib.AbstractContextManager[None] | None:
    """The sliding-layer patch, for transformers models whose config has sliding-window layers."""
    if not is_transformers_model(model):
        return None
    from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer, get_layer_types_and_kwargs

    try:
        layer_types, _ = get_layer_types_and_kwargs(model.config.get_text_config(decoder=True))
    except (AttributeError, TypeError, ValueError):
        return None
    if not {"sliding_attention", "chunked_attention"} & set(layer_types):
        return None
    methods = ("update", "get_mask_sizes", "get_seq_length")
    return _swapped(DynamicSlidingWindowLayer, {name: getattr(DynamicLayer, name) for name in methods})


def _kept_padding_mask(input_ids: torch.Tensor, padding_idx: int = 1) -> torch.Tensor:
    """FSMT's ``make_padding_mask`` (True for pad tokens), kept when it masks nothing."""
    return input_ids.eq(padding_idx)


def fsmt_padding_mask(model: Any) -> contextlib.AbstractContextManager[None] | None:
    """The padding-mask patch, for FSMT models."""
    module = sys.modules.get(_FSMT)
    if module is None or not isinstance(model, module.PretrainedFSMTModel):
        return None
    return _swapped(module, {"make_padding_mask": _kept_padding_mask})


@contextlib.contextmanager
def _experts_run(configs: list[Any], implementation: str) -> Iterator[None]:
    originals = [config._experts_implementation_internal for config in configs]
    try:
        for config in configs:
            config._experts_implementation_internal = implementation
        yield
    finally:
        for config, original in zip(configs, originals):
            config._experts_implementation_internal = original


def eager_experts(model: Any) -> contextlib.AbstractContextManager[None] | None:
    """The experts patch, for models whose mixture-of-experts layers run the eager loop."""
    if not is_transformers_model(model):
        return None
    # use_experts_implementation gives each experts module its config and this flag.
    configs = {
        id(m.config): m.config
        for m in model.modules()
        if hasattr(m, "_is_expert_parallel") and getattr(m.config, "_experts_implementation", None) == "eager"
    }
    return _experts_run(list(configs.values()), "grouped_mm") if configs else None


PATCHES: dict[str, Callable[[Any], contextlib.AbstractContextManager[None] | None]] = {
    "transformers.mamba_selective_scan": mamba_selective_scan,
    "transformers.sliding_window_layers": sliding_window_layers,
    "transformers.fsmt_padding_mask": fsmt_padding_mask,
    "transformers.eager_experts": eager_experts,
}


def register(register: PreparationRegistrar) -> None:
    """Register every patch of this module."""
    for name, patch in PATCHES.items():
        register.patch(name, patch)
