"""Decompose: only as much as needed, and only when needed.

``run_decompositions`` re-traces the whole program whatever the table, and costs
more than the capture itself. The captured graph is translated directly when every
node has a converter and nothing mutates; otherwise it is re-traced with a table that
removes exactly what no plugin converts:

1. torch's default table (the one ``torch.export`` uses to reach Core ATen),
2. plus torch's full decomposition table (``torch._decomp``, which also holds the
   reference implementations of ``torch._refs``) for the ops no plugin converts and
   the default table leaves whole (``linalg_vector_norm``, ``erfc``, ``hypot``, ...),
3. minus every op a plugin converts or keeps, plus the plugins' own decompositions.

When ops still have no converter, :meth:`Decomposed.explain` says per op whether torch
has a decomposition for it and why it was not used.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.export import ExportedProgram

from .capture import tracing_lock
from .errors import DecompositionError, PluginConflictError, UnsupportedOpsError
from .inplace import functionalize_private_inplace
from .opnames import op_name
from .provenance import location_of
from .registry import Entry, Registry

__all__ = [
    "Decomposed",
    "decompose",
    "decomposition_table",
    "full_decompositions",
    "plugin_decompositions",
    "primitive_of",
    "retrace_reason",
]


@functools.cache
def full_decompositions() -> Mapping[Any, Any]:
    """torch's full table of Python decompositions of functional ops, by OpOverload.

    ``torch._decomp.decomposition_table`` is private, but it is the only complete one:
    ``torch.export.default_decompositions()`` and ``torch._decomp.core_aten_decompositions()``
    deliberately leave out the ops Core ATen keeps whole (``linalg_vector_norm``,
    ``erfc``, ``cumprod``, ``unfold``, ...), and importing ``torch._decomp`` is what
    registers the ``torch._refs`` implementations into it. Its in-place and ``out=``
    entries are left out: functionalization removes those ops before any table applies.
    """
    import torch._decomp

    return {
        op: fn
        for op, fn in torch._decomp.decomposition_table.items()
        if isinstance(op, torch._ops.OpOverload) and not op._schema.is_mutable
    }


@dataclass(frozen=True)
class Decomposed:
    """The program to translate, and whether (and why) it was re-traced."""

    program: ExportedProgram
    retraced: bool
    reason: str
    table_size: int = 0
    #: Ops a plugin decomposition removed: node count and the winning entry, by op.
    applied: dict[str, tuple[int, Entry]] = field(default_factory=dict)
    #: The ops of the captured graph that a re-trace would have removed but did not run
    #: because other ops could not be removed (the fast failure), by name.
    not_retraced: frozenset[str] = frozenset()
    #: Ops kept whole by a plugin's keep entry although no plugin converts them.
    kept_unconverted: frozenset[str] = field(default_factory=frozenset)
    #: Why torch's full table was given up for its default one ("" if it was not).
    full_table_failure: str = ""

    def explain(self, error: UnsupportedOpsError) -> UnsupportedOpsError:
        """``error`` with a note per op: whether torch decomposes it, and why that was not used."""
        notes = {name: self._note(name) for name in error.unsupported}
        return UnsupportedOpsError(error.unsupported, hint=error.hint, notes=notes, other_opsets=error.other_opsets)

    def _note(self, name: str) -> str:
        op = _overload(name)
        if op is None:
            return "not an aten op: no torch decomposition"
        if op.namespace == "prims":
            return "a primitive that a torch decomposition produced; torch decomposes it no further"
        prim = primitive_of(op)
        if prim is not None and op not in torch.export.default_decompositions():
            return f"torch's reference implementation is the primitive {op_name(prim)}, which no plugin converts"
        decomposable = op in full_decompositions() or op in torch.export.default_decompositions() or _is_composite(op)
        if name in self.kept_unconverted:
            has = "torch decomposes it, but" if decomposable else "torch has no decomposition for it, and"
            return f"{has} a plugin keeps it whole (register.keep) while none converts it"
        if name in self.not_retraced:
            return (
                "torch decomposes it, but the program was not re-traced: other ops of the graph "
                "have neither converter nor decomposition"
            )
        if decomposable:
            if self.full_table_failure and op in full_decompositions():
                return f"torch's full table decomposes it, but that re-trace {self.full_table_failure}"
            if self.retraced:
                return "torch decomposes it, but the re-trace kept it (torch preserves it in exported programs)"
            return "torch decomposes it, but the program was not re-traced"
        return "torch has no decomposition for it"


def primitive_of(op: Any) -> Any:
    """The prim that ``op``'s entry in torch's full table only renames, or None.

    Many reference implementations (``torch._refs.erfc``, ``torch._refs.special.bessel_j0``)
    are a call of the prim of the same name: no decomposition at all, unless a plugin
    converts that prim.
    """
    fn = full_decompositions().get(op)
    if fn is None or not (getattr(fn, "__module__", None) or "").startswith("torch._refs"):
        return None
    base = op._schema.name.split("::", 1)[1].removeprefix("special_")
    packet = getattr(torch.ops.prims, base, None)
    return getattr(packet, "default", None) if packet is not None else None


def _overload(name: str) -> Any:
    namespace, _, rest = name.partition("::")
    packet_name, _, overload = rest.partition(".")
    packet = getattr(getattr(torch.ops, namespace, None), packet_name, None) if namespace in ("aten", "prims") else None
    return getattr(packet, overload or "default", None) if packet is not None else None


def _is_composite(target: Any) -> bool:
    return target.has_kernel_for_dispatch_key(torch._C.DispatchKey.CompositeImplicitAutograd)


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


def _unconverted(program: ExportedProgram, registry: Registry) -> Iterator[Any]:
    """The functional torch ops of the program that no plugin converts."""
    for node in _call_nodes(program.graph_module):
        target = node.target
        if not isinstance(target, torch._ops.OpOverload) or target.namespace not in ("aten", "prims"):
            continue
        if target._schema.is_mutable:
            continue  # functionalization replaces it
        if registry.lookup(target) is None:
            yield target


def _undecomposable(program: ExportedProgram, registry: Registry, table: Any) -> list[str]:
    """torch ops of the program that no plugin converts and no re-trace would remove."""
    # A composite op is decomposed by any re-trace unless a plugin keeps it whole.
    return sorted(
        {
            op_name(t)
            for t in _unconverted(program, registry)
            if t not in table and not (_is_composite(t) and not registry.is_kept(t))
        }
    )


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


def decomposition_table(registry: Registry, *, full: bool = True) -> Any:
    """torch's default table (plus its full one), minus what plugins convert or keep, plus plugin decompositions."""
    table = torch.export.default_decompositions()
    if full:
        for op, fn in full_decompositions().items():
            prim = primitive_of(op)
            if op not in table and (prim is None or registry.lookup(prim) is not None):
                table[op] = fn
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


