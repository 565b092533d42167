"""What the loaded plugins provide: the facts ``pt2onnx plugins`` and ``pt2onnx ops`` show.

Each command's facts are gathered once here, as plain data (:func:`inspect_plugins`,
:func:`inspect_ops`, :func:`coverage_data`); the command's text (``lines()``) and its
``--json`` (``to_dict()``) both render that data, so the two never tell different
stories. :func:`function_id` is how listings, the export report and error messages name
a registered function.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .opnames import normalize_op_name
from .registration import PREPARATION_KINDS

if TYPE_CHECKING:
    from .plugin_manager import BrokenPlugin, PluginInfo
    from .registration import Kind, Registration
    from .registry import Entry, Registry

__all__ = [
    "OpInspection",
    "OpsInspection",
    "PluginSummary",
    "PluginsInspection",
    "coverage_data",
    "function_id",
    "inspect_ops",
    "inspect_plugins",
]

#: The kinds ``--json`` counts per plugin (``registers``), in this order; the text adds the
#: capture preparations in one column.
_COUNTED: tuple[Kind, ...] = ("converter", "lowering", "custom_op", "decomposition", "keep", "rewrite")


def function_id(fn: Any) -> str:
    """``module.qualname`` of a registered function: the same converter whatever plugin name it was loaded under."""
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def _registration(r: Registration) -> dict[str, Any]:
    return {
        "plugin": r.plugin,
        "layer": str(r.layer),
        "kind": r.kind,
        "override": r.override,
        "since": r.since,
        "until": r.until,
    }


def _function(r: Registration) -> str | None:
    return function_id(r.fn) if r.fn is not None else None


def _entry(op: str, entry: Entry) -> dict[str, Any]:
    return {
        "op": op,
        **_registration(entry.winner),
        "function": _function(entry.winner),
        "shadows": [_registration(s) for s in entry.shadowed],
    }


def _range(r: Registration) -> str:
    """`` (opsets 18+)`` for a registration bounded by ``since``/``until``; nothing for one that serves any."""
    return "" if r.since is None and r.until is None else f" (opsets {r.opsets})"


def _conflict(entry: Entry) -> str:
    names = ", ".join(f"{r.plugin} ({r.kind})" for r in entry.conflict)
    return f"{names} [{entry.conflict[0].layer}]; exports reaching it fail until one says override=True"


@dataclass(frozen=True)
class PluginSummary:
    """One loaded plugin: where it comes from, how much it registers of each kind, what it overrides."""

    info: PluginInfo
    registers: Counter[str]
    overrides: tuple[Entry, ...]

    def to_dict(self) -> dict[str, Any]:
        info = self.info
        return {
            "name": info.name,
            "layer": str(info.layer),
            "distribution": info.distribution,
            "version": info.version,
            "registers": {kind: self.registers[kind] for kind in _COUNTED},
            "overrides": [_entry(e.winner.op, e) for e in self.overrides],
        }

    def lines(self) -> list[str]:
        info, kinds = self.info, self.registers
        preparations = sum(kinds[kind] for kind in PREPARATION_KINDS)
        lines = [
            f"{info.name:<28} {info.layer!s:<10} {info.distribution or '-':<22} {info.version or '-':<9} "
            f"{kinds['converter']:>10} {kinds['lowering']:>9} {kinds['custom_op']:>10} "
            f"{kinds['decomposition']:>14} {kinds['keep']:>5} {kinds['rewrite']:>8} {preparations:>12}"
        ]
        for entry in self.overrides:
            shadowed = ", ".join(f"{s.plugin} [{s.layer}]" for s in entry.shadowed if s.plugin != info.name)
            lines.append(f"    overrides {entry.winner.op}: {shadowed}")
        return lines


_PLUGINS_HEADER = (
    f"{'plugin':<28} {'layer':<10} {'distribution':<22} {'version':<9} "
    "converters lowerings custom_ops decompositions keeps rewrites preparations"
)


@dataclass(frozen=True)
class PluginsInspection:
    """What ``pt2onnx plugins`` shows: every plugin, and every source closed, plugin blocked or broken, and conflict.

    The text shows all of it; ``--json`` (:meth:`to_dict`) the plugins, the project
    config, the blocked and the broken plugins.
    """

    plugins: tuple[PluginSummary, ...]
    project_config: Path | None
    closed: tuple[str, ...]
    blocked: tuple[str, ...]
    not_allowed: tuple[str, ...]
    broken: tuple[BrokenPlugin, ...]
    #: Op, rewrite and preparation names whose registrations conflict, with their entries.
    conflicts: tuple[tuple[str, Entry], ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "plugins": [p.to_dict() for p in self.plugins],
            "project_config": str(self.project_config) if self.project_config else None,
            "blocked": list(self.blocked),
            "broken": [{"name": b.name, "distribution": b.distribution, "error": b.error} for b in self.broken],
        }

    def lines(self) -> list[str]:
        lines = [_PLUGINS_HEADER]
        for plugin in self.plugins:
            lines.extend(plugin.lines())
        if self.project_config is not None:
            lines.append(f"project config: {self.project_config}")
        lines.extend(f"closed: {note}" for note in self.closed)
        lines.extend(f"blocked: {name}" for name in self.blocked)
        lines.extend(f"not loaded (not in PT2ONNX_PLUGINS): {name}" for name in self.not_allowed)
        for broken in self.broken:
            lines.append(f"BROKEN {broken.name} ({broken.distribution or 'project'}): {broken.error}")
            if broken.hint:
                lines.append(f"    {broken.hint}")
        lines.extend(f"CONFLICT {name}: {_conflict(entry)}" for name, entry in self.conflicts)
        return lines


def inspect_plugins(registry: Registry) -> PluginsInspection:
    """Every plugin of ``registry``'s session with its layer, distribution, what it registers and overrides."""
    plugin_set = registry.plugin_set
    grouped = registry.by_plugin()
    plugins = tuple(
        PluginSummary(
            info,
            Counter(r.kind for r in grouped.get(info.name, [])),
            tuple(registry.overrides(info.name)),
        )
        for info in sorted(plugin_set.plugins.values(), key=lambda p: (-p.layer, p.name))
    )
    conflicts = tuple(
        (name, entry)
        for table in (
            registry.conflicts,
            {n: e for n, e in registry.rewrites.items() if e.conflict},
            {n: e for n, e in registry.preparations.items() if e.conflict},
        )
        for name, entry in sorted(table.items())
    )
    return PluginsInspection(
        plugins,
        plugin_set.project_config,
        tuple(plugin_set.closed),
        tuple(plugin_set.blocked),
        tuple(plugin_set.not_allowed),
        tuple(plugin_set.broken),
        conflicts,
    )


