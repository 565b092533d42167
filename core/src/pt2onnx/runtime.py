"""Run an exported model in onnxruntime with the module's calling convention, and compare with eager."""

from __future__ import annotations

import ctypes
import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnxruntime as ort
import torch
import torch.utils._pytree as pytree
from onnx_ir.tensor_adapters import from_torch_dtype

from .errors import VerificationError

__all__ = ["TOLERANCES", "OutputDifference", "Verification", "compare", "from_ort", "to_ort", "tolerance"]


def to_ort(value: Any) -> ort.OrtValue:
    """A torch tensor (or Python scalar for a symbolic-int input) as an OrtValue."""
    if not isinstance(value, torch.Tensor):
        value = torch.tensor(value)
    if value.is_complex():
        value = torch.view_as_real(value.resolve_conj())  # the ONNX model holds complex values as (..., 2) real tensors
    value = value.detach().contiguous().cpu()
    if value.dtype == torch.bfloat16:
        # numpy has no bfloat16: hand onnxruntime the raw 16-bit words with their ONNX type.
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
            value.view(torch.uint16).numpy(), int(from_torch_dtype(torch.bfloat16))
        )
    return ort.OrtValue.ortvalue_from_numpy(value.numpy())


#: onnxruntime's element types that numpy has no dtype for, read as raw bytes instead.
_RAW_TYPES: dict[str, torch.dtype] = {
    "tensor(bfloat16)": torch.bfloat16,
    "tensor(float8e4m3fn)": torch.float8_e4m3fn,
    "tensor(float8e4m3fnuz)": torch.float8_e4m3fnuz,
    "tensor(float8e5m2)": torch.float8_e5m2,
    "tensor(float8e5m2fnuz)": torch.float8_e5m2fnuz,
}


def from_ort(value: ort.OrtValue) -> torch.Tensor:
    """An OrtValue as a torch tensor."""
    dtype = _RAW_TYPES.get(value.data_type())
    if dtype is not None:
        shape = value.shape()
        if math.prod(shape) == 0:
            return torch.empty(shape, dtype=dtype)
        raw = ctypes.string_at(value.data_ptr(), math.prod(shape) * dtype.itemsize)
        return torch.frombuffer(bytearray(raw), dtype=dtype).reshape(shape)
    return torch.from_numpy(np.asarray(value.numpy()))


#: ``(atol, rtol)`` per floating dtype: what a correct model meets when onnxruntime and eager
#: PyTorch compute the same function. Integer and bool outputs must match exactly.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-10, 1e-7),
    torch.float32: (1e-5, 1e-4),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (5e-2, 2e-2),
}


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """``(atol, rtol)`` for an output of ``dtype``: :data:`TOLERANCES`, ``(0, 0)`` for exact dtypes."""
    if dtype in TOLERANCES:
        return TOLERANCES[dtype]
    if dtype.is_floating_point:
        eps = torch.finfo(dtype).eps
        return 4 * eps, 4 * eps
    return 0.0, 0.0


@dataclass(frozen=True)
class OutputDifference:
    """How one output of the ONNX model differs from eager PyTorch, and the tolerance applied to it."""

    name: str
    max_abs: float
    max_rel: float
    shape_ok: bool
    dtype_ok: bool
    nan_ok: bool
    close: bool
    atol: float = 0.0
    rtol: float = 0.0
    dtype: str = "-"
    #: The largest finite magnitude of eager's values (floating outputs; 0 for others).
    scale: float = 0.0

    @property
    def ok(self) -> bool:
        """Same shape, dtype, NaN/inf positions, and every element within tolerance."""
        return self.shape_ok and self.dtype_ok and self.nan_ok and self.close


@dataclass(frozen=True)
class Verification:
    """The differences of every output; ``max_abs`` is the largest over all outputs.

    Each output is compared by its own dtype: integers and bools exactly, floats element
    by element with ``|onnx - eager| <= atol + rtol * |eager|`` (its dtype's tolerance
    unless one was given), and NaN and infinities at the same positions.
    """

    outputs: tuple[OutputDifference, ...]

    @property
    def max_abs(self) -> float:
        return max((o.max_abs for o in self.outputs), default=0.0)

    @property
    def max_rel(self) -> float:
        return max((o.max_rel for o in self.outputs), default=0.0)

    @property
    def ok(self) -> bool:
        """Whether every output matches in shape, dtype, NaN positions and values."""
        return all(o.ok for o in self.outputs)

    def __str__(self) -> str:
        rows = [
            f"{'output':<32} {'dtype':<9} {'max abs':>12} {'max rel':>12} {'atol':>8} {'rtol':>8}  shape dtype nan close"
        ]
        for o in self.outputs:
            flags = " ".join("ok" if f else "BAD" for f in (o.shape_ok, o.dtype_ok, o.nan_ok, o.close))
            rows.append(
                f"{o.name:<32} {o.dtype:<9} {o.max_abs:>12.3g} {o.max_rel:>12.3g} {o.atol:>8.2g} {o.rtol:>8.2g}  {flags}"
            )
        return "\n".join(rows)


