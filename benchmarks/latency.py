"""onnxruntime latency of several exports of one model, timed interleaved in one process.

    python benchmarks/latency.py MODEL OUT.json EXPORTER=FILE.onnx [EXPORTER=FILE.onnx ...]
        [--runs N] [--threads T] [--seq 32,128,512] [--batch 2]

Every file gets a session with the same options (``T`` intra-op threads, one inter-op
thread, ``ORT_ENABLE_ALL``). For each input shape, 3 warm-up rounds, then ``N`` timed
rounds; a round runs every session once, in an order shuffled from round to round (seeded),
so drifting machine load hits every exporter alike and none always runs first or after
the same one. Eager PyTorch (``T`` threads) is timed on the example inputs in rounds of its
own, after: a session run right after eager's ran up to 2x slower on small models. With
``--seq``, models with a dynamic sequence length are also timed at batch ``--batch`` and
each length (eager left out); a file whose sequence dimension was exported static is named
in ``static`` and not timed there. Writes every round's time, per shape and exporter, as
JSON; ``run.py`` turns them into ratios with their spread (``spread.py``).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model_cases import build

WARMUP = 3
EAGER = "eager"


def session(path: Path, threads: int = 1, **extra: Any) -> ort.InferenceSession:
    """The benchmark's session: ``threads`` intra-op threads, one inter-op, every optimization."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    for name, value in extra.items():
        setattr(options, name, value)
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def static_sequence(path: Path, names: list[str]) -> str | None:
    """Why ``path``'s inputs ``names`` cannot take another sequence length, or ``None`` if they can."""
    graph = onnx.load(str(path), load_external_data=False).graph
    for value in graph.input:
        if value.name not in names:
            continue
        dims = value.type.tensor_type.shape.dim
        if len(dims) > 1 and dims[1].HasField("dim_value"):
            return f"input {value.name!r} exported with a static sequence length ({dims[1].dim_value})"
    return None


def interleaved(contestants: dict[str, Callable[[], Any]], runs: int) -> dict[str, list[float]]:
    """Each contestant's time in every one of ``runs`` rounds (after ``WARMUP`` untimed ones)."""
    names = list(contestants)
    times: dict[str, list[float]] = {n: [] for n in names}
    order = random.Random(0)
    for round_ in range(WARMUP + runs):
        # Shuffled, not rotated: a rotation keeps who runs after whom, and what ran just
        # before (eager torch, a larger model) can slow the next run down.
        order.shuffle(names)
        for name in names:
            start = time.perf_counter()
            contestants[name]()
            if round_ >= WARMUP:
                times[name].append(time.perf_counter() - start)
    return times


def _shapes(inputs: dict[str, torch.Tensor]) -> dict[str, list[int]]:
    return {name: list(t.shape) for name, t in inputs.items()}


def measure(model: str, files: dict[str, Path], runs: int, threads: int, seqs: list[int], batch: int) -> dict[str, Any]:
    """Every shape's round times per exporter, and what kept a file or a shape from being timed."""
    torch.manual_seed(0)
    torch.set_num_threads(threads)
    case = build(model)
    sessions = {exporter: session(path, threads) for exporter, path in files.items()}

    def runner(s: ort.InferenceSession, inputs: dict[str, torch.Tensor]) -> Callable[[], Any]:
        feeds = {i.name: np.ascontiguousarray(inputs[i.name].numpy()) for i in s.get_inputs()}
        return lambda: s.run(None, feeds)

    def eager() -> Any:
        with torch.inference_mode():
            return case.model(**case.inputs)

    example = {e: runner(s, case.inputs) for e, s in sessions.items()}
    times = interleaved(example, runs) | interleaved({EAGER: eager}, runs)
    shapes = [{"label": "example", "inputs": _shapes(case.inputs), "times": times}]
    result: dict[str, Any] = {"threads": threads, "shapes": shapes, "static": {}, "errors": {}}
    if not seqs:
        return result
    if case.sized is None:
        result["no_sweep"] = case.no_sweep or "no sequence dimension"
        return result
    names = list(case.sized(batch, seqs[0]))
    dynamic = {}
    for exporter, path in files.items():
        reason = static_sequence(path, names)
        if reason:
            result["static"][exporter] = reason
        else:
            dynamic[exporter] = sessions[exporter]
    for seq in seqs:
        inputs = case.sized(batch, seq)
        runnable = {}
        for exporter, s in dynamic.items():
            run = runner(s, inputs)
            try:
                run()  # a graph that cannot take this length fails here, not inside the rounds
            except Exception as e:  # noqa: BLE001
                result["errors"][f"{exporter} seq {seq}"] = f"{type(e).__name__}: {e}"[:2000]
                continue
            runnable[exporter] = run
        label = f"seq {seq}"
        shapes.append({"label": label, "seq": seq, "inputs": _shapes(inputs), "times": interleaved(runnable, runs)})
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("out", type=Path)
    parser.add_argument("files", nargs="+", help="EXPORTER=FILE.onnx")
    parser.add_argument("--runs", type=int, default=20, help="timed rounds per shape")
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads (and torch's)")
    parser.add_argument("--seq", default="", help="sequence lengths to sweep, e.g. 32,128,512")
    parser.add_argument("--batch", type=int, default=2, help="batch size of the sweep")
    args = parser.parse_args()
    files = {}
    for item in args.files:
        exporter, sep, path = item.partition("=")
        if not sep:
            parser.error(f"expected EXPORTER=FILE.onnx, got {item!r}")
        files[exporter] = Path(path)
    seqs = [int(s) for s in args.seq.split(",") if s]
    try:
        result = measure(args.model, files, args.runs, args.threads, seqs, args.batch)
    except Exception:  # noqa: BLE001
        result = {"error": traceback.format_exc(limit=5)[-4000:]}
    args.out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
