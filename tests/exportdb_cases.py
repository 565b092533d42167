"""ExportDB's examples (``torch._export.db.examples``) as test cases, and the inputs to verify each on.

``tests/test_exportdb.py`` exports every example in both capture modes; ``tests/test_opsets.py``
at several target opsets. Both verify on the example's inputs and, where the example has
dynamic shapes, on a second input whose dynamic dims differ.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch._export.db.case import ExportCase
from torch._export.db.examples import all_examples

#: Every example by name, enumerated from torch, so new ones in later releases are picked up.
EXAMPLES: dict[str, ExportCase] = all_examples()


def second_input(case: ExportCase) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``case``'s example inputs with every dynamic dim at another size (one size per ``Dim``)."""
    specs = case.dynamic_shapes
    if isinstance(specs, dict):
        params = list(inspect.signature(case.model.forward).parameters)
        specs = [specs.get(p) for p in params[: len(case.example_args)]]
    return _resized(tuple(case.example_args), tuple(specs), {}), dict(case.example_kwargs or {})


def _resized(value: Any, spec: Any, sizes: dict[str, int]) -> Any:
    """``value`` with every dynamic dim of ``spec`` set to its new size (same Dim, same size)."""
    if isinstance(value, torch.Tensor) and isinstance(spec, dict):
        shape = list(value.shape)
        for axis, dim in spec.items():
            if dim is not None:
                shape[axis] = sizes.setdefault(dim.__name__, _other_size(shape[axis], dim))
        return (
            torch.randn(shape).to(value.dtype) if value.is_floating_point() else torch.zeros(shape, dtype=value.dtype)
        )
    if isinstance(value, (list, tuple)) and isinstance(spec, (list, tuple)):
        return type(value)(_resized(v, s, sizes) for v, s in zip(value, spec))
    return value


def _other_size(size: int, dim: Any) -> int:
    high = getattr(dim, "max", None)
    return size + 2 if high is None or size + 2 <= high else max(getattr(dim, "min", 0) or 0, size - 1)
