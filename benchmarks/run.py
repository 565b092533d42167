"""pt2onnx against torch.onnx.export(dynamo=True), side by side, with every ratio's spread.

    python benchmarks/run.py                      # the full benchmark
    python benchmarks/run.py --models mlp,llama_tiny --repeats 2 --runs 5 --seq 32,128 \\
        --scaling none --scaling-baseline none    # a quick look

1. Exports, ``--repeats`` times, interleaved: repeat r exports every model with every
   exporter, in an order rotated by r so no exporter always goes first; each export runs in
   its own process (``worker.py``: clean peak-RSS figures, a crash is recorded instead of
   ending the run). Export-time ratios: the median over repeats of the per-repeat ratio,
   with its min-max.
2. onnxruntime latency, after the exports: per model, one process (``latency.py``) loads
   every exporter's file and times them in interleaved rounds, at the model's example inputs
   and, for models with a dynamic sequence length, at batch ``--batch`` and every ``--seq``
   length. Latency ratios: the ratio of medians over rounds, with a 95% bootstrap interval
   over rounds (``spread.py``).
3. The depth scan (``--scaling``): export time of ``nn.TransformerEncoder`` against depth.

Writes ``results.json``, ``results.md`` and ``results.png`` under ``--out`` (default
``benchmarks/results``), with the environment: versions, CPU, cores, threads, input shapes.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import itertools
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from spread import (  # noqa: E402
    INTERVAL,
    RESAMPLES,
    Spread,
    bootstrap_ratio,
    median_of,
    over_repeats,
    ratios_per_repeat,
    worst_of,
)

from models import MODELS  # noqa: E402

BASELINE = "torch.onnx"
EAGER = "eager"  # the latency process's name for eager PyTorch (latency.EAGER)


def _has_ort_pack() -> bool:
    from worker import ORT_PLUGIN

    from pt2onnx.plugin_manager import load_plugins

    return ORT_PLUGIN in load_plugins(None).plugins


# -- measuring -----------------------------------------------------------------------


def exporter_order(exporters: list[str], repeat: int) -> list[str]:
    """The exporters in the order repeat ``repeat`` runs them: rotated, so none always goes first."""
    shift = repeat % len(exporters)
    return exporters[shift:] + exporters[:shift]


def run_one(model: str, exporter: str, timeout: float, directory: Path, warm_up: bool = True) -> dict[str, Any]:
    """One export in a worker subprocess (no latency: that is timed interleaved later)."""
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / f"{model}.{exporter}.json"
    command = [sys.executable, str(HERE / "worker.py"), model, exporter, str(out), "--runs", "0"]
    if not warm_up:
        command.append("--no-warmup")
    start = time.perf_counter()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"model": model, "exporter": exporter, "ok": False, "error": f"timeout after {timeout:.0f} s"}
    if out.exists():
        record = json.loads(out.read_text())
    else:
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        record = {"model": model, "exporter": exporter, "ok": False, "error": f"worker exit {proc.returncode}: {tail}"}
    record["process_s"] = time.perf_counter() - start
    status = "ok" if record.get("ok") else "FAILED: " + record.get("error", "?").splitlines()[0][:150]
    print(f"  {model:<16} {exporter:<12} {record.get('export_s', math.nan):7.2f} s  {status}", flush=True)
    return record


def export_repeats(
    models: list[str], exporters: list[str], repeats: int, timeout: float, workdir: Path, warm_up: bool
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Path]]]:
    """Every repeat's records, and per model the file each exporter's first successful export saved.

    Later repeats' files are deleted as soon as they are measured: the 125M Llama's are 500 MB each.
    """
    records: list[dict[str, Any]] = []
    kept: dict[str, dict[str, Path]] = {m: {} for m in models}
    for repeat in range(repeats):
        print(f"exports, repeat {repeat + 1}/{repeats}", flush=True)
        directory = workdir / f"repeat{repeat}"
        for model in models:
            for exporter in exporter_order(exporters, repeat):
                record = run_one(model, exporter, timeout, directory, warm_up)
                record["repeat"] = repeat
                records.append(record)
                path = directory / f"{model}.{exporter}.onnx"
                if record.get("ok") and exporter not in kept[model]:
                    kept[model][exporter] = path
                else:
                    for file in directory.glob(f"{path.name}*"):
                        file.unlink()
    return records, kept


def interleaved_latency(
    model: str, files: dict[str, Path], args: argparse.Namespace, workdir: Path
) -> dict[str, Any] | None:
    """Every exporter's file of ``model`` timed in one process (``latency.py``): round times per shape."""
    if not files:
        return None
    out = workdir / f"{model}.latency.json"
    command = [
        sys.executable,
        str(HERE / "latency.py"),
        model,
        str(out),
        *(f"{exporter}={path}" for exporter, path in files.items()),
        "--runs",
        str(args.runs),
        "--threads",
        str(args.threads),
        "--seq",
        "" if args.seq == "none" else args.seq,
        "--batch",
        str(args.batch),
    ]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {args.timeout:.0f} s"}
    if not out.exists():
        return {"error": f"latency process exit {proc.returncode}: {proc.stderr.strip()[-2000:]}"}
    result: dict[str, Any] = json.loads(out.read_text())
    timed = ", ".join(
        f"{s['label']}: " + " / ".join(f"{e} {statistics.median(t) * 1e3:.2f}" for e, t in s["times"].items() if t)
        for s in result.get("shapes", [])
    )
    print(f"  {model:<16} ms {timed or result.get('error', '?')[:300]}", flush=True)
    return result


