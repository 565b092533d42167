"""Where onnxruntime spends its time on each exporter's model: per-op-type totals from its profiler.

    python benchmarks/studies/ort_profile.py llama_tiny                 # batch 2 x seq 128, 1 thread
    python benchmarks/studies/ort_profile.py gpt2 --seq 512 --runs 50
    python benchmarks/studies/ort_profile.py llama_tiny --pt2onnx-opset 24   # adds pt2onnx at opset 24

Exports MODEL with pt2onnx and torch.onnx (each in its own ``worker.py`` process), then, in
one process, opens a profiling session on each file (the benchmark's options: ``--threads``
intra-op threads, ``ORT_ENABLE_ALL``), runs them interleaved (3 warm-up runs, then
``--runs``) and reports, per op type and per node, the median over the timed runs of the
profiler's kernel time in a run. Each
session also writes the graph onnxruntime actually runs (``optimized_model_filepath``), so
the node counts before and after its optimizations show whether both graphs end up with the
same kernels. ``--pt2onnx-opset N`` (repeatable) adds pt2onnx's export at opset N: an op
onnxruntime has no kernel for at the model's opset runs as its inlined function body.
Writes ``results/profile_<MODEL>.{json,md}``.

(Not ``profile.py``: that name would shadow the standard library's ``profile``, which
``cProfile`` imports.)
"""

from __future__ import annotations

import argparse
import bisect
import collections
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the suite: latency, model_cases, worker.py
from latency import WARMUP, session
from model_cases import build

BENCHMARKS = Path(__file__).resolve().parents[1]
EXPORTERS = ("pt2onnx", "torch.onnx")
TOP_NODES = 10


def op_types(path: Path) -> collections.Counter[str]:
    """Nodes of a saved model by op type (``domain::`` prefixed outside the default domain)."""
    model = onnx.load(str(path), load_external_data=False)
    nodes = [*model.graph.node, *(n for f in model.functions for n in f.node)]
    return collections.Counter(
        f"{n.domain}::{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type for n in nodes
    )


def kernel_times(profile: Path, warmup: int) -> tuple[dict[str, float], dict[str, float], list[float]]:
    """Per op type and per node, the median over timed runs of the run's kernel ms; each run's ms.

    Medians, not means: on a shared machine a single preempted kernel would otherwise
    dominate its op type's total.
    """
    events = json.loads(profile.read_text())
    runs = sorted((e["ts"], e["dur"]) for e in events if e.get("cat") == "Session" and e.get("name") == "model_run")
    timed = runs[warmup:]
    if not timed:
        raise RuntimeError(f"{profile}: no model_run events after {warmup} warm-up runs")
    starts = [ts for ts, _ in timed]
    by_op = [collections.Counter[str]() for _ in timed]
    by_node = [collections.Counter[str]() for _ in timed]
    for e in events:
        if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time") and e["ts"] >= starts[0]:
            run = bisect.bisect_right(starts, e["ts"]) - 1
            op = e["args"]["op_name"]
            by_op[run][op] += e["dur"] / 1e3
            by_node[run][f"{e['name'].removesuffix('_kernel_time')} ({op})"] += e["dur"] / 1e3

    def medians(per_run: list[collections.Counter[str]]) -> dict[str, float]:
        keys = {k for c in per_run for k in c}
        return {k: statistics.median(c[k] for c in per_run) for k in keys}

    return medians(by_op), medians(by_node), [d / 1e3 for _, d in timed]


def export(model: str, opsets: list[int], workdir: Path, timeout: float) -> dict[str, Path]:
    """Each contestant's file of ``model`` (both exporters, then pt2onnx at each of ``opsets``)."""
    contestants = [(e, e, None) for e in EXPORTERS] + [(f"pt2onnx opset {o}", "pt2onnx", o) for o in opsets]
    files = {}
    for label, exporter, opset in contestants:
        directory = workdir / label.replace(" ", "_")
        directory.mkdir()
        out = directory / f"{model}.{exporter}.json"
        command = [sys.executable, str(BENCHMARKS / "worker.py"), model, exporter, str(out), "--runs", "0"]
        if opset is not None:
            command += ["--opset", str(opset)]
        subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
        record = json.loads(out.read_text()) if out.exists() else {"ok": False, "error": "worker crashed"}
        if not record.get("ok"):
            raise RuntimeError(f"{label} failed on {model}: {record.get('error', '?')[:500]}")
        files[label] = directory / f"{model}.{exporter}.onnx"
    return files


def _optimized(workdir: Path, label: str) -> Path:
    return workdir / f"{label.replace(' ', '_')}.optimized.onnx"


