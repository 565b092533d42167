"""The export report: what happened, how long each phase took, and who converted what.

The same data three ways: the :class:`Report` object, plain data (:meth:`Report.to_dict`,
:meth:`Report.to_json`), and a document for people (:meth:`Report.to_markdown`,
:meth:`Report.to_html`, :meth:`Report.write`; rendered by :mod:`pt2onnx.report_render`).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import math
import os
import platform
import resource
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import importlib_metadata
import onnx_ir as ir

from .errors import SaveError
from .inspection import function_id
from .optimize import PassEffect
from .plugin_manager import BrokenPlugin, PluginInfo
from .runtime import OutputDifference, Verification

__all__ = [
    "REPORT_FORMATS",
    "Contribution",
    "NonfiniteDeviation",
    "OpUsage",
    "Report",
    "TensorInfo",
    "function_id",
    "peak_rss_mb",
    "report_format",
]

#: The formats :meth:`Report.write` knows, by file suffix.
REPORT_FORMATS = {".md": "markdown", ".html": "html", ".json": "json"}

#: How to export torch's exact results where the report lists non-finite deviations.
NONFINITE_RESTORE = 'nonfinite="torch" (--nonfinite torch)'

_VERSIONED = ("pt2onnx", "torch", "onnx", "onnx-ir", "onnxscript", "onnxruntime")


def peak_rss_mb() -> float:
    """The process's peak resident memory so far, in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB on Linux


def report_format(path: str | os.PathLike[str]) -> str:
    """The format a report file gets from its suffix; a :class:`SaveError` for an unknown one."""
    suffix = Path(path).suffix.lower()
    if suffix not in REPORT_FORMATS:
        raise SaveError(
            f"cannot write a report to {os.fspath(path)!r}: unknown suffix {suffix or '(none)'!r}",
            hint=f"name the file with one of {', '.join(REPORT_FORMATS)} (the suffix picks the format)",
        )
    return REPORT_FORMATS[suffix]


@functools.cache
def _installed_versions() -> tuple[tuple[str, str], ...]:
    found = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            found[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            found[name] = "-"
    return tuple(found.items())


def _versions() -> dict[str, str]:
    return dict(_installed_versions())


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
    #: The plugins whose converters declined these nodes (``op.decline``) before this one converted them.
    declined_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class NonfiniteDeviation:
    """Ops exported with the ONNX op's own results on NaN or ±inf, not torch's.

    With ``nonfinite="onnx"`` (the default), a converter whose exact form would cost run
    time on every input (max pooling's) emits the plain ONNX op; it matches torch on every
    finite input, and differs on the inputs ``deviation`` names. ``nonfinite="torch"``
    exports the exact forms.
    """

    op: str
    #: How many nodes of the graph have this op.
    count: int
    #: The plugin whose converter emitted the plain form.
    plugin: str
    #: On which inputs the export differs from torch, and what torch gives there.
    deviation: str


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


@dataclass(frozen=True)
class TensorInfo:
    """An input or output of the ONNX model: name, element type, and dims (ints or dim names)."""

    name: str
    dtype: str
    shape: tuple[int | str | None, ...] | None

    @classmethod
    def of(cls, value: ir.Value) -> TensorInfo:
        """The description of an ``onnx_ir`` graph input or output."""
        dtype = value.dtype.name if value.dtype is not None else "?"
        if value.shape is None:
            return cls(value.name or "", dtype, None)
        dims = tuple(d if isinstance(d, int) else d.value for d in value.shape)
        return cls(value.name or "", dtype, dims)

    def __str__(self) -> str:
        dims = "?" if self.shape is None else ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.name}: {self.dtype}[{dims}]"


