"""Every ExportDB example (``torch._export.db.examples``) exports and matches eager in onnxruntime.

The examples are enumerated from torch, so new ones in later releases are picked up.
Examples with dynamic shapes are also verified on a second input whose dynamic dims
differ. Examples torch.export itself cannot capture (NOT_SUPPORTED_YET) must either
fail with pt2onnx's clear capture error or export and verify.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any

import pytest
import torch
from torch._export.db.case import ExportCase, SupportLevel
from torch._export.db.examples import all_examples

import pt2onnx
from pt2onnx.errors import CaptureError

EXAMPLES = all_examples()


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


def _second_input(case: ExportCase) -> tuple[tuple[Any, ...], dict[str, Any]]:
    specs = case.dynamic_shapes
    if isinstance(specs, dict):
        params = list(inspect.signature(case.model.forward).parameters)
        specs = [specs.get(p) for p in params[: len(case.example_args)]]
    return _resized(tuple(case.example_args), tuple(specs), {}), dict(case.example_kwargs or {})


def _verify(result: pt2onnx.ExportResult, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    check = result.verify(*args, **kwargs)
    assert check.ok, f"{check}\n{result.report}"


@pytest.mark.parametrize("strict", [False, True], ids=["nonstrict", "strict"])
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_exportdb_example(name: str, strict: bool) -> None:
    case = EXAMPLES[name]
    model = copy.deepcopy(case.model)
    kwargs = dict(case.example_kwargs or {})
    if case.support_level == SupportLevel.NOT_SUPPORTED_YET:
        try:
            result = pt2onnx.export(model, case.example_args, kwargs, dynamic_shapes=case.dynamic_shapes, strict=strict)
        except CaptureError as e:
            assert "torch.export.export failed" in str(e)
            assert e.hint
            return
        _verify(result, case.example_args, kwargs)
        return
    result = pt2onnx.export(model, case.example_args, kwargs, dynamic_shapes=case.dynamic_shapes, strict=strict)
    _verify(result, case.example_args, kwargs)
    if case.dynamic_shapes is not None:
        args, kwargs = _second_input(case)
        _verify(result, args, kwargs)
