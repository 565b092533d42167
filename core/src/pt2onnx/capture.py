"""Capture: ``torch.export.export`` in the mode the user asked for, with a fallback.

Some models capture in one mode only (the seeds: ``scan`` under ``strict=True``;
``x[..., idx] = y`` under ``strict=False`` in older torch). When capture fails in the
asked mode it is retried in the other one, with a warning; the report says which
mode produced the graph. ``fallback=False`` turns that off.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.export import ExportedProgram

from .errors import CaptureError

__all__ = ["CaptureFallbackWarning", "Captured", "capture"]


class CaptureFallbackWarning(UserWarning):
    """Capture failed in the asked mode and succeeded in the other one."""


@dataclass(frozen=True)
class Captured:
    """The captured program and how it was obtained."""

    program: ExportedProgram
    strict: bool | None
    strategy: str
    fallback_reason: str | None = None


class _CallableModule(torch.nn.Module):
    """Wraps a plain callable so torch.export can capture it; keeps its signature for naming."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn
        self.forward = fn


def as_module(model: Any) -> torch.nn.Module:
    """``model`` itself when it is an ``nn.Module``, else a module calling it."""
    if isinstance(model, torch.nn.Module):
        return model
    if callable(model):
        return _CallableModule(model)
    raise CaptureError(
        f"cannot export an object of type {type(model).__name__}",
        hint="pass an nn.Module, a callable, or a torch.export.ExportedProgram",
    )


def _hint(error: BaseException, strict: bool) -> str:
    text = f"{type(error).__name__}: {error}"
    if "data-dependent" in text or "GuardOnDataDependentSymNode" in text:
        return (
            "the model branches on tensor values; express the branch with torch.cond, or tell "
            "torch what holds with torch._check(...) (see the torch.export tutorial)"
        )
    if "Constraints violated" in text or "dynamic_shapes" in text or "Dim(" in text:
        return "fix dynamic_shapes as torch's message above suggests (it names the dims and their relations)"
    if strict:
        return "strict mode (TorchDynamo) could not trace the model; try strict=False"
    return "non-strict tracing failed; try strict=True, or simplify the failing Python code"


def _export(
    module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], dynamic_shapes: Any, strict: bool
) -> ExportedProgram:
    return torch.export.export(module, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict)


def _first_lines(error: BaseException, count: int = 12) -> str:
    lines = f"{type(error).__name__}: {error}".strip().splitlines()
    return "\n".join(lines[:count]) + ("\n    ..." if len(lines) > count else "")


def capture(
    model: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None,
    *,
    dynamic_shapes: Any,
    strict: bool,
    fallback: bool,
) -> Captured:
    """Capture ``model`` with torch.export (or take a given ExportedProgram as is)."""
    if isinstance(model, ExportedProgram):
        return Captured(model, None, "given ExportedProgram")
    module = as_module(model)
    train_only = (torch.nn.Dropout, torch.nn.modules.batchnorm._BatchNorm)
    if module.training and any(isinstance(m, train_only) for m in module.modules()):
        warnings.warn(
            f"{type(module).__name__} is in training mode: dropout and batch-norm statistics are "
            "exported as in training. Call model.eval() before exporting for inference.",
            UserWarning,
            stacklevel=3,
        )
    kwargs = dict(kwargs or {})
    try:
        program = _export(module, args, kwargs, dynamic_shapes, strict)
        return Captured(program, strict, f"strict={strict}")
    except Exception as first:
        reason = _first_lines(first, 3)
        if not fallback:
            raise CaptureError(
                f"torch.export.export(strict={strict}) failed:\n{_first_lines(first)}",
                hint=_hint(first, strict),
            ) from first
        try:
            program = _export(module, args, kwargs, dynamic_shapes, not strict)
        except Exception as second:  # noqa: BLE001
            raise CaptureError(
                f"torch.export.export failed in both modes.\n"
                f"strict={strict}:\n{_first_lines(first)}\nstrict={not strict}:\n{_first_lines(second)}",
                hint=_hint(first, strict),
            ) from first
    warnings.warn(
        f"torch.export.export(strict={strict}) failed ({reason.splitlines()[0][:200]}); "
        f"the graph was captured with strict={not strict} instead. Pass fallback=False to turn this off.",
        CaptureFallbackWarning,
        stacklevel=3,
    )
    return Captured(program, not strict, f"strict={not strict} (fallback: strict={strict} failed)", reason)
