"""onnxruntime latency of several exports of one model, measured interleaved.

    python benchmarks/latency.py MODEL OUT.json FILE.onnx [FILE.onnx ...] [--runs N]

Each run times every file once, in turn, so machine load (other processes on a shared
machine) hits all of them alike; the median per file is written as ``{file: seconds}``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from worker import WARMUP, _session

from models import build


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("out", type=Path)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    torch.manual_seed(0)
    case = build(args.model)
    sessions = {str(f): _session(f) for f in args.files}
    feeds = {f: {i.name: case.inputs[i.name].numpy() for i in session.get_inputs()} for f, session in sessions.items()}
    times: dict[str, list[float]] = {f: [] for f in sessions}
    for run in range(WARMUP + args.runs):
        for f, session in sessions.items():
            start = time.perf_counter()
            session.run(None, feeds[f])
            if run >= WARMUP:
                times[f].append(time.perf_counter() - start)
    args.out.write_text(json.dumps({f: statistics.median(t) for f, t in times.items()}))


if __name__ == "__main__":
    main()
