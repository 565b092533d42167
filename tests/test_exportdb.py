"""Every ExportDB example (``torch._export.db.examples``) exports and matches eager in onnxruntime.

The examples are enumerated from torch, so new ones in later releases are picked up.
Examples with dynamic shapes are also verified on a second input whose dynamic dims
differ. Examples torch.export itself cannot capture (NOT_SUPPORTED_YET) must either
fail with pt2onnx's clear capture error or export and verify.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from torch._export.db.case import SupportLevel

import pt2onnx
from exportdb_cases import EXAMPLES, second_input
from pt2onnx.errors import CaptureError


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
        args, kwargs = second_input(case)
        _verify(result, args, kwargs)
