"""Canonical names of the ops a graph calls, and how a registration's name is looked up.

Every op has one string name: ``aten::add.Tensor`` for an OpOverload (``.default``
included), ``aten::add`` for its packet, ``higher_order::cond`` for a higher-order op,
``operator::getitem`` or ``torch::sym_max`` for the Python callables symbolic shapes
bring. Registrations may name an op by string, so a pack need not import the op's
library; lookup tries the exact overload first, then its packet.
"""

from __future__ import annotations

import re
from typing import Any

import torch

__all__ = ["OpRef", "lookup_keys", "normalize_op_name", "op_name"]

#: What a plugin may pass to name an op.
OpRef = str | torch._ops.OpOverload | torch._ops.OpOverloadPacket | torch._ops.HigherOrderOperator | Any

_OP_STRING = re.compile(r"^(?P<ns>[A-Za-z_][\w]*)::(?P<name>[A-Za-z_][\w]*)(\.(?P<overload>[\w]+))?$")


def op_name(target: Any) -> str:
    """The canonical name of an FX ``call_function`` target."""
    if isinstance(target, torch._ops.OpOverload):
        packet = target._schema.name  # "aten::add"
        return f"{packet}.{target._overloadname}"
    if isinstance(target, torch._ops.OpOverloadPacket):
        return target._qualified_op_name
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"higher_order::{target.name()}"
    if callable(target):
        module = (getattr(target, "__module__", None) or "builtins").lstrip("_")
        return f"{module}::{getattr(target, '__name__', repr(target))}"
    raise TypeError(f"cannot name op target {target!r}")


def normalize_op_name(op: OpRef) -> str:
    """Validate and canonicalize what a registration names (string or op object)."""
    if isinstance(op, str):
        match = _OP_STRING.match(op.strip())
        if match is None:
            raise ValueError(
                f"invalid op name {op!r}: expected 'namespace::name' or 'namespace::name.overload', "
                "e.g. 'aten::gelu' or 'aten::add.Tensor'"
            )
        ns = "operator" if match["ns"] == "_operator" else match["ns"]
        name = f"{ns}::{match['name']}"
        return f"{name}.{match['overload']}" if match["overload"] else name
    return op_name(op)


def lookup_keys(target: Any) -> tuple[str, ...]:
    """The names to try for ``target``, most specific first: exact overload, then packet."""
    name = op_name(target)
    if isinstance(target, torch._ops.OpOverload):
        return (name, target._schema.name)
    return (name,)
