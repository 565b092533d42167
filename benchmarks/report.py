"""The benchmark's report: ``results.md`` (environment, method, every ratio with its spread, the tables)
and ``results.png`` (the ratios with error bars, and the depth scan), from the data ``run.py`` writes
to ``results.json``.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from analysis import EAGER, shape_of
from spread import INTERVAL, RESAMPLES, Spread, median_of


def _met(met: bool | None) -> str:
    return "not measured" if met is None else "yes" if met else "**no**"


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, dict):  # a Spread's JSON form
        return f"{value['value']:.{digits}f} ({value['low']:.{digits}f}-{value['high']:.{digits}f})"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _ms(times: list[float] | None) -> str:
    return f"{statistics.median(times) * 1e3:.3f}" if times else "-"


def _shapes_text(shapes: dict[str, list[int]] | None) -> str:
    return ", ".join(f"{n} {'x'.join(map(str, s))}" for n, s in (shapes or {}).items()) or "-"


def _median_row(table: dict[str, dict[str, Any]], keys: list[str]) -> list[str]:
    cells = []
    for key in keys:
        values = [r.get(key) for r in table.values()]
        if key == "nodes":
            nodes = [v for v in values if v is not None]
            cells.append(_fmt(statistics.median(nodes)) if nodes else "-")
        else:
            cells.append(_fmt(median_of([Spread.from_dict(v) for v in values])))
    return cells


def markdown(data: dict[str, Any]) -> str:
    env, exporters, summary, latency = data["environment"], data["exporters"], data["summary"], data["latency"]
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items())
    load = env.get("load_average_start"), env.get("load_average_end")
    low, high = INTERVAL
    lines = [
        "# pt2onnx vs torch.onnx.export(dynamo=True)",
        "",
        f"Command: `{data['command']}`  ",
        f"{data['started']} UTC, wall time {data['wall_s']:.0f} s.",
        "",
        "## Environment and method",
        "",
        f"- CPU: {env['cpu']}; {env['cores']} cores ({env['cores_usable']} usable by this run); "
        f"load average {_fmt(load[0] and load[0][0])} at the start, {_fmt(load[1] and load[1][0])} at the end.",
        f"- Versions: {versions}.",
        f"- Exports: {data['repeats']} repeats, interleaved (each repeat exports every model with every "
        "exporter, in an order rotated from repeat to repeat), each in its own process with torch at one thread"
        + (
            ", after a warm-up export of a tiny MLP by the same exporter (one-time initialization not counted)."
            if data["warm_up"]
            else ", cold (no warm-up export)."
        )
        + " Export figures: median over repeats (min-max). Peak RSS growth: VmHWM after export and save minus "
        "VmRSS before.",
        f"- onnxruntime latency: per model one process loads every exporter's model (CPU provider, "
        f"{data['threads']} intra-op thread(s), 1 inter-op, ORT_ENABLE_ALL; eager torch at {data['threads']} "
        f"thread(s) on the example inputs, in rounds of its own) and times them in {data['runs']} interleaved "
        "rounds after 3 warm-up rounds, the order shuffled each round. ms: median over rounds. Ratio: median / median, with its "
        f"{high - low:.0f}% bootstrap interval over rounds ({RESAMPLES} resamples of whole rounds).",
        f"- Sequence sweep: batch {data['batch']}, lengths {data['seq'] or 'none'}, for models with a dynamic "
        "sequence length.",
        "",
        "## Inputs",
        "",
        "| model | example inputs | sequence sweep |",
        "|---|---|---|",
    ]
    for model in data["models"]:
        first = next((s for s in summary[model].values() if s and s.get("inputs")), None)
        lat = latency.get(model) or {}
        if lat.get("no_sweep"):
            sweep = f"none: {lat['no_sweep']}"
        else:
            sweep = "; ".join(_shapes_text(s["inputs"]) for s in lat.get("shapes", []) if "seq" in s) or "-"
        static = "; ".join(f"{e}: {why}" for e, why in lat.get("static", {}).items())
        if static:
            sweep += f" (static, not swept: {static})"
        lines.append(f"| {model} | {_shapes_text(first and first['inputs'])} | {sweep} |")

    columns = [
        ("export_time", "export time"),
        ("ort_latency", "ORT latency, example inputs"),
        *((f"seq{s}", f"ORT latency, seq {s}") for s in data["seq"]),
        ("nodes", "nodes"),
        ("peak_rss_growth", "peak RSS growth"),
    ]
    for exporter, table in data["ratios"].items():
        flat = {
            m: {**r, **{f"seq{s}": v for s, v in r.get("ort_latency_by_seq", {}).items()}} for m, r in table.items()
        }
        lines += [
            "",
            f"## Ratios {exporter} / torch.onnx: median (spread), lower is better",
            "",
            "| model | " + " | ".join(title for _, title in columns) + " |",
            "|---|" + "---|" * len(columns),
        ]
        for model, row in flat.items():
            lines.append(f"| {model} | " + " | ".join(_fmt(row.get(key)) for key, _ in columns) + " |")
        lines.append("| **median of medians** | " + " | ".join(_median_row(flat, [k for k, _ in columns])) + " |")

    lines += [
        "",
        "## Per model",
        "",
        "| model | exporter | ok | export s | peak RSS +MB | nodes (top+sub+fn) | ORT ms | eager ms | max abs diff | 2nd input |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for model in data["models"]:
        example = shape_of(latency.get(model), "example")
        times = example["times"] if example else {}
        for exporter in exporters:
            s = summary[model].get(exporter)
            if s is None:
                continue
            ok = f"{s['ok_repeats']}/{s['repeats']}"
            if not s["ok_repeats"]:
                error = s.get("error", "?").splitlines()[0][:120].replace("|", "\\|")
                if s.get("unsupported_ops"):
                    error = f"unsupported ops: {', '.join(s['unsupported_ops'])}"
                lines.append(f"| {model} | {exporter} | **{ok}** | {_fmt(s.get('export_s'))} | | | | | {error} | |")
                continue
            n = s["nodes"]
            lines.append(
                f"| {model} | {exporter} | {ok} | {_fmt(s['export_s'])} | {_fmt(s['peak_rss_growth_mb'], 1)} | "
                f"{n['total']} ({n['top']}+{n['subgraphs']}+{n['functions']}) | {_ms(times.get(exporter))} | "
                f"{_ms(times.get(EAGER))} | {s['max_abs_diff']:.1e} | {s['max_abs_diff_second']:.1e} |"
            )

    if data["seq"]:
        lines += [
            "",
            f"## Sequence sweep, batch {data['batch']}: onnxruntime ms (median over rounds)",
            "",
            "| model | seq | " + " | ".join(exporters) + " |",
            "|---|---|" + "---|" * len(exporters),
        ]
        for model in data["models"]:
            lat = latency.get(model) or {}
            for shape in lat.get("shapes", []):
                if "seq" in shape:
                    cells = [_ms(shape["times"].get(e)) for e in exporters]
                    lines.append(f"| {model} | {shape['seq']} | " + " | ".join(cells) + " |")
        problems = [
            f"- {model}: {what}: {why.splitlines()[0][:200]}"
            for model in data["models"]
            for what, why in {
                **((latency.get(model) or {}).get("static", {})),
                **((latency.get(model) or {}).get("errors", {})),
                **({"latency": (latency.get(model) or {})["error"]} if (latency.get(model) or {}).get("error") else {}),
            }.items()
        ]
        if problems:
            lines += ["", "Not timed:", "", *problems]

    lines += [
        "",
        "## pt2onnx phases (seconds, median over repeats)",
        "",
        "| model | plugins | capture | decompose | translate | assemble | optimize | save | after capture / capture | re-traced | peak RSS +MB at end of capture / of export |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for model in data["models"]:
        s = summary[model].get("pt2onnx")
        if not s or "phases" not in s:
            continue
        p = s["phases"]
        cells = [
            _fmt(p.get(k), 3) for k in ("plugins", "capture", "decompose", "translate", "assemble", "optimize", "save")
        ]
        memory = s.get("phase_peak_rss_growth_mb", {})
        lines.append(
            f"| {model} | {' | '.join(cells)} | {_fmt(s.get('after_capture_over_capture'))} | {s.get('retraced')} | "
            f"{_fmt(memory.get('capture'), 1)} / {_fmt(s['peak_rss_growth_mb'], 1)} |"
        )
    lines += _floor_table(data)
    lines += ["", "## Optimization passes of pt2onnx (nodes removed / ms, first repeat)", ""]
    pt2onnx = [s for m in data["models"] if (s := summary[m].get("pt2onnx")) and s.get("passes")]
    pass_names = list(dict.fromkeys(p["name"] for s in pt2onnx for p in s["passes"]))
    if pass_names:
        lines.append("| model | translated | " + " | ".join(pass_names) + " | final |")
        lines.append("|---|---|" + "---|" * len(pass_names) + "---|")
        for model in data["models"]:
            s = summary[model].get("pt2onnx")
            if not s or not s.get("passes"):
                continue
            by = {p["name"]: p for p in s["passes"]}
            cells = [f"-{by[n]['removed']} / {by[n]['seconds'] * 1e3:.0f}" if n in by else "off" for n in pass_names]
            lines.append(f"| {model} | {s['nodes_translated']} | {' | '.join(cells)} | {s['nodes_final']} |")
    lines += ["", "## Targets", "", "| target | measured | limit | met |", "|---|---|---|---|"]
    for t in data["targets"]:
        bound = "≥" if t.get("at_least") else "≤"
        lines.append(f"| {t['target']} | {_fmt(t['value'])} | {bound} {t['limit']} | {_met(t['met'])} |")
    if data.get("scaling"):
        lines += ["", "## Depth scaling (nn.TransformerEncoder, d=256): export seconds, one export each", ""]
        for exporter, s in data["scaling"].items():
            pts = ", ".join(f"{p['layers']}L {p['export_s']:.2f}" for p in s["points"])
            slopes = ", ".join(f"{x['from']}→{x['to']}: {x['s_per_layer'] * 1e3:.0f} ms/layer" for x in s["slopes"])
            last = s.get("last_slope_over_first")
            lines.append(f"- **{exporter}**: {pts}. Slope {slopes}. Last slope / first: {_fmt(last)}.")
    return "\n".join(lines) + "\n"


def _floor_table(data: dict[str, Any]) -> list[str]:
    """Issue #27's floor: pt2onnx's graph work against torch.export alone, its save against a raw write."""
    lines = [
        "",
        "## pt2onnx against its floor: torch.export alone, a raw write of the same bytes",
        "",
        "torch.export alone: `torch.export.export` with the options pt2onnx's capture passes, in the same "
        "worker process, before the export in odd repeats and after it in even ones. Raw write: as many "
        "bytes as the save wrote, with `os.write` in 64 MiB pieces and `fsync`, to the same folder right "
        "after the save. Seconds: median (min-max) over repeats; ratios: median of the per-repeat ratios. "
        "Targets (issue #27): graph / capture ≤ 0.2; save rate / raw rate (raw write s / save s) ≥ 0.9.",
        "",
        "| model | exporter | torch.export alone s | pt2onnx capture / alone | translate+assemble+optimize s "
        "| / capture alone | MB saved | save s | raw write s | save rate / raw rate |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for exporter, table in data["ratios"].items():
        for model, row in table.items():
            f = row.get("floor")
            if not f:
                continue
            cells = [
                _fmt(f["capture_alone_s"], 3),
                _fmt(f["capture_over_alone"]),
                _fmt(f["graph_s"], 3),
                _fmt(f["graph_over_capture"]),
                _fmt(f["saved_mb"], 1),
                _fmt(f["save_s"], 3),
                _fmt(f["raw_write_s"], 3),
                _fmt(f["save_rate_over_raw"]),
            ]
            lines.append(f"| {model} | {exporter} | " + " | ".join(cells) + " |")
    return lines


def _bars(ax: Any, groups: list[str], series: dict[str, list[dict[str, float] | float | None]], title: str) -> None:
    """Grouped bars of ratios, with error bars from each spread's low-high."""
    width = 0.8 / max(len(series), 1)
    for i, (label, values) in enumerate(series.items()):
        mid, err_low, err_high = [], [], []
        for v in values:
            if isinstance(v, dict):
                mid.append(v["value"])
                err_low.append(v["value"] - v["low"])
                err_high.append(v["high"] - v["value"])
            else:
                mid.append(v if v is not None else math.nan)
                err_low.append(0.0)
                err_high.append(0.0)
        xs = [x + i * width for x in range(len(groups))]
        ax.bar(xs, mid, width, yerr=[err_low, err_high], capsize=2, label=label)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([x + width * (len(series) - 1) / 2 for x in range(len(groups))])
    ax.set_xticklabels(groups, rotation=45, ha="right", fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)


def plot(data: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(20, 10))
    flat = list(axes.flat)
    tables = data["ratios"]
    models = data["models"]
    repeats = f"median, min-max over {data['repeats']} repeats"
    _bars(
        flat[0],
        models,
        {e: [t.get(m, {}).get("export_time") for m in models] for e, t in tables.items()},
        f"export time / torch.onnx ({repeats})",
    )
    _bars(
        flat[1],
        models,
        {e: [t.get(m, {}).get("ort_latency") for m in models] for e, t in tables.items()},
        "onnxruntime latency / torch.onnx, example inputs (95% bootstrap)",
    )
    swept = [m for m in models if any(t.get(m, {}).get("ort_latency_by_seq") for t in tables.values())]
    _bars(
        flat[2],
        swept,
        {
            f"{e} seq {s}": [t.get(m, {}).get("ort_latency_by_seq", {}).get(str(s)) for m in swept]
            for e, t in tables.items()
            for s in data["seq"]
        },
        f"onnxruntime latency / torch.onnx, batch {data['batch']} by sequence length (95% bootstrap)",
    )
    _bars(
        flat[3],
        models,
        {e: [t.get(m, {}).get("nodes") for m in models] for e, t in tables.items()},
        "ONNX nodes / torch.onnx (incl. subgraphs, functions)",
    )
    _bars(
        flat[4],
        models,
        {e: [t.get(m, {}).get("peak_rss_growth") for m in models] for e, t in tables.items()},
        f"peak RSS growth / torch.onnx ({repeats})",
    )
    if data.get("scaling"):
        ax = flat[5]
        for exporter, s in data["scaling"].items():
            ax.plot([p["layers"] for p in s["points"]], [p["export_s"] for p in s["points"]], "o-", label=exporter)
        ax.set_xlabel("encoder layers")
        ax.set_ylabel("export time (s)")
        ax.set_title("depth scaling", fontsize=10)
        ax.legend(fontsize=8)
    else:
        flat[5].axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