# -- analysis ------------------------------------------------------------------------


def _by_repeat(records: list[dict[str, Any]], model: str, exporter: str) -> dict[int, dict[str, Any]]:
    return {r["repeat"]: r for r in records if r["model"] == model and r["exporter"] == exporter and r.get("ok")}


def _spread(values: list[float]) -> dict[str, float] | None:
    spread = over_repeats(values)
    return spread.to_dict() if spread else None


def _after_capture(record: dict[str, Any]) -> float | None:
    phases = record.get("phases")
    if not phases or not phases.get("capture"):
        return None
    after = sum(v for k, v in phases.items() if k not in ("plugins", "capture"))
    return float(after / phases["capture"])


def summarize(records: list[dict[str, Any]], model: str, exporter: str) -> dict[str, Any] | None:
    """One (model, exporter) over its repeats: medians with min-max, the first success's details."""
    tried = [r for r in records if r["model"] == model and r["exporter"] == exporter]
    if not tried:
        return None
    ok = [r for r in tried if r.get("ok")]
    summary: dict[str, Any] = {"repeats": len(tried), "ok_repeats": len(ok)}
    if not ok:
        summary["error"] = tried[0].get("error", "?")
        summary["unsupported_ops"] = tried[0].get("unsupported_ops")
        summary["export_s"] = _spread([r["export_s"] for r in tried if "export_s" in r])
        return summary
    first = ok[0]
    summary.update(
        family=first.get("family"),
        inputs=first.get("inputs"),
        nodes=first["nodes"],
        file_mb=first.get("file_mb"),
        export_s=_spread([r["export_s"] for r in ok]),
        peak_rss_growth_mb=_spread([r["peak_rss_growth_mb"] for r in ok]),
        max_abs_diff=max(r["max_abs_diff"] for r in ok),
        max_abs_diff_second=max(r["max_abs_diff_second"] for r in ok),
    )
    if len(ok) < len(tried):
        summary["error"] = next(r.get("error", "?") for r in tried if not r.get("ok"))
    if "phases" in first:
        summary["phases"] = {k: statistics.median(r["phases"][k] for r in ok) for k in first["phases"]}
        summary["after_capture_over_capture"] = _spread([a for r in ok if (a := _after_capture(r)) is not None])
        summary["phase_peak_rss_growth_mb"] = first.get("phase_peak_rss_growth_mb", {})
        summary["retraced"] = any(r.get("retraced") for r in ok)
        for key in ("nodes_translated", "nodes_final", "passes"):
            summary[key] = first.get(key)
    return summary


def _shape(latency: dict[str, Any] | None, label: str) -> dict[str, Any] | None:
    if not latency:
        return None
    return next((s for s in latency.get("shapes", []) if s["label"] == label), None)


def _latency_ratio(shape: dict[str, Any] | None, exporter: str) -> dict[str, float] | None:
    if not shape or not shape["times"].get(exporter) or not shape["times"].get(BASELINE):
        return None
    return bootstrap_ratio(shape["times"][exporter], shape["times"][BASELINE]).to_dict()


def _per_repeat(
    ours: dict[int, dict[str, Any]],
    ref: dict[int, dict[str, Any]],
    both: list[int],
    get: Callable[[dict[str, Any]], float],
) -> dict[str, float] | None:
    return _spread(ratios_per_repeat([get(ours[r]) for r in both], [get(ref[r]) for r in both]))


