"""Witness inputs: values the harness chooses itself, so a proof does not rest on the test's.

A test can pass with a wrong converter when its inputs cannot tell the two apart: ``relu``
as ``Identity`` on ``torch.rand`` (never negative), ``exp`` as ``x + 1`` on zeros. So every
export :func:`pt2onnx.testing.assert_exports_like_eager` checks is also run on a witness:
the example's structure, shapes and dtypes with other values. The test passes or fails on
its own inputs as before; the witness decides only whether the export *proves* the
registrations that did work in it (``pytest --pt2onnx-prove``).

The rule, per tensor of the example:

* floating (and complex, part by part): values uniform in ``[-s, s]``, where ``s`` is the
  largest finite magnitude of the example's values, at least 1; so both signs and the
  example's magnitude. The example's NaN and infinities stay where they are, so a test
  that keeps edge values out keeps them out of the witness too;
* integer: the example's own values in another order (an index stays a valid index);
* bool: fair coin flips;
* Python numbers and everything else: as they are.

Each tensor keeps the example's memory layout (a strided view stays one), which the
captured program's guards may check.

The generator is seeded by the example's values, so a seed reproduces the witness.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.utils._pytree as pytree

__all__ = ["laid_out_like", "witness_inputs"]


def witness_inputs(args: tuple[Any, ...], kwargs: dict[str, Any], seed: int) -> tuple[Any, Any] | None:
    """``(args, kwargs)`` with every tensor's values drawn anew by the rule above.

    None when no value can change: there is no tensor, or every tensor is an integer one
    holding one value throughout (an empty tensor has nothing to change either).
    """
    generator = torch.Generator().manual_seed(seed % 2**63)
    leaves, spec = pytree.tree_flatten((args, kwargs))
    drawn = [
        laid_out_like(leaf, _witness(leaf, generator)) if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves
    ]
    changeable = any(isinstance(leaf, torch.Tensor) and _changeable(leaf) for leaf in leaves)
    if not changeable:
        return None
    new_args, new_kwargs = pytree.tree_unflatten(drawn, spec)
    return tuple(new_args), dict(new_kwargs)


def _changeable(t: torch.Tensor) -> bool:
    if t.numel() == 0:
        return False
    if t.dtype.is_floating_point or t.is_complex() or t.dtype == torch.bool:
        return True
    return bool((t != t.reshape(-1)[0]).any())


def _witness(t: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    t = t.detach()
    if t.numel() == 0:
        return t.clone()
    if t.is_complex():
        return torch.view_as_complex(_floats(torch.view_as_real(t.resolve_conj()), generator).contiguous())
    if t.dtype.is_floating_point:
        return _floats(t, generator)
    if t.dtype == torch.bool:
        return torch.rand(t.shape, generator=generator) < 0.5
    order = torch.randperm(t.numel(), generator=generator)
    return t.reshape(-1)[order].reshape(t.shape).clone()


def _floats(t: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    wide = t.to(torch.float64)
    finite = torch.isfinite(wide)
    s = max(1.0, float(wide[finite].abs().max())) if bool(finite.any()) else 1.0
    values = (torch.rand(t.shape, generator=generator, dtype=torch.float64) * 2 - 1) * s
    return torch.where(finite, values, wide).to(t.dtype)


def laid_out_like(example: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """``values`` in ``example``'s memory layout: its dims in the same stride order, with the
    same gaps between elements and the same storage offset; contiguous when ``example`` is.

    ``values`` may have other sizes (the harness's inputs of other sizes).
    """
    if example.is_contiguous() or values.numel() == 0 or 0 in example.stride():
        return values.contiguous()
    innermost_first = sorted(range(example.dim()), key=lambda d: (example.stride(d), example.size(d)))
    strides, dense, span = [0] * example.dim(), 1, 1
    for d in innermost_first:
        gap = max(1, example.stride(d) // dense) if example.size(d) > 1 else 1
        strides[d] = span * gap
        dense = example.stride(d) * example.size(d)
        span = strides[d] * values.size(d)
    offset = example.storage_offset()
    buffer = torch.zeros(span + offset, dtype=values.dtype)  # gaps: zeros, the same on every run
    laid = torch.empty(0, dtype=values.dtype).set_(buffer.untyped_storage(), offset, values.shape, strides)
    return laid.copy_(values)