def _difference(name: str, expected: Any, got: Any, atol: float | None, rtol: float | None) -> OutputDifference:
    difference = _measure(name, expected, got, atol, rtol)
    dtype = (
        str(expected.dtype).removeprefix("torch.") if isinstance(expected, torch.Tensor) else type(expected).__name__
    )
    return dataclasses.replace(difference, dtype=dtype)


def _measure(name: str, expected: Any, got: Any, atol: float | None, rtol: float | None) -> OutputDifference:
    if not isinstance(expected, torch.Tensor):
        got_value = got.item() if isinstance(got, torch.Tensor) and got.numel() == 1 else got
        same = got_value == expected
        gap = 0.0 if same else math.inf
        return OutputDifference(name, gap, gap, True, True, True, bool(same))
    expected = expected.detach().cpu()
    if expected.is_complex() and isinstance(got, torch.Tensor) and got.is_complex():
        # Real and imaginary parts, each within the tolerance of the real dtype.
        return _measure(name, torch.view_as_real(expected.resolve_conj()), torch.view_as_real(got), atol, rtol)
    default_atol, default_rtol = tolerance(expected.dtype)
    atol = default_atol if atol is None else atol
    rtol = default_rtol if rtol is None else rtol
    shape_ok = tuple(expected.shape) == tuple(got.shape)
    dtype_ok = expected.dtype == got.dtype
    if not shape_ok or expected.numel() == 0:
        gap = 0.0 if shape_ok else math.inf
        return OutputDifference(name, gap, gap, shape_ok, dtype_ok, True, shape_ok, atol, rtol)
    if not expected.dtype.is_floating_point:
        return _exact_difference(name, expected, got, shape_ok, dtype_ok)
    e = expected.to(torch.float64)
    g = got.to(torch.float64)
    nan_ok = bool(torch.equal(torch.isnan(e), torch.isnan(g)))
    e_inf, g_inf = torch.isinf(e), torch.isinf(g)
    nan_ok = nan_ok and bool(torch.equal(e_inf, g_inf)) and bool(torch.equal(e[e_inf], g[e_inf]))
    both = torch.isfinite(e) & torch.isfinite(g)
    diff = (e[both] - g[both]).abs()
    scale = e[both].abs()
    max_abs = float(diff.max()) if diff.numel() else 0.0
    max_rel = float((diff / scale.clamp_min(1e-12)).max()) if diff.numel() else 0.0
    close = bool((diff <= atol + rtol * scale).all())
    finite = e[torch.isfinite(e)].abs()
    largest = float(finite.max()) if finite.numel() else 0.0
    return OutputDifference(name, max_abs, max_rel, shape_ok, dtype_ok, nan_ok, close, atol, rtol, scale=largest)


def _exact_difference(
    name: str, expected: torch.Tensor, got: torch.Tensor, shape_ok: bool, dtype_ok: bool
) -> OutputDifference:
    """Integers and bools: equal as integers, element by element (never through a float)."""
    if got.dtype.is_floating_point:
        return OutputDifference(name, math.inf, math.inf, shape_ok, False, True, False)
    e, g = expected.to(torch.int64), got.to(torch.int64)
    unequal = e != g
    if not bool(unequal.any()):
        return OutputDifference(name, 0.0, 0.0, shape_ok, dtype_ok, True, True)
    # For the report only: Python ints, so a gap across the whole int64 range does not wrap.
    gaps = [abs(int(a) - int(b)) for a, b in zip(e[unequal].tolist(), g[unequal].tolist())]
    scale = max(abs(int(a)) for a in e[unequal].tolist()) or 1
    return OutputDifference(name, float(max(gaps)), float(max(gaps)) / scale, shape_ok, dtype_ok, True, False)


def compare(
    names: Sequence[str], expected: Any, got: Any, *, atol: float | None = None, rtol: float | None = None
) -> Verification:
    """Compare eager outputs with ONNX outputs, structure by structure, each output by its dtype.

    ``atol``/``rtol`` override the per-dtype :data:`TOLERANCES` of floating outputs;
    integer and bool outputs are always compared exactly.
    """
    exp_leaves, exp_spec = pytree.tree_flatten(expected)
    got_leaves, got_spec = pytree.tree_flatten(got)
    if exp_spec != got_spec:
        raise VerificationError(
            f"the ONNX model returns another structure than eager:\n  eager: {exp_spec}\n  onnx:  {got_spec}"
        )
    labels = list(names) if len(names) == len(exp_leaves) else [f"output_{i}" for i in range(len(exp_leaves))]
    diffs = tuple(_difference(n, e, g, atol, rtol) for n, e, g in zip(labels, exp_leaves, got_leaves))
    return Verification(diffs)
