"""The export report: what happened, how long each phase took, and who converted what."""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from .optimize import PassEffect
from .plugin_manager import BrokenPlugin, PluginInfo

__all__ = ["Contribution", "OpUsage", "Report", "function_id", "peak_rss_mb"]


def peak_rss_mb() -> float:
    """The process's peak resident memory so far, in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB on Linux


@dataclass(frozen=True)
class OpUsage:
    """One op of the graph: how many nodes, which plugin converted (or decomposed) it, what it shadowed."""

    op: str
    count: int
    plugin: str
    layer: str
    shadowed: tuple[str, ...] = ()
    #: ``"converted"``, or ``"decomposed"`` by the plugin's decomposition before translation.
    how: str = "converted"


def function_id(fn: Any) -> str:
    """``module.qualname`` of a registered function: the same converter whatever plugin name it was loaded under."""
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


@dataclass(frozen=True)
class Contribution:
    """One registration that did work in an export.

    ``kind`` is ``converter``, ``lowering`` or ``custom_op`` (it translated at least one
    node), ``decomposition`` (it was applied in a re-trace), ``rewrite`` (it changed
    the graph), or a capture preparation that applied: ``pytree`` (its type is in the
    program's inputs or outputs), ``patch`` or ``dynamic_shapes``. ``name`` is the op,
    rewrite or preparation name it was registered under.
    """

    kind: str
    name: str
    plugin: str
    layer: str
    function: str


@dataclass
class Report:
    """Everything an export did. ``str(report)`` is a readable summary."""

    timings: dict[str, float] = field(default_factory=dict)
    #: The process's peak resident memory (MiB) at the end of each phase: where memory grew.
    peak_rss: dict[str, float] = field(default_factory=dict)
    capture: str = ""
    capture_fallback: str | None = None
    #: The plugins' capture preparations that applied: ``kind name (plugin [layer])``.
    preparations: list[str] = field(default_factory=list)
    #: With ``dynamic_shapes="auto"``: per input, the dims torch kept static and why.
    static_dims: dict[str, dict[int, str]] = field(default_factory=dict)
    retraced: bool = False
    decompose_reason: str = ""
    opset: int = 0
    ops: list[OpUsage] = field(default_factory=list)
    #: Every registration that did work, with the plugin that made it (what a plugin's tests prove).
    contributions: list[Contribution] = field(default_factory=list)
    passes: list[PassEffect] = field(default_factory=list)
    plugins: list[PluginInfo] = field(default_factory=list)
    broken_plugins: list[BrokenPlugin] = field(default_factory=list)
    nodes_translated: int = 0
    nodes_final: int = 0

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time a phase; nested or repeated phases add up."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - start
            self.peak_rss[name] = peak_rss_mb()

    def provider(self, op: str) -> str | None:
        """The plugin that converted ``op`` (canonical name) in this export."""
        return next((u.plugin for u in self.ops if u.op == op), None)

    def to_dict(self) -> dict[str, Any]:
        """The report as plain data (for JSON)."""
        return asdict(self)

    def __str__(self) -> str:
        lines = [f"prepare: {'; '.join(self.preparations) or 'nothing'}", f"capture: {self.capture}"]
        if self.capture_fallback:
            lines.append(f"  fallback because: {self.capture_fallback.splitlines()[0]}")
        for name, axes in self.static_dims.items():
            lines.extend(f"  static: {name} dim {axis}: {why}" for axis, why in axes.items())
        lines.append(f"decompose: {'re-traced' if self.retraced else 'skipped'} ({self.decompose_reason})")
        lines.append(f"opset: {self.opset}; nodes: {self.nodes_translated} translated, {self.nodes_final} final")
        lines.append("timings: " + ", ".join(f"{k} {v:.3f}s" for k, v in self.timings.items()))
        lines.append("peak RSS after: " + ", ".join(f"{k} {v:.0f} MiB" for k, v in self.peak_rss.items()))
        lines.append("ops:")
        for u in sorted(self.ops, key=lambda u: u.op):
            shadow = f" (shadows {', '.join(u.shadowed)})" if u.shadowed else ""
            how = " (decomposed)" if u.how == "decomposed" else ""
            lines.append(f"  {u.op:<40} x{u.count:<4} {u.plugin} [{u.layer}]{how}{shadow}")
        if self.passes:
            lines.append("optimization passes:")
            lines.extend(f"  {p.name:<26} -{p.removed:<5} nodes {p.seconds:.3f}s" for p in self.passes)
        if self.broken_plugins:
            lines.append("broken plugins (skipped):")
            lines.extend(f"  {b.name} ({b.distribution}): {b.error}" for b in self.broken_plugins)
        return "\n".join(lines)
