"""The export report as a document for people: Markdown or a standalone HTML page.

Both formats render the same sections (facts as lines, then tables), so they always
say the same thing; :meth:`pt2onnx.Report.to_json` is the form for programs.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from .report import NONFINITE_RESTORE

if TYPE_CHECKING:
    from .report import Report

__all__ = ["render"]


@dataclass
class _Section:
    title: str
    lines: list[str] = field(default_factory=list)
    headers: tuple[str, ...] = ()
    rows: list[tuple[str, ...]] = field(default_factory=list)


def _size(nbytes: int) -> str:
    size = float(nbytes)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def _sections(report: Report) -> list[_Section]:
    summary = _Section("Summary")
    summary.lines.append(f"capture: {report.capture}")
    if report.capture_fallback:
        summary.lines.append(f"capture fallback because: {report.capture_fallback.splitlines()[0]}")
    summary.lines.extend(f"dynamic shapes refined by the model: {fix}" for fix in report.shapes_refined)
    summary.lines.extend(
        f"size held static under torch's guard: {guard} (from node {node})"
        for guard, node in report.size_guards.items()
    )
    summary.lines.extend(
        f"sizes torch's guards accept (the ONNX graph does not check them): {dim}: {sizes}"
        for dim, sizes in report.guarded_sizes.items()
    )
    summary.lines.append(f"decompose: {'re-traced' if report.retraced else 'skipped'} ({report.decompose_reason})")
    summary.lines.append(
        f"opset {report.opset}; ONNX nodes: {report.nodes_translated} translated, {report.nodes_final} after optimization"
    )
    if report.nonfinite == "torch":
        summary.lines.append('non-finite inputs: torch\'s results on NaN and ±inf everywhere (nonfinite="torch")')
    elif report.nonfinite_deviations:
        deviating = len(report.nonfinite_deviations)
        summary.lines.append(
            f"non-finite inputs: {deviating} op{'s differ' if deviating > 1 else ' differs'} from torch on some NaN "
            "or ±inf inputs (see Non-finite deviations)"
        )
    summary.lines.append(f"weights: {_size(report.weights_bytes)}")
    for path, nbytes in report.saved.items():
        summary.lines.append(f"saved: {path} ({_size(nbytes)})")
    summary.lines.append("versions: " + ", ".join(f"{k} {v}" for k, v in report.versions.items()))
    sections = [summary]

    model = _Section("Model", headers=("", "name", "type", "shape"))
    for kind, infos in (("input", report.inputs), ("output", report.outputs)):
        for info in infos:
            dims = (
                "?" if info.shape is None else "[" + ", ".join("?" if d is None else str(d) for d in info.shape) + "]"
            )
            model.rows.append((kind, info.name, info.dtype, dims))
    sections.append(model)

    phases = _Section("Phases", headers=("phase", "seconds", "peak RSS after (MiB)"))
    for name, seconds in report.timings.items():
        peak = report.peak_rss.get(name)
        phases.rows.append((name, f"{seconds:.3f}", "-" if peak is None else f"{peak:.0f}"))
    sections.append(phases)

    for i, check in enumerate(report.verifications, 1):
        title = "Verification" if len(report.verifications) == 1 else f"Verification {i}"
        verdict = "ok" if check.ok else "FAILED"
        section = _Section(
            title,
            lines=[f"{verdict}: onnxruntime against eager PyTorch, each output within its dtype's tolerance"],
            headers=("output", "dtype", "max abs", "max rel", "atol", "rtol", "shape", "dtype ok", "nan/inf", "close"),
        )
        for o in check.outputs:
            flags = tuple("ok" if f else "BAD" for f in (o.shape_ok, o.dtype_ok, o.nan_ok, o.close))
            tolerance = (f"{o.atol:g}", f"{o.rtol:g}")
            section.rows.append((o.name, o.dtype, f"{o.max_abs:.3g}", f"{o.max_rel:.3g}", *tolerance, *flags))
        sections.append(section)

    if report.nonfinite_deviations:
        deviations = _Section(
            "Non-finite deviations",
            lines=[
                "These ops are exported as the ONNX op computes them: exact on every finite input, "
                "they differ from torch on the NaN or ±inf inputs named below, where torch's exact "
                "form would cost run time on every input.",
                f"To export torch's exact forms: {NONFINITE_RESTORE}.",
            ],
            headers=("op", "nodes", "converted by", "differs from torch where"),
        )
        for d in report.nonfinite_deviations:
            deviations.rows.append((d.op, str(d.count), d.plugin, d.deviation))
        sections.append(deviations)

    ops = _Section("Ops", headers=("op", "nodes", "converted by", "layer", "declined by", "shadows"))
    for u in sorted(report.ops, key=lambda u: u.op):
        declined = ", ".join(u.declined_by) or "-"
        ops.rows.append((u.op, str(u.count), u.plugin, u.layer, declined, ", ".join(u.shadowed) or "-"))
    sections.append(ops)

    passes = _Section("Optimization passes", headers=("pass", "nodes before", "nodes after", "removed", "seconds"))
    for p in report.passes:
        passes.rows.append((p.name, str(p.nodes_before), str(p.nodes_after), str(p.removed), f"{p.seconds:.3f}"))
    if not report.passes:
        passes.lines.append("none ran")
    passes.lines.extend(f"off at opset {report.opset}: {name}: {why}" for name, why in report.passes_off.items())
    sections.append(passes)

    plugins = _Section("Plugins", headers=("plugin", "layer", "distribution", "version"))
    for plugin in sorted(report.plugins, key=lambda p: (-p.layer, p.name)):
        plugins.rows.append((plugin.name, str(plugin.layer), plugin.distribution or "-", plugin.version or "-"))
    for broken in report.broken_plugins:
        plugins.lines.append(f"broken, skipped: {broken.name} ({broken.distribution or 'project'}): {broken.error}")
    sections.append(plugins)
    return sections


def _markdown_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _markdown(sections: list[_Section]) -> str:
    out = ["# pt2onnx export report"]
    for s in sections:
        out += ["", f"## {s.title}", ""]
        out += [f"- {_markdown_cell(line)}" for line in s.lines]
        if s.rows:
            if s.lines:
                out.append("")
            out.append("| " + " | ".join(s.headers) + " |")
            out.append("| " + " | ".join("---" for _ in s.headers) + " |")
            out += ["| " + " | ".join(_markdown_cell(c) for c in row) + " |" for row in s.rows]
    return "\n".join(out)


_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:72em}"
    "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}"
    "th{background:#f3f3f3}td{font-family:ui-monospace,monospace;font-size:.9em}"
)


def _html(sections: list[_Section]) -> str:
    esc = html.escape
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>pt2onnx export report</title>',
        f"<style>{_STYLE}</style></head><body>",
        "<h1>pt2onnx export report</h1>",
    ]
    for s in sections:
        out.append(f"<h2>{esc(s.title)}</h2>")
        if s.lines:
            out.append("<ul>" + "".join(f"<li>{esc(line)}</li>" for line in s.lines) + "</ul>")
        if s.rows:
            out.append("<table><thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in s.headers) + "</tr></thead>")
            out.append("<tbody>")
            out += ["<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in s.rows]
            out.append("</tbody></table>")
    out.append("</body></html>")
    return "\n".join(out)


def render(report: Report, kind: Literal["markdown", "html"]) -> str:
    """``report`` as a Markdown document or a standalone HTML page."""
    sections = _sections(report)
    return _markdown(sections) if kind == "markdown" else _html(sections)
