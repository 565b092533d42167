"""Python operators on symbolic sizes and multi-output nodes."""

from __future__ import annotations

import onnx_ir as ir
from pt2onnx.plugin import converter


@converter("operator::getitem")
def getitem(op, seq, index):
    return seq[index]


def _int(op, v):
    return v if isinstance(v, ir.Value) else op.constant(int(v))


@converter("operator::add")
def add(op, a, b):
    return a + b if not any(isinstance(v, ir.Value) for v in (a, b)) else op.Add(_int(op, a), _int(op, b))


@converter("operator::sub")
def sub(op, a, b):
    return a - b if not any(isinstance(v, ir.Value) for v in (a, b)) else op.Sub(_int(op, a), _int(op, b))


@converter("operator::mul")
def mul(op, a, b):
    return a * b if not any(isinstance(v, ir.Value) for v in (a, b)) else op.Mul(_int(op, a), _int(op, b))


@converter("operator::floordiv")
def floordiv(op, a, b):
    if not any(isinstance(v, ir.Value) for v in (a, b)):
        return a // b
    a, b = _int(op, a), _int(op, b)
    # ONNX Div truncates; a - mod(a, b) (Mod with fmod=0 takes the divisor's sign) divides exactly.
    return op.Div(op.Sub(a, op.Mod(a, b)), b)
