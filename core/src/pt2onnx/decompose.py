"""Decompose: only as much as needed, and only when needed.

``run_decompositions`` re-traces the whole program whatever the table, and costs
more than the capture itself. The captured graph is translated directly when every
node has a converter and nothing mutates; otherwise it is re-traced with torch's
default table minus every op a plugin converts or keeps, plus plugin decompositions.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.export import ExportedProgram

from .errors import DecompositionError
from .opnames import op_name
from .registry import Registry

__all__ = ["Decomposed", "decompose", "retrace_reason"]


@dataclass(frozen=True)
class Decomposed:
    """The program to translate, and whether (and why) it was re-traced."""

    program: ExportedProgram
    retraced: bool
    reason: str
    table_size: int = 0


def _call_nodes(gm: torch.fx.GraphModule) -> Iterator[torch.fx.Node]:
    for node in gm.graph.nodes:
        if node.op == "call_function":
            yield node
        elif node.op == "get_attr":
            sub = getattr(gm, str(node.target), None)
            if isinstance(sub, torch.fx.GraphModule):
                yield from _call_nodes(sub)


def retrace_reason(program: ExportedProgram, registry: Registry) -> str | None:
    """Why the program must be re-traced before translation, or None if it need not be."""
    mutating: set[str] = set()
    unconverted: set[str] = set()
    forced: set[str] = set()
    for node in _call_nodes(program.graph_module):
        target = node.target
        if isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable:
            mutating.add(op_name(target))
        if registry.decomposition(target) is not None:
            forced.add(op_name(target))
        elif registry.lookup(target) is None and isinstance(target, torch._ops.OpOverload):
            unconverted.add(op_name(target))
    reasons = []
    if mutating:
        reasons.append(f"functionalize in-place ops ({', '.join(sorted(mutating))})")
    if forced:
        reasons.append(f"apply plugin decompositions ({', '.join(sorted(forced))})")
    if unconverted:
        reasons.append(f"decompose ops no plugin converts ({', '.join(sorted(unconverted))})")
    return "; ".join(reasons) or None


def _resolve_op(name: str) -> list[Any]:
    """The OpOverloads a registered name stands for (all overloads of a packet name)."""
    namespace, rest = name.split("::", 1)
    op, _, overload = rest.partition(".")
    try:
        packet = getattr(getattr(torch.ops, namespace), op)
    except (AttributeError, RuntimeError):
        return []  # its library is not loaded, so it cannot be in this graph
    if overload:
        return [getattr(packet, overload)]
    return [getattr(packet, o) for o in packet.overloads()]


def decomposition_table(registry: Registry) -> Any:
    """torch's default table, minus what plugins convert or keep, plus plugin decompositions."""
    table = torch.export.default_decompositions()
    for op in list(table.keys()):
        if registry.is_kept(op) and registry.decomposition(op) is None:
            del table[op]
    for name, entry in registry.decompositions.items():
        for overload in _resolve_op(name):
            table[overload] = entry.winner.fn
    return table


def decompose(program: ExportedProgram, registry: Registry, *, force: bool = False) -> Decomposed:
    """Re-trace ``program`` with the plugins' table if it must be (or if ``force``)."""
    reason = retrace_reason(program, registry)
    if reason is None and not force:
        return Decomposed(program, False, "translated as captured: every op has a converter and nothing mutates")
    table = decomposition_table(registry)
    try:
        decomposed = program.run_decompositions(table)
    except Exception as e:
        raise DecompositionError(
            f"run_decompositions failed: {type(e).__name__}: {e}",
            hint="a plugin decomposition may be wrong; block it with -p no:NAME to check",
        ) from e
    return Decomposed(decomposed, True, reason or "forced by the caller", len(table))
