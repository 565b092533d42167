"""pt2onnx against torch.onnx.export(dynamo=True), side by side, in one run.

    python benchmarks/run.py                      # the full benchmark (~10 min on 2 cores)
    python benchmarks/run.py --models mlp,cnn --runs 5 --scaling none   # a quick look

Every (model, exporter) export runs in its own subprocess (``worker.py``): clean peak-RSS
figures, and a crash is recorded instead of ending the run. Writes ``results.json``,
``results.md`` and ``results.png`` under ``--out`` (default ``benchmarks/results``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from models import MODELS  # noqa: E402

BASELINE = "torch.onnx"


def _has_ort_pack() -> bool:
    from worker import ORT_PLUGIN

    from pt2onnx.plugin_manager import load_plugins

    return ORT_PLUGIN in load_plugins(None).plugins


def run_one(
    model: str, exporter: str, runs: int, timeout: float, workdir: Path, warm_up: bool = True
) -> dict[str, Any]:
    """One worker subprocess; a crash or timeout becomes a failed record."""
    out = workdir / f"{model}.{exporter}.json"
    command = [sys.executable, str(HERE / "worker.py"), model, exporter, str(out), "--runs", str(runs)]
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
    print(f"  {model:<14} {exporter:<12} {record.get('export_s', math.nan):7.2f} s  {status}", flush=True)
    return record


def paired_latency(model: str, records: list[dict[str, Any]], runs: int, timeout: float, workdir: Path) -> None:
    """Time the exporters' files of ``model`` interleaved (``latency.py``): ``ort_latency_paired_s``."""
    if len(records) < 2:
        return
    files = [workdir / f"{model}.{r['exporter']}.onnx" for r in records]
    out = workdir / f"{model}.latency.json"
    command = [sys.executable, str(HERE / "latency.py"), model, str(out), *map(str, files), "--runs", str(runs)]
    try:
        subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=True)
    except (subprocess.SubprocessError, OSError) as e:
        print(f"  {model:<14} interleaved latency failed: {e}", flush=True)
        return
    medians = json.loads(out.read_text())
    for record, file in zip(records, files):
        record["ort_latency_paired_s"] = medians[str(file)]


# -- analysis ------------------------------------------------------------------------


def _get(records: list[dict[str, Any]], model: str, exporter: str) -> dict[str, Any] | None:
    return next((r for r in records if r["model"] == model and r["exporter"] == exporter), None)


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b


def ratios(records: list[dict[str, Any]], exporter: str) -> dict[str, dict[str, Any]]:
    """Per model: ``exporter``'s figures divided by torch.onnx's (both exported and verified)."""
    table: dict[str, dict[str, Any]] = {}
    for model in dict.fromkeys(r["model"] for r in records):
        ours, ref = _get(records, model, exporter), _get(records, model, BASELINE)
        if not (ours and ref and ours.get("ok") and ref.get("ok")):
            continue
        phases = ours.get("phases", {})
        after = sum(v for k, v in phases.items() if k not in ("plugins", "capture"))
        table[model] = {
            "family": ours.get("family"),
            "export_time": _ratio(ours["export_s"], ref["export_s"]),
            "peak_rss_growth": _ratio(max(ours["peak_rss_growth_mb"], 0.0), max(ref["peak_rss_growth_mb"], 0.0)),
            "nodes": _ratio(ours["nodes"]["total"], ref["nodes"]["total"]),
            # Interleaved timings when there are (same load on both), else the separate ones.
            "ort_latency": _ratio(
                ours.get("ort_latency_paired_s", ours["ort_latency_s"]),
                ref.get("ort_latency_paired_s", ref["ort_latency_s"]),
            ),
            "after_capture_over_capture": _ratio(after, phases.get("capture")) if phases else None,
        }
    return table