def _unconverted_prims(program: ExportedProgram, registry: Registry) -> set[str]:
    return {op_name(t) for t in _unconverted(program, registry) if t.namespace == "prims"}


def decompose(program: ExportedProgram, registry: Registry, *, force: bool = False) -> Decomposed:
    """Re-trace ``program`` with the plugins' table if it must be (or if ``force``).

    The full table is tried first. Some of its reference implementations lower to
    primitives no plugin converts, or to in-place prims a functional re-trace rejects;
    then the program is re-traced once more with torch's default table only, and the
    notes of a later "no converter" error name what the full table produced.
    """
    rewritten = 0 if force else functionalize_private_inplace(program.graph_module)
    reason = retrace_reason(program, registry)
    if reason is None and not force:
        made = f" ({rewritten} in-place op(s) on intermediates made functional)" if rewritten else ""
        return Decomposed(program, False, f"translated as captured: every op has a converter and nothing mutates{made}")
    table = decomposition_table(registry)
    unconverted = {op_name(t): t for t in _unconverted(program, registry)}
    kept = frozenset(n for n, t in unconverted.items() if registry.is_kept(t))
    hopeless = _undecomposable(program, registry, table)
    if hopeless and not force:
        # Re-tracing cannot remove these ops, so translation would fail anyway: fail fast.
        removable = frozenset(unconverted) - set(hopeless)
        return Decomposed(
            program,
            False,
            f"not re-traced: no converter or decomposition for {', '.join(hopeless)}",
            not_retraced=removable,
            kept_unconverted=kept,
        )
    applied = plugin_decompositions(program, registry)
    full_failure = ""
    try:
        with tracing_lock:
            decomposed = program.run_decompositions(table)
        prims = _unconverted_prims(decomposed, registry)
        if prims:
            full_failure = f"produced primitives no plugin converts ({', '.join(sorted(prims))})"
    except Exception as e:  # noqa: BLE001 - the default table alone is tried next
        full_failure = f"failed to re-trace ({type(e).__name__}: {str(e).splitlines()[0][:200]})"
    if full_failure:
        table = decomposition_table(registry, full=False)
        try:
            with tracing_lock:
                decomposed = program.run_decompositions(table)
        except Exception as e:
            raise DecompositionError(
                f"run_decompositions failed: {type(e).__name__}: {e}",
                hint="a plugin decomposition may be wrong; block it with -p no:NAME to check",
            ) from e
    return Decomposed(
        decomposed,
        True,
        (reason or "forced by the caller")
        + (f"; torch's full table {full_failure}, so its default table was used" if full_failure else ""),
        len(table),
        applied,
        kept_unconverted=kept,
        full_table_failure=full_failure,
    )