def ratios(
    records: list[dict[str, Any]], latency: dict[str, dict[str, Any] | None], models: list[str], exporter: str
) -> dict[str, dict[str, Any]]:
    """Per model: ``exporter``'s figures over torch.onnx's, each a median with its spread."""
    table: dict[str, dict[str, Any]] = {}
    for model in models:
        ours, ref = _by_repeat(records, model, exporter), _by_repeat(records, model, BASELINE)
        if not ours:
            continue
        both = sorted(set(ours) & set(ref))
        first = ours[min(ours)]

        row: dict[str, Any] = {
            "family": first.get("family"),
            "after_capture_over_capture": _spread([a for r in ours.values() if (a := _after_capture(r)) is not None]),
        }
        if both:
            row["export_time"] = _per_repeat(ours, ref, both, lambda r: r["export_s"])
            row["peak_rss_growth"] = _per_repeat(ours, ref, both, lambda r: max(r["peak_rss_growth_mb"], 0.0))
            row["nodes"] = first["nodes"]["total"] / ref[min(ref)]["nodes"]["total"]
        row["ort_latency"] = _latency_ratio(_shape(latency.get(model), "example"), exporter)
        sweep = {}
        for shape in (latency.get(model) or {}).get("shapes", []):
            if "seq" in shape:
                sweep[str(shape["seq"])] = _latency_ratio(shape, exporter)
        row["ort_latency_by_seq"] = sweep
        table[model] = row
    return table


def _spreads(rows: list[dict[str, Any]], key: str) -> list[Spread | None]:
    return [Spread.from_dict(r.get(key)) for r in rows]


def targets(
    table: dict[str, dict[str, Any]], fused: dict[str, dict[str, Any]] | None, latency_ms: dict[str, float]
) -> list[dict[str, Any]]:
    """Issue #15's targets (and the earlier memory and node-count ones), each measured: met or not."""
    rows = list(table.values())
    transformers = [r for r in rows if r["family"] == "transformer"]
    export = _spreads(rows, "export_time")
    checks = [
        ("export time, median of medians", median_of(export), 0.25),
        ("export time, worst model in any repeat", max((s.high for s in export if s), default=None), 0.4),
        ("time after capture / capture, worst model", worst_of(_spreads(rows, "after_capture_over_capture")), 0.2),
        ("peak RSS growth, median of medians", median_of(_spreads(rows, "peak_rss_growth")), 0.2),
        ("peak RSS growth, worst model", worst_of(_spreads(rows, "peak_rss_growth")), 1.0),
        (
            "node count on transformers, worst ratio",
            max((r["nodes"] for r in transformers if "nodes" in r), default=None),
            0.6,
        ),
        ("onnxruntime latency, median of medians (standard ops)", median_of(_spreads(rows, "ort_latency")), 0.9),
        ("onnxruntime latency, worst model (standard ops)", worst_of(_spreads(rows, "ort_latency")), 1.0),
    ]
    if fused:
        checks.append(
            (
                "onnxruntime latency, median of medians (+ort fusions)",
                median_of(_spreads(list(fused.values()), "ort_latency")),
                0.7,
            )
        )
        if "llama_125m" in latency_ms:
            checks.append(("Llama 125M latency with +ort fusions, ms", latency_ms["llama_125m"], 120.0))
    return [
        {"target": name, "value": value, "limit": limit, "met": value is not None and value <= limit}
        for name, value, limit in checks
    ]