def _median(values: list[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _max(values: list[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return max(values) if values else None


def targets(table: dict[str, dict[str, Any]], fused: dict[str, dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The issue's targets, each with its measured value and met/missed."""
    rows = list(table.values())
    transformers = [r for r in rows if r["family"] == "transformer"]
    checks = [
        ("export time, median ratio", _median([r["export_time"] for r in rows]), 0.25),
        ("export time, worst ratio", _max([r["export_time"] for r in rows]), 0.4),
        ("time after capture / capture, worst", _max([r["after_capture_over_capture"] for r in rows]), 0.25),
        ("peak RSS growth, median ratio", _median([r["peak_rss_growth"] for r in rows]), 0.2),
        ("peak RSS growth, worst ratio", _max([r["peak_rss_growth"] for r in rows]), 1.0),
        ("node count on transformers, worst ratio", _max([r["nodes"] for r in transformers]), 0.6),
        ("onnxruntime latency, median ratio (standard ops)", _median([r["ort_latency"] for r in rows]), 0.9),
    ]
    if fused:
        checks.append(
            (
                "onnxruntime latency, median ratio (+ort fusions)",
                _median([r["ort_latency"] for r in fused.values()]),
                0.75,
            )
        )
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


# -- output --------------------------------------------------------------------------


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f}"


def markdown(data: dict[str, Any]) -> str:
    records, exporters = data["records"], data["exporters"]
    lines = [
        "# pt2onnx vs torch.onnx.export(dynamo=True)",
        "",
        f"Command: `{data['command']}`  ",
        f"{data['started']} UTC; torch {data['versions']['torch']}, onnxruntime {data['versions']['onnxruntime']}, "
        f"onnxscript {data['versions']['onnxscript']}; {data['machine']}; wall time {data['wall_s']:.0f} s.",
        "Every export ran in its own process"
        + (
            ", after a warm-up export of a tiny MLP by the same exporter (one-time initialization not counted)"
            if data["warm_up"]
            else ", cold (no warm-up export)"
        )
        + ". Latency: median of "
        f"{data['runs']} runs after 3 warm-up runs, 1 thread. Peak RSS growth: VmHWM after export and save "
        "minus VmRSS before.",
        "",
        "## Per model",
        "",
        "| model | exporter | ok | export s | peak RSS +MB | nodes (top+sub+fn) | ORT ms | ORT ms interleaved "
        "| eager ms | max abs diff | 2nd input |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for model in data["models"]:
        for exporter in exporters:
            r = _get(records, model, exporter)
            if r is None:
                continue
            if not r.get("ok"):
                error = r.get("error", "?").splitlines()[0][:120].replace("|", "\\|")
                ops = r.get("unsupported_ops")
                if ops:
                    error = f"unsupported ops: {', '.join(ops)}"
                lines.append(f"| {model} | {exporter} | **no** | {_fmt(r.get('export_s'))} | | | | | | {error} | |")
                continue
            n = r["nodes"]
            lines.append(
                f"| {model} | {exporter} | yes | {_fmt(r['export_s'])} | {_fmt(r['peak_rss_growth_mb'], 1)} | "
                f"{n['total']} ({n['top']}+{n['subgraphs']}+{n['functions']}) | {_ms(r['ort_latency_s'])} | "
                f"{_ms(r.get('ort_latency_paired_s'))} | "
                f"{_ms(r['eager_latency_s'])} | {r['max_abs_diff']:.1e} | {r['max_abs_diff_second']:.1e} |"
            )
    lines += [
        "",
        "## pt2onnx phases (seconds)",
        "",
        "| model | plugins | capture | decompose | translate | assemble | optimize | save | after capture / capture | re-traced | peak RSS +MB at end of capture / of export |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for model in data["models"]:
        r = _get(records, model, "pt2onnx")
        if not r or "phases" not in r:
            continue
        p = r["phases"]
        after = sum(v for k, v in p.items() if k not in ("plugins", "capture"))
        cells = [
            _fmt(p.get(k), 3) for k in ("plugins", "capture", "decompose", "translate", "assemble", "optimize", "save")
        ]
        memory = r.get("phase_peak_rss_growth_mb", {})
        lines.append(
            f"| {model} | {' | '.join(cells)} | {_fmt(_ratio(after, p.get('capture')))} | {r.get('retraced')} | "
            f"{_fmt(memory.get('capture'), 1)} / {_fmt(r.get('peak_rss_growth_mb'), 1)} |"
        )
    lines += ["", "## Optimization passes of pt2onnx (nodes removed / ms)", ""]
    pass_names = list(
        dict.fromkeys(p["name"] for r in records if r["exporter"] == "pt2onnx" for p in r.get("passes", []))
    )
    if pass_names:
        lines.append("| model | translated | " + " | ".join(pass_names) + " | final |")
        lines.append("|---|---|" + "---|" * len(pass_names) + "---|")
        for model in data["models"]:
            r = _get(records, model, "pt2onnx")
            if not r or "passes" not in r:
                continue
            by = {p["name"]: p for p in r["passes"]}
            cells = [f"-{by[n]['removed']} / {by[n]['seconds'] * 1e3:.0f}" if n in by else "off" for n in pass_names]
            lines.append(f"| {model} | {r['nodes_translated']} | {' | '.join(cells)} | {r['nodes_final']} |")
    for exporter, table in data["ratios"].items():
        lines += [
            "",
            f"## Ratios {exporter} / torch.onnx (lower is better)",
            "",
            "| model | export time | peak RSS growth | nodes | ORT latency | after capture / capture |",
            "|---|---|---|---|---|---|",
        ]
        for model, r in table.items():
            lines.append(
                f"| {model} | {_fmt(r['export_time'])} | {_fmt(r['peak_rss_growth'])} | {_fmt(r['nodes'])} | "
                f"{_fmt(r['ort_latency'])} | {_fmt(r['after_capture_over_capture'])} |"
            )
    lines += ["", "## Targets", "", "| target | measured | limit | met |", "|---|---|---|---|"]
    for t in data["targets"]:
        lines.append(f"| {t['target']} | {_fmt(t['value'])} | ≤ {t['limit']} | {'yes' if t['met'] else '**no**'} |")
    if data.get("scaling"):
        lines += ["", "## Depth scaling (nn.TransformerEncoder, d=256): export seconds", ""]
        for exporter, s in data["scaling"].items():
            pts = ", ".join(f"{p['layers']}L {p['export_s']:.2f}" for p in s["points"])
            slopes = ", ".join(f"{x['from']}→{x['to']}: {x['s_per_layer'] * 1e3:.0f} ms/layer" for x in s["slopes"])
            last = s.get("last_slope_over_first")
            lines.append(f"- **{exporter}**: {pts}. Slope {slopes}. Last slope / first: {_fmt(last)}.")
    return "\n".join(lines) + "\n"


def plot(data: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records, models, exporters = data["records"], data["models"], data["exporters"]
    panels = [
        ("export_s", "export time (s)", lambda r: r["export_s"]),
        ("rss", "peak RSS growth (MB)", lambda r: r["peak_rss_growth_mb"]),
        ("nodes", "ONNX nodes (incl. functions)", lambda r: r["nodes"]["total"]),
        ("ort", "onnxruntime latency (ms)", lambda r: r.get("ort_latency_paired_s", r["ort_latency_s"]) * 1e3),
    ]
    ncols = 3 if data.get("scaling") else 2
    fig, axes = plt.subplots(2, ncols, figsize=(7 * ncols, 9))
    flat = list(axes.flat)
    width = 0.8 / max(len(exporters), 1)
    for ax, (_, title, get) in zip(flat, panels):
        for i, exporter in enumerate(exporters):
            values = []
            for m in models:
                r = _get(records, m, exporter)
                values.append(get(r) if r and r.get("ok") else 0.0)
            ax.bar([x + i * width for x in range(len(models))], values, width, label=exporter)
        ax.set_xticks([x + width * (len(exporters) - 1) / 2 for x in range(len(models))])
        ax.set_xticklabels(models, rotation=45, ha="right", fontsize=8)
        ax.set_yscale("log")
        ax.set_title(title)
        ax.legend(fontsize=8)
    if data.get("scaling"):
        ax = flat[4]
        for exporter, s in data["scaling"].items():
            ax.plot([p["layers"] for p in s["points"]], [p["export_s"] for p in s["points"]], "o-", label=exporter)
        ax.set_xlabel("encoder layers")
        ax.set_ylabel("export time (s)")
        ax.set_title("depth scaling")
        ax.legend(fontsize=8)
        flat[5].axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated (default: all)")
    parser.add_argument("--exporters", default=None, help="default: pt2onnx, torch.onnx, and pt2onnx+ort if installed")
    parser.add_argument("--runs", type=int, default=20, help="latency runs (median)")
    parser.add_argument("--scaling", default="4,8,16,32,64", help="encoder depths for pt2onnx, or 'none'")
    parser.add_argument("--scaling-baseline", default="4,8,16", help="depths for torch.onnx, or 'none'")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per export process")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--no-warmup", action="store_true", help="measure exporters cold (faster run)")
    args = parser.parse_args()

    import onnxruntime
    import onnxscript
    import torch

    exporters = args.exporters.split(",") if args.exporters else ["pt2onnx", BASELINE]
    if not args.exporters and _has_ort_pack():
        exporters.insert(1, "pt2onnx+ort")
    models = [m for m in args.models.split(",") if m]
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    start = time.perf_counter()
    records, scaling_records = [], []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        print(f"{len(models)} models x {exporters}", flush=True)
        for model in models:
            done = [
                run_one(model, exporter, args.runs, args.timeout, workdir, not args.no_warmup) for exporter in exporters
            ]
            paired_latency(model, [r for r in done if r.get("ok")], args.runs, args.timeout, workdir)
            records.extend(done)
        depths = {
            "pt2onnx": [] if args.scaling == "none" else [int(d) for d in args.scaling.split(",")],
            BASELINE: [] if args.scaling_baseline == "none" else [int(d) for d in args.scaling_baseline.split(",")],
        }
        if any(depths.values()):
            print("depth scaling", flush=True)
        for exporter, layers in depths.items():
            for n in layers:
                scaling_records.append(run_one(f"encoder_{n}l", exporter, 2, args.timeout, workdir))

    table = {e: ratios(records, e) for e in exporters if e != BASELINE}
    data: dict[str, Any] = {
        "command": " ".join(["python", "benchmarks/run.py", *sys.argv[1:]]),
        "started": started,
        "wall_s": time.perf_counter() - start,
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}, python {platform.python_version()}",
        "versions": {
            "torch": torch.__version__,
            "onnxruntime": onnxruntime.__version__,
            "onnxscript": onnxscript.__version__,
        },
        "runs": args.runs,
        "warm_up": not args.no_warmup,
        "models": models,
        "exporters": exporters,
        "records": records,
        "ratios": table,
        "targets": targets(table.get("pt2onnx", {}), table.get("pt2onnx+ort")),
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
