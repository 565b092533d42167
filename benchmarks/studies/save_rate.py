"""How fast ``ExportResult.save`` writes a large model, beside a raw write of as many bytes.

    python benchmarks/studies/save_rate.py [--model llama_125m] [--repeats 3] [--dir DIR]

Exports MODEL once, then times, interleaved and in alternating order, ``result.save`` (the
whole file: graph, weights streamed, ``fsync``, rename) and a raw write of the same number
of bytes from memory (``os.write`` in 64 MiB pieces, then ``fsync``). Two conditions:

* ``fresh``: every file is new and all are kept until the condition ends, so each write
  needs page-cache pages the kernel has not handed out recently;
* ``recycled``: a file of the same size is deleted right before each write, so the write
  reuses the pages just freed.

On a virtual machine the first case can be several times slower than the second (the
host backs a guest page on its first touch), whatever the writer: then save time says
more about the machine than about the exporter. The figure to read is save / raw in the
same condition. Writes ``results/save_rate.md``; deletes the files it wrote.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the suite: latency, model_cases, worker


def _timed(write, path: Path) -> float:
    start = time.perf_counter()
    write(path)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="llama_125m")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temporary folder)")
    args = parser.parse_args()

    import model_cases
    import numpy as np
    import torch
    from worker import raw_write

    import pt2onnx

    torch.set_num_threads(1)
    case = model_cases.build(args.model)
    result = pt2onnx.export(case.model, (), case.inputs, dynamic_shapes=case.dynamic_shapes, quiet=True)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        folder = Path(tmp)
        probe = folder / "probe.onnx"
        result.save(probe, quiet=True)
        size = probe.stat().st_size
        probe.unlink()
        payload = memoryview(np.random.default_rng(0).integers(0, 255, size, dtype=np.uint8).tobytes())
        times: dict[tuple[str, str], list[float]] = {}
        for condition in ("fresh", "recycled"):
            for repeat in range(args.repeats):
                writers = {
                    "save": lambda p: result.save(p, quiet=True),
                    "raw": lambda p: raw_write(p, payload),
                }
                order = list(writers) if repeat % 2 == 0 else list(reversed(writers))
                for name in order:
                    path = folder / f"{condition}-{repeat}-{name}.out"
                    if condition == "recycled":
                        raw_write(folder / "freed.out", payload)
                        (folder / "freed.out").unlink()
                    times.setdefault((condition, name), []).append(_timed(writers[name], path))
                    if condition == "recycled":
                        path.unlink()
            for leftover in folder.glob(f"{condition}-*"):
                leftover.unlink()

    mb = size / 1e6
    lines = [
        f"# Save rate: {args.model}, {mb:.0f} MB",
        "",
        f"Command: `python benchmarks/studies/save_rate.py --model {args.model} --repeats {args.repeats}`  ",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; pt2onnx {pt2onnx.__version__}; "
        f"seconds: median (min-max) of {args.repeats} interleaved repeats; both writers end with fsync.",
        "",
        "| condition | save s | raw write s | save MB/s | raw MB/s | save / raw |",
        "|---|---|---|---|---|---|",
    ]
    for condition in ("fresh", "recycled"):
        save, raw = times[(condition, "save")], times[(condition, "raw")]
        s, r = statistics.median(save), statistics.median(raw)
        lines.append(
            f"| {condition} | {s:.2f} ({min(save):.2f}-{max(save):.2f}) | {r:.2f} ({min(raw):.2f}-{max(raw):.2f}) "
            f"| {mb / s:.0f} | {mb / r:.0f} | {s / r:.2f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(__file__).resolve().parents[1] / "results" / "save_rate.md"
    out.write_text(text)


if __name__ == "__main__":
    main()