@dataclass(frozen=True)
class OpInspection:
    """One op asked about: what handles it at the registry's opset (and what that shadows),
    what converts it at other opsets, and whether it is decomposed or kept whole."""

    #: What was asked, as written.
    query: str
    #: The canonical op name; None when ``query`` names no op (then ``error`` says why).
    op: str | None
    error: str | None
    opset: int
    #: The handlers at :attr:`opset`: one entry, or one per registered overload of a packet.
    entries: tuple[tuple[str, Entry], ...] = ()
    #: The converting registrations for other opsets, by the name they were registered under.
    other_opsets: tuple[tuple[str, Registration], ...] = ()
    decomposed_by: Registration | None = None
    kept: bool = False

    @property
    def handled(self) -> bool:
        """Whether the query names an op that something converts or decomposes at :attr:`opset`."""
        return self.error is None and bool(self.entries or self.decomposed_by)

    def to_dict(self) -> dict[str, Any]:
        if self.error is not None:
            return {"query": self.query, "error": self.error}
        return {
            "query": self.query,
            "op": self.op,
            "opset": self.opset,
            "converters": [_entry(key, entry) for key, entry in self.entries],
            "other_opsets": [{"op": key, **_registration(r), "function": _function(r)} for key, r in self.other_opsets],
            "decomposed_by": _registration(self.decomposed_by) if self.decomposed_by else None,
            "kept": self.kept,
        }

    def lines(self) -> list[str]:
        if self.error is not None:
            return [f"{self.query}: {self.error}"]
        lines = []
        if not self.entries:
            kept = " (kept whole)" if self.kept else ""
            at = f" at opset {self.opset}" if self.other_opsets else ""
            lines.append(f"{self.op}: no converter{at}{kept}")
        for key, entry in self.entries:
            if entry.conflict:
                lines.append(f"{key}: CONFLICT {_conflict(entry)}")
                continue
            w = entry.winner
            override = " (override=True)" if w.override else ""
            lines.append(f"{key}: {w.kind} {_function(w)} from {w.plugin} [{w.layer}]{_range(w)}{override}")
            lines.extend(f"    shadows {s.plugin} [{s.layer}]{_range(s)}" for s in entry.shadowed)
        lines.extend(
            f"{key}: at opsets {r.opsets}: {r.kind} {_function(r)} from {r.plugin} [{r.layer}]"
            for key, r in self.other_opsets
        )
        return lines


@dataclass(frozen=True)
class OpsInspection:
    """What ``pt2onnx ops OP...`` shows: each op asked about, and the broken plugins skipped."""

    ops: tuple[OpInspection, ...]
    broken: tuple[str, ...]

    @property
    def handled(self) -> bool:
        """Whether every op asked about is converted or decomposed (the command's exit status)."""
        return all(op.handled for op in self.ops)

    def to_list(self) -> list[dict[str, Any]]:
        """The ``--json`` document: one dict per op asked about."""
        return [op.to_dict() for op in self.ops]

    def lines(self) -> list[str]:
        lines = [line for op in self.ops for line in op.lines()]
        if self.broken:
            lines.append(f"note: broken plugins skipped: {', '.join(self.broken)} (see `pt2onnx plugins`)")
        return lines


def _inspect_op(registry: Registry, query: str) -> OpInspection:
    try:
        name = normalize_op_name(query)
    except ValueError as e:
        return OpInspection(query, None, str(e), registry.opset)
    packet = name.split(".", 1)[0]
    decomposition = registry.decompositions.get(name) or registry.decompositions.get(packet)
    return OpInspection(
        query,
        name,
        None,
        registry.opset,
        tuple(sorted(registry.entries_for(name).items())),
        tuple((key, r) for key, regs in registry.other_opsets_for(name).items() for r in regs),
        decomposition.winner if decomposition else None,
        name in registry.kept or packet in registry.kept,
    )


def inspect_ops(registry: Registry, queries: Sequence[str]) -> OpsInspection:
    """For each op name asked about: what handles it at the registry's opset (and what that shadows),
    what converts it at other opsets, or what happens to it."""
    return OpsInspection(
        tuple(_inspect_op(registry, query) for query in queries),
        tuple(b.name for b in registry.plugin_set.broken),
    )


def coverage_data(registry: Registry) -> dict[str, Any]:
    """The Core ATen opset coverage (``pt2onnx ops --coverage --json``): covered and missing ops, the ops kept whole.

    The text of ``--coverage`` is :func:`pt2onnx.coverage.coverage_report`, from the same
    :func:`pt2onnx.coverage.coverage`.
    """
    from .coverage import coverage

    covered, missing = coverage(registry)
    return {"covered": covered, "missing": missing, "kept": sorted(registry.kept)}
