"""Run an exported model in onnxruntime with the module's calling convention, and compare with eager."""

from __future__ import annotations

import ctypes
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

__all__ = ["OutputDifference", "Verification", "compare", "from_ort", "to_ort"]


def to_ort(value: Any) -> ort.OrtValue:
    """A torch tensor (or Python scalar for a symbolic-int input) as an OrtValue."""
    if not isinstance(value, torch.Tensor):
        value = torch.tensor(value)
    value = value.detach().contiguous().cpu()
    if value.dtype == torch.bfloat16:
        # numpy has no bfloat16: hand onnxruntime the raw 16-bit words with their ONNX type.
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
            value.view(torch.uint16).numpy(), int(from_torch_dtype(torch.bfloat16))
        )
    return ort.OrtValue.ortvalue_from_numpy(value.numpy())


def from_ort(value: ort.OrtValue) -> torch.Tensor:
    """An OrtValue as a torch tensor."""
    if value.data_type() == "tensor(bfloat16)":
        shape = value.shape()
        if math.prod(shape) == 0:
            return torch.empty(shape, dtype=torch.bfloat16)
        raw = ctypes.string_at(value.data_ptr(), math.prod(shape) * 2)
        return torch.frombuffer(bytearray(raw), dtype=torch.bfloat16).reshape(shape)
    return torch.from_numpy(np.asarray(value.numpy()))


@dataclass(frozen=True)
class OutputDifference:
    """How one output of the ONNX model differs from eager PyTorch."""

    name: str
    max_abs: float
    max_rel: float
    shape_ok: bool
    dtype_ok: bool
    nan_ok: bool
    close: bool

    @property
    def ok(self) -> bool:
        """Same shape, dtype, NaN/inf positions, and every element within tolerance."""
        return self.shape_ok and self.dtype_ok and self.nan_ok and self.close


@dataclass(frozen=True)
class Verification:
    """The differences of every output; ``max_abs`` is the largest over all outputs.

    An element is close when ``|onnx - eager| <= atol + rtol * |eager|``.
    """

    outputs: tuple[OutputDifference, ...]
    atol: float
    rtol: float

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
        rows = [f"{'output':<32} {'max abs':>12} {'max rel':>12}  shape dtype nan close"]
        for o in self.outputs:
            flags = " ".join("ok" if f else "BAD" for f in (o.shape_ok, o.dtype_ok, o.nan_ok, o.close))
            rows.append(f"{o.name:<32} {o.max_abs:>12.3g} {o.max_rel:>12.3g}  {flags}")
        return "\n".join(rows)


def _difference(name: str, expected: Any, got: Any, atol: float, rtol: float) -> OutputDifference:
    if not isinstance(expected, torch.Tensor):
        got_value = got.item() if isinstance(got, torch.Tensor) and got.numel() == 1 else got
        same = got_value == expected
        gap = 0.0 if same else math.inf
        return OutputDifference(name, gap, gap, True, True, True, bool(same))
    expected = expected.detach().cpu()
    shape_ok = tuple(expected.shape) == tuple(got.shape)
    dtype_ok = expected.dtype == got.dtype
    if not shape_ok or expected.numel() == 0:
        gap = 0.0 if shape_ok else math.inf
        return OutputDifference(name, gap, gap, shape_ok, dtype_ok, True, shape_ok)
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
    return OutputDifference(name, max_abs, max_rel, shape_ok, dtype_ok, nan_ok, close)


def compare(names: Sequence[str], expected: Any, got: Any, *, atol: float, rtol: float) -> Verification:
    """Compare eager outputs with ONNX outputs, structure by structure."""
    exp_leaves, exp_spec = pytree.tree_flatten(expected)
    got_leaves, got_spec = pytree.tree_flatten(got)
    if exp_spec != got_spec:
        raise VerificationError(
            f"the ONNX model returns another structure than eager:\n  eager: {exp_spec}\n  onnx:  {got_spec}"
        )
    labels = list(names) if len(names) == len(exp_leaves) else [f"output_{i}" for i in range(len(exp_leaves))]
    diffs = tuple(_difference(n, e, g, atol, rtol) for n, e, g in zip(labels, exp_leaves, got_leaves))
    return Verification(diffs, atol, rtol)
