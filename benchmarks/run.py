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
This module measures; ``analysis.py`` turns the records into figures and ``report.py``
writes the markdown and the plot.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import os
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
from analysis import BASELINE, ratios, scaling_summary, shape_of, summarize, targets  # noqa: E402
from model_cases import MODELS  # noqa: E402
from report import markdown, plot  # noqa: E402


def _has_ort_pack() -> bool:
    from worker import ORT_PLUGIN

    from pt2onnx.plugin_manager import load_plugins

    return ORT_PLUGIN in load_plugins(None).plugins


# -- measuring -----------------------------------------------------------------------


def exporter_order(exporters: list[str], repeat: int) -> list[str]:
    """The exporters in the order repeat ``repeat`` runs them: rotated, so none always goes first."""
    shift = repeat % len(exporters)
    return exporters[shift:] + exporters[:shift]


def run_one(
    model: str, exporter: str, timeout: float, directory: Path, warm_up: bool = True, capture_first: bool = False
) -> dict[str, Any]:
    """One export in a worker subprocess (no latency: that is timed interleaved later).

    ``capture_first``: the worker times torch.export alone before pt2onnx's export, not after.
    """
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / f"{model}.{exporter}.json"
    command = [sys.executable, str(HERE / "worker.py"), model, exporter, str(out), "--runs", "0"]
    if not warm_up:
        command.append("--no-warmup")
    if capture_first:
        command.append("--capture-first")
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
                # Odd repeats time torch.export alone before the export: neither always runs first.
                record = run_one(model, exporter, timeout, directory, warm_up, capture_first=repeat % 2 == 1)
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
        example = shape_of(latency.get(model), "example")
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