def _plain(value: Any) -> Any:
    """``value`` as JSON data: dataclasses as dicts, enums as their names, tuples as lists, inf as a string."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        data = {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, PassEffect):
            data["removed"] = value.removed
        if isinstance(value, (Verification, OutputDifference)):
            data["ok"] = value.ok
        if isinstance(value, Verification):
            data["max_abs"], data["max_rel"] = _plain(value.max_abs), _plain(value.max_rel)
        return data
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no inf or nan
    if isinstance(value, enum.Enum):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@dataclass
class Report:
    """Everything an export did. ``str(report)`` is a readable summary.

    Attributes:
        timings: seconds per phase (``plugins``, ``capture``, ``decompose``,
            ``translate``, ``assemble``, ``optimize``, and ``save``/``verify`` once run).
        peak_rss: the process's peak resident memory (MiB) at the end of each phase:
            where memory grew.
        capture: the capture strategy that produced the graph (``strict=False``, a fallback, ...).
        capture_fallback: why the asked capture mode failed, when a fallback was taken.
        size_guards: sizes torch's guards fix (``x_dim1*x_dim2 == 16``) that the graph
            holds static, each with the first FX node relying on it: the model runs at the
            sizes that keep them, as the captured program does.
        guarded_sizes: dims torch's guards narrow (timm's MobileViT accepts heights 57..64
            only), each with the sizes its program accepts: the ONNX graph cannot check
            them, so at other sizes it may fail or compute garbage; ``ExportResult.run``
            warns at them.
        retraced: whether the program was re-traced with a decomposition table, and
            ``decompose_reason`` why (or why not).
        opset: the target ONNX opset.
        nonfinite: the ``nonfinite`` option of the export: ``"onnx"`` (the ONNX ops' own
            results on NaN and ±inf where torch's would cost run time) or ``"torch"``.
        nonfinite_deviations: with ``nonfinite="onnx"``, the ops exported in their plain
            form and on which non-finite inputs they differ from torch.
        ops: every op of the graph, the plugin that converted it and what it shadowed.
        passes: every optimization pass with the node count before and after.
        passes_off: the plugins' rewrites registered only for other opsets (off in
            this export), with the reason.
        plugins: the plugins loaded, with their layer; ``broken_plugins`` those skipped.
        nodes_translated, nodes_final: ONNX nodes before and after optimization.
        inputs, outputs: the ONNX model's inputs and outputs.
        weights_bytes: the size of the model's weights (initializers).
        saved: bytes per file written by ``save()`` (the model file, and external data).
        verifications: one entry per ``verify()`` call: the difference of every output.
        versions: Python and the packages the export ran with.
    """

    timings: dict[str, float] = field(default_factory=dict)
    peak_rss: dict[str, float] = field(default_factory=dict)
    capture: str = ""
    capture_fallback: str | None = None
    #: The plugins' capture preparations that applied: ``kind name (plugin [layer])``.
    preparations: list[str] = field(default_factory=list)
    #: With ``dynamic_shapes="auto"``: per input, the dims torch kept static and why.
    static_dims: dict[str, dict[int, str]] = field(default_factory=dict)
    #: With ``dynamic_shapes="auto"``: torch's suggested fixes applied because the model
    #: bounds or ties dims (``sequence_length = Dim('sequence_length', max=128)``), and named
    #: dims handed back to torch as ``Dim.AUTO`` (a suggested constant, an unprovable guard).
    shapes_refined: list[str] = field(default_factory=list)
    #: Sizes torch's guards fix and the graph holds static, each with the first node relying
    #: on it (``x_dim1*x_dim2 == 16: add``): the model runs only at sizes that keep them.
    size_guards: dict[str, str] = field(default_factory=dict)
    #: Dims torch's guards narrow, by name, with the sizes the program accepts (``57..64 of 2..256 tried``).
    guarded_sizes: dict[str, str] = field(default_factory=dict)
    retraced: bool = False
    decompose_reason: str = ""
    opset: int = 0
    nonfinite: str = "onnx"
    nonfinite_deviations: list[NonfiniteDeviation] = field(default_factory=list)
    ops: list[OpUsage] = field(default_factory=list)
    #: Every registration that did work, with the plugin that made it (what a plugin's tests prove).
    contributions: list[Contribution] = field(default_factory=list)
    passes: list[PassEffect] = field(default_factory=list)
    passes_off: dict[str, str] = field(default_factory=dict)
    plugins: list[PluginInfo] = field(default_factory=list)
    broken_plugins: list[BrokenPlugin] = field(default_factory=list)
    nodes_translated: int = 0
    nodes_final: int = 0
    inputs: list[TensorInfo] = field(default_factory=list)
    outputs: list[TensorInfo] = field(default_factory=list)
    weights_bytes: int = 0
    saved: dict[str, int] = field(default_factory=dict)
    verifications: list[Verification] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=_versions)

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
        """The report as plain data: dicts, lists, strings and numbers only."""
        data: dict[str, Any] = _plain(self)
        return data

    def to_json(self, indent: int | None = 2) -> str:
        """The report as a JSON document (the data of :meth:`to_dict`)."""
        return json.dumps(self.to_dict(), indent=indent)

    def to_markdown(self) -> str:
        """The report as a Markdown document."""
        from .report_render import render

        return render(self, "markdown")

    def to_html(self) -> str:
        """The report as a standalone HTML page."""
        from .report_render import render

        return render(self, "html")

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the report to ``path``; its suffix picks the format (``.md``, ``.html``, ``.json``)."""
        kind = report_format(path)
        text = self.to_json() if kind == "json" else self.to_markdown() if kind == "markdown" else self.to_html()
        target = Path(path)
        staging = target.with_name(f".{target.name}.tmp")
        try:
            staging.write_text(text + "\n", encoding="utf-8")
            os.replace(staging, target)
        except OSError as e:
            staging.unlink(missing_ok=True)
            raise SaveError(f"cannot write the report to {target}: {e.strerror or e}") from e
        return target

    def __str__(self) -> str:
        lines = [f"prepare: {'; '.join(self.preparations) or 'nothing'}", f"capture: {self.capture}"]
        if self.capture_fallback:
            lines.append(f"  fallback because: {self.capture_fallback.splitlines()[0]}")
        for name, axes in self.static_dims.items():
            lines.extend(f"  static: {name} dim {axis}: {why}" for axis, why in axes.items())
        lines.extend(f"  refined by the model: {fix}" for fix in self.shapes_refined)
        lines.extend(f"  guarded: {guard} (from node {node})" for guard, node in self.size_guards.items())
        lines.extend(f"  sizes torch's guards accept: {dim}: {sizes}" for dim, sizes in self.guarded_sizes.items())
        lines.append(f"decompose: {'re-traced' if self.retraced else 'skipped'} ({self.decompose_reason})")
        lines.append(f"opset: {self.opset}; nodes: {self.nodes_translated} translated, {self.nodes_final} final")
        lines.append("timings: " + ", ".join(f"{k} {v:.3f}s" for k, v in self.timings.items()))
        lines.append("peak RSS after: " + ", ".join(f"{k} {v:.0f} MiB" for k, v in self.peak_rss.items()))
        lines.append("ops:")
        for u in sorted(self.ops, key=lambda u: u.op):
            shadow = f" (shadows {', '.join(u.shadowed)})" if u.shadowed else ""
            how = " (decomposed)" if u.how == "decomposed" else ""
            after = f" (declined by {', '.join(u.declined_by)})" if u.declined_by else ""
            lines.append(f"  {u.op:<40} x{u.count:<4} {u.plugin} [{u.layer}]{how}{after}{shadow}")
        if self.nonfinite_deviations:
            lines.append(f"non-finite deviations (exact forms: {NONFINITE_RESTORE}):")
            lines.extend(f"  {d.op:<40} x{d.count:<4} {d.plugin}: {d.deviation}" for d in self.nonfinite_deviations)
        if self.passes:
            lines.append("optimization passes:")
            lines.extend(f"  {p.name:<26} -{p.removed:<5} nodes {p.seconds:.3f}s" for p in self.passes)
        if self.passes_off:
            lines.append(f"rewrites off at opset {self.opset}:")
            lines.extend(f"  {name:<26} {why}" for name, why in self.passes_off.items())
        if self.broken_plugins:
            lines.append("broken plugins (skipped):")
            lines.extend(f"  {b.name} ({b.distribution}): {b.error}" for b in self.broken_plugins)
        return "\n".join(lines)