def scaling_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Export time against depth; per-layer slope between consecutive depths, per exporter."""
    summary: dict[str, Any] = {}
    for exporter in dict.fromkeys(r["exporter"] for r in records):
        points = sorted(
            (int(r["model"][len("encoder_") : -1]), r["export_s"], r.get("phases", {}))
            for r in records
            if r["exporter"] == exporter and r.get("ok")
        )
        slopes = [
            {"from": a[0], "to": b[0], "s_per_layer": (b[1] - a[1]) / (b[0] - a[0])}
            for a, b in itertools.pairwise(points)
        ]
        summary[exporter] = {"points": [{"layers": p[0], "export_s": p[1], "phases": p[2]} for p in points]}
        summary[exporter]["slopes"] = slopes
        if len(slopes) >= 2:
            summary[exporter]["last_slope_over_first"] = slopes[-1]["s_per_layer"] / slopes[0]["s_per_layer"]
    return summary


def environment() -> dict[str, Any]:
    """What the figures depend on besides the code: versions, CPU, cores, load."""
    versions = {"python": platform.python_version()}
    for dist in ("pt2onnx", "torch", "onnxruntime", "onnx", "onnxscript", "transformers"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = "not installed"
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        cpu = next(
            (ln.split(":", 1)[1].strip() for ln in cpuinfo.read_text().splitlines() if ln.startswith("model name")), cpu
        )
    return {
        "versions": versions,
        "cpu": cpu,
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "platform": platform.platform(),
        "load_average_start": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }


# -- output --------------------------------------------------------------------------


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
        example = _shape(latency.get(model), "example")
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
        lines.append(f"| {t['target']} | {_fmt(t['value'])} | ≤ {t['limit']} | {'yes' if t['met'] else '**no**'} |")
    if data.get("scaling"):
        lines += ["", "## Depth scaling (nn.TransformerEncoder, d=256): export seconds, one export each", ""]
        for exporter, s in data["scaling"].items():
            pts = ", ".join(f"{p['layers']}L {p['export_s']:.2f}" for p in s["points"])
            slopes = ", ".join(f"{x['from']}→{x['to']}: {x['s_per_layer'] * 1e3:.0f} ms/layer" for x in s["slopes"])
            last = s.get("last_slope_over_first")
            lines.append(f"- **{exporter}**: {pts}. Slope {slopes}. Last slope / first: {_fmt(last)}.")
    return "\n".join(lines) + "\n"


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated (default: all)")
    parser.add_argument("--exporters", default=None, help="default: pt2onnx, torch.onnx, and pt2onnx+ort if installed")
    parser.add_argument("--repeats", type=int, default=3, help="export repeats (ratios: median, min-max)")
    parser.add_argument("--runs", type=int, default=20, help="interleaved latency rounds per input shape")
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads (and eager torch's)")
    parser.add_argument("--seq", default="32,128,512", help="sequence lengths of the latency sweep, or 'none'")
    parser.add_argument("--batch", type=int, default=2, help="batch size of the sequence sweep")
    parser.add_argument("--scaling", default="4,8,16,32,64", help="encoder depths for pt2onnx, or 'none'")
    parser.add_argument("--scaling-baseline", default="4,8,16", help="depths for torch.onnx, or 'none'")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per export or latency process")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--no-warmup", action="store_true", help="measure exporters cold (faster run)")
    args = parser.parse_args()
    if args.repeats < 1 or args.runs < 1:
        parser.error("--repeats and --runs must be at least 1")

    exporters = args.exporters.split(",") if args.exporters else ["pt2onnx", BASELINE]
    if not args.exporters and _has_ort_pack():
        exporters.insert(1, "pt2onnx+ort")
    models = [m for m in args.models.split(",") if m]
    seqs = [] if args.seq == "none" else [int(s) for s in args.seq.split(",") if s]
    env = environment()
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    start = time.perf_counter()
    print(f"{len(models)} models x {exporters}, {args.repeats} repeats", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        records, kept = export_repeats(models, exporters, args.repeats, args.timeout, workdir, not args.no_warmup)
        print("onnxruntime latency, interleaved", flush=True)
        latency = {model: interleaved_latency(model, kept[model], args, workdir) for model in models}
        depths = {
            "pt2onnx": [] if args.scaling == "none" else [int(d) for d in args.scaling.split(",")],
            BASELINE: [] if args.scaling_baseline == "none" else [int(d) for d in args.scaling_baseline.split(",")],
        }
        if any(depths.values()):
            print("depth scaling", flush=True)
        scaling_records = [
            run_one(f"encoder_{n}l", exporter, args.timeout, workdir / "scaling")
            for exporter, layers in depths.items()
            for n in layers
        ]
    env["load_average_end"] = os.getloadavg() if hasattr(os, "getloadavg") else None

    table = {e: ratios(records, latency, models, e) for e in exporters if e != BASELINE}
    fused_ms = {}
    for model in models:
        example = _shape(latency.get(model), "example")
        if example and example["times"].get("pt2onnx+ort"):
            fused_ms[model] = statistics.median(example["times"]["pt2onnx+ort"]) * 1e3
    data: dict[str, Any] = {
        "command": " ".join(["python", "benchmarks/run.py", *sys.argv[1:]]),
        "started": started,
        "wall_s": time.perf_counter() - start,
        "environment": env,
        "repeats": args.repeats,
        "runs": args.runs,
        "threads": args.threads,
        "batch": args.batch,
        "seq": seqs,
        "warm_up": not args.no_warmup,
        "models": models,
        "exporters": exporters,
        "summary": {m: {e: summarize(records, m, e) for e in exporters} for m in models},
        "ratios": table,
        "targets": targets(table.get("pt2onnx", {}), table.get("pt2onnx+ort"), fused_ms),
        "latency": latency,
        "records": records,
        "scaling": scaling_summary(scaling_records) if scaling_records else {},
        "scaling_records": scaling_records,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(data, indent=1))
    (args.out / "results.md").write_text(markdown(data))
    plot(data, args.out / "results.png")
    print(f"wrote {args.out}/results.{{json,md,png}} in {data['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
