"""Helpers shared by the aten converter families."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
from pt2onnx.plugin import Op


def as_dtype(op: Op, value: Any, dtype: ir.DataType) -> ir.Value:
    """``value`` (a Value or Python scalar) as a Value of ``dtype``, cast only if needed."""
    if isinstance(value, ir.Value):
        return value if value.dtype == dtype else op.Cast(value, to=dtype)
    return op.constant(value, dtype)


def promote(op: Op, *values: Any) -> list[ir.Value]:
    """Operands of an arithmetic op, in the dtype torch computes the result in."""
    return [as_dtype(op, v, op.output_dtype) for v in values]


def int_list(value: Any, rank: int) -> list[int]:
    """An int or list of ints (torch allows both for kernel/stride/...) as ``rank`` ints."""
    if isinstance(value, int):
        return [value] * rank
    values = [int(v) for v in value]
    return values * rank if len(values) == 1 else values
