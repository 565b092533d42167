"""Decompose: only as much as needed, and only when needed.

``run_decompositions`` re-traces the whole program whatever the table, and costs
more than the capture itself. The captured graph is translated directly when every
node has a converter and nothing mutates; otherwise it is re-traced with torch's
default table minus every op a plugin converts or keeps, plus plugin decompositions.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.export import ExportedProgram

from .capture import tracing_lock
from .errors import DecompositionError, PluginConflictError
from .inplace import functionalize_private_inplace
from .opnames import op_name
from .provenance import location_of
from .registry import Entry, Registry

__all__ = ["Decomposed", "decompose", "plugin_decompositions", "retrace_reason"]


@dataclass(frozen=True)
class Decomposed:
    """The program to translate, and whether (and why) it was re-traced."""

    program: ExportedProgram
    retraced: bool
    reason: str
    table_size: int = 0
    #: Ops a plugin decomposition removed: node count and the winning entry, by op.
    applied: dict[str, tuple[int, Entry]] = field(default_factory=dict)


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
        try:
            decomposition, converter = registry.decomposition(target), registry.lookup(target)
        except PluginConflictError as e:
            raise e.at(location_of(node)) from None
        if decomposition is not None:
            forced.add(op_name(target))
        elif converter is None and isinstance(target, torch._ops.OpOverload):
            unconverted.add(op_name(target))
    reasons = []
    if mutating:
        reasons.append(f"functionalize in-place ops ({', '.join(sorted(mutating))})")
    if forced:
        reasons.append(f"apply plugin decompositions ({', '.join(sorted(forced))})")
    if unconverted:
        reasons.append(f"decompose ops no plugin converts ({', '.join(sorted(unconverted))})")
    return "; ".join(reasons) or None


def _undecomposable(program: ExportedProgram, registry: Registry, table: Any) -> list[str]:
    """torch ops of the program that no plugin converts and no re-trace would remove."""
    found = set()
    for node in _call_nodes(program.graph_module):
        target = node.target
        if not isinstance(target, torch._ops.OpOverload) or target.namespace not in ("aten", "prims"):
            continue
        if target._schema.is_mutable:
            continue  # functionalization replaces it
        if registry.lookup(target) is not None or target in table:
            continue
        if target.has_kernel_for_dispatch_key(torch._C.DispatchKey.CompositeImplicitAutograd):
            continue
        found.add(op_name(target))
    return sorted(found)


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
        if registry.is_kept(op):
            del table[op]
    for name in registry.decompositions:
        for overload in _resolve_op(name):
            # A converter of a higher layer (or of the exact overload) may win over this name's decomposition.
            entry = registry.find(overload)
            if entry is not None and entry.winner.kind == "decomposition" and not entry.conflict:
                table[overload] = entry.winner.fn
    return table


def plugin_decompositions(program: ExportedProgram, registry: Registry) -> dict[str, tuple[int, Entry]]:
    """The ops of ``program`` a plugin decomposition handles: node count and the winning entry, by op."""
    found: dict[str, tuple[int, Entry]] = {}
    for node in _call_nodes(program.graph_module):
        entry = registry.decomposition(node.target)
        if entry is not None:
            name = op_name(node.target)
            found[name] = (found.get(name, (0, entry))[0] + 1, entry)
    return found


def decompose(program: ExportedProgram, registry: Registry, *, force: bool = False) -> Decomposed:
    """Re-trace ``program`` with the plugins' table if it must be (or if ``force``)."""
    rewritten = 0 if force else functionalize_private_inplace(program.graph_module)
    reason = retrace_reason(program, registry)
    if reason is None and not force:
        made = f" ({rewritten} in-place op(s) on intermediates made functional)" if rewritten else ""
        return Decomposed(program, False, f"translated as captured: every op has a converter and nothing mutates{made}")
    table = decomposition_table(registry)
    hopeless = _undecomposable(program, registry, table)
    if hopeless and not force:
        # Re-tracing cannot remove these ops, so translation would fail anyway: fail fast.
        return Decomposed(program, False, f"not re-traced: no converter or decomposition for {', '.join(hopeless)}")
    applied = plugin_decompositions(program, registry)
    try:
        with tracing_lock:
            decomposed = program.run_decompositions(table)
    except Exception as e:
        raise DecompositionError(
            f"run_decompositions failed: {type(e).__name__}: {e}",
            hint="a plugin decomposition may be wrong; block it with -p no:NAME to check",
        ) from e
    return Decomposed(decomposed, True, reason or "forced by the caller", len(table), applied)