def profile(
    model: str, files: dict[str, Path], batch: int, seq: int, runs: int, threads: int, workdir: Path
) -> dict[str, Any]:
    """Kernel time per op type and node counts before/after onnxruntime's optimizations, per exporter."""
    torch.manual_seed(0)
    case = build(model)
    inputs = case.sized(batch, seq) if case.sized else case.inputs
    sessions, feeds = {}, {}
    for exporter, path in files.items():
        sessions[exporter] = session(
            path,
            threads,
            enable_profiling=True,
            profile_file_prefix=str(workdir / f"profile.{exporter.replace(' ', '_')}"),
            optimized_model_filepath=str(_optimized(workdir, exporter)),
        )
        feeds[exporter] = {
            i.name: np.ascontiguousarray(inputs[i.name].numpy()) for i in sessions[exporter].get_inputs()
        }
    names = list(sessions)
    for round_ in range(WARMUP + runs):
        shift = round_ % len(names)
        for exporter in names[shift:] + names[:shift]:
            sessions[exporter].run(None, feeds[exporter])
    result: dict[str, Any] = {"inputs": {n: list(t.shape) for n, t in inputs.items()}, "exporters": {}}
    for exporter, s in sessions.items():
        totals, nodes, run_ms = kernel_times(Path(s.end_profiling()), WARMUP)
        slowest = sorted(nodes.items(), key=lambda kv: -kv[1])[:TOP_NODES]
        result["exporters"][exporter] = {
            "run_ms": statistics.median(run_ms),
            "kernel_ms_per_run": {op: ms for op, ms in sorted(totals.items(), key=lambda kv: -kv[1])},
            "slowest_nodes_ms_per_run": dict(slowest),
            "nodes_exported": dict(op_types(files[exporter])),
            "nodes_optimized": dict(op_types(_optimized(workdir, exporter))),
        }
    return result


def markdown(data: dict[str, Any]) -> str:
    per = data["exporters"]
    labels = list(per)
    shapes = ", ".join(f"{n} {'x'.join(map(str, s))}" for n, s in data["inputs"].items())

    def row(title: str, cells: list[str]) -> str:
        return f"| {title} | " + " | ".join(cells) + " |"

    lines = [
        f"# onnxruntime profile: {data['model']}, pt2onnx vs torch.onnx",
        "",
        f"Command: `{data['command']}`  ",
        f"{data['started']} UTC; onnxruntime {data['versions']['onnxruntime']}, torch {data['versions']['torch']}, "
        f"CPU provider, {data['threads']} intra-op thread(s), ORT_ENABLE_ALL; inputs {shapes}; "
        f"{data['runs']} interleaved runs per model after {WARMUP} warm-up runs; CPU: {data['cpu']}. "
        "Kernel and run times: medians over the timed runs (a kernel's from the profiler's per-node events).",
        "",
        row("", labels),
        "|---|" + "---|" * len(labels),
        row("run ms (median, profiler on)", [f"{per[e]['run_ms']:.3f}" for e in labels]),
        row(
            "kernel ms per run (sum of the medians)",
            [f"{sum(per[e]['kernel_ms_per_run'].values()):.3f}" for e in labels],
        ),
        row("nodes exported", [str(sum(per[e]["nodes_exported"].values())) for e in labels]),
        row("nodes after onnxruntime's optimizations", [str(sum(per[e]["nodes_optimized"].values())) for e in labels]),
        "",
        "## Kernel time per op type: ms per run (share of the model's kernel time), nodes after optimization",
        "",
        row("op type", labels),
        "|---|" + "---|" * len(labels),
    ]
    ops = sorted(
        {op for e in labels for op in per[e]["kernel_ms_per_run"]},
        key=lambda op: -max(per[e]["kernel_ms_per_run"].get(op, 0.0) for e in labels),
    )
    for op in ops:
        cells = []
        for e in labels:
            ms = per[e]["kernel_ms_per_run"].get(op, 0.0)
            total = sum(per[e]["kernel_ms_per_run"].values())
            nodes = sum(n for t, n in per[e]["nodes_optimized"].items() if t.split("::")[-1] == op)
            cells.append(f"{ms:.3f} ({ms / total:.0%}), {nodes}")
        lines.append(row(op, cells))
    lines += ["", f"## The {TOP_NODES} slowest nodes (ms per run)", ""]
    for e in labels:
        slowest = ", ".join(f"{node} {ms:.3f}" for node, ms in per[e]["slowest_nodes_ms_per_run"].items())
        lines.append(f"- **{e}**: {slowest}")
    lines += [
        "",
        "## Nodes by op type: exported → after onnxruntime's optimizations",
        "",
        row("op type", labels),
        "|---|" + "---|" * len(labels),
    ]
    all_types = sorted({t for e in labels for k in ("nodes_exported", "nodes_optimized") for t in per[e][k]})
    for t in all_types:
        lines.append(
            row(t, [f"{per[e]['nodes_exported'].get(t, 0)} → {per[e]['nodes_optimized'].get(t, 0)}" for e in labels])
        )
    a, b = EXPORTERS
    same = per[a]["nodes_optimized"] == per[b]["nodes_optimized"]
    lines += [
        "",
        f"After onnxruntime's optimizations {a}'s and {b}'s graphs "
        + ("have the same op types and counts." if same else "still differ (compare the counts right of the arrows)."),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=128, help="sequence length (models with one)")
    parser.add_argument("--runs", type=int, default=20, help="timed runs per model")
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads")
    parser.add_argument("--pt2onnx-opset", type=int, action="append", default=[], help="also pt2onnx at this opset")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per export process")
    parser.add_argument("--out", type=Path, default=BENCHMARKS / "results")
    args = parser.parse_args()
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        files = export(args.model, args.pt2onnx_opset, workdir, args.timeout)
        data = profile(args.model, files, args.batch, args.seq, args.runs, args.threads, workdir)
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        "?",
    )
    data.update(
        model=args.model,
        command=" ".join(["python", "benchmarks/studies/ort_profile.py", *sys.argv[1:]]),
        started=started,
        versions={"onnxruntime": ort.__version__, "torch": torch.__version__},
        threads=args.threads,
        runs=args.runs,
        cpu=cpu,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"profile_{args.model}.json").write_text(json.dumps(data, indent=1))
    (args.out / f"profile_{args.model}.md").write_text(markdown(data))
    print(markdown(data))


if __name__ == "__main__":
    main()
