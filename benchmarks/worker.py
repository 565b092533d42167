"""One export of one model by one exporter, in its own process; writes one JSON record.

    python benchmarks/worker.py MODEL EXPORTER OUT.json [--runs N] [--dir DIR] [--capture-first]

EXPORTER is ``pt2onnx``, ``pt2onnx+ort`` (with the onnxruntime fusion pack) or
``torch.onnx`` (``torch.onnx.export(dynamo=True)``). The run: build the model, run it
eagerly on both input sets (reference outputs and eager latency), warm both exporters'
one-time initialization up on a tiny module, reset the process's peak RSS, export and
save (timed, peak RSS growth measured), then load the file in onnxruntime with one
intra-op thread: the difference to eager on both input sets, and latency unless
``--runs 0`` (``run.py`` times latency interleaved in ``latency.py`` instead).

pt2onnx records also hold the export's floor: ``torch.export.export`` alone with the same
options, timed in the same process (before the export with ``--capture-first``, else after
it: ``run.py`` alternates), and a raw write of as many bytes as the save wrote, to the same
folder, right after the save (both into new files, both ending with ``fsync``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch
import torch.utils._pytree as pytree

sys.path.insert(0, str(Path(__file__).resolve().parent))
from latency import session
from model_cases import Case, build

WARMUP = 3
ORT_PLUGIN = "ort"  # the plugin name of the pt2onnx-ort pack (contrib/ort)
_PIECE = 64 << 20  # raw writes go out in pieces this large, as a streaming writer would


# -- memory --------------------------------------------------------------------------


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak_rss() -> None:
    # Linux: writing 5 to clear_refs resets VmHWM (the peak RSS) to the current RSS.
    Path("/proc/self/clear_refs").write_text("5")


# -- exporters -----------------------------------------------------------------------


def _pt2onnx_kwargs(exporter: str) -> dict[str, Any]:
    from pt2onnx.plugin_manager import load_plugins

    has_ort = ORT_PLUGIN in load_plugins(None).plugins
    if exporter == "pt2onnx+ort":
        if not has_ort:
            raise RuntimeError(f"the pt2onnx-ort pack (plugin {ORT_PLUGIN!r}) is not installed")
        return {}
    return {"disable": [ORT_PLUGIN]} if has_ort else {}


def export(case: Case, exporter: str, path: Path, **options: Any) -> dict[str, Any]:
    """Export ``case`` to ``path``; returns exporter-specific details."""
    if exporter.startswith("pt2onnx"):
        import pt2onnx

        result = pt2onnx.export(
            case.model,
            (),
            case.inputs,
            dynamic_shapes=case.dynamic_shapes,
            f=path,
            **_pt2onnx_kwargs(exporter),
            **options,
        )
        report = result.report
        return {
            "saved_bytes": sum(report.saved.values()),
            "phases": dict(report.timings),
            "phase_peak_rss_mb": dict(report.peak_rss),
            "retraced": report.retraced,
            "decompose_reason": report.decompose_reason,
            "nodes_translated": report.nodes_translated,
            "nodes_final": report.nodes_final,
            "passes": [
                {"name": p.name, "removed": p.removed, "seconds": p.seconds, "nodes_after": p.nodes_after}
                for p in report.passes
            ],
        }
    if exporter == "torch.onnx":
        program = torch.onnx.export(
            case.model, (), kwargs=case.inputs, dynamic_shapes=case.dynamic_shapes, dynamo=True, verbose=False
        )
        program.save(str(path))
        return {}
    raise ValueError(f"unknown exporter {exporter!r}")


def capture_alone(case: Case, record: dict[str, Any]) -> None:
    """Time ``torch.export.export`` alone, with the options pt2onnx's capture passes it, into ``record``."""
    start = time.perf_counter()
    try:
        torch.export.export(case.model, (), case.inputs, dynamic_shapes=case.dynamic_shapes, strict=False)
    except Exception as e:  # noqa: BLE001 (pt2onnx may still have captured it, by its fallback)
        record["capture_alone_error"] = f"{type(e).__name__}: {e}"[:2000]
        return
    record["capture_alone_s"] = time.perf_counter() - start


def raw_write(path: Path, payload: memoryview) -> None:
    """Write ``payload`` to a new file at ``path`` with plain ``os.write`` calls, then ``fsync`` it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for start in range(0, len(payload), _PIECE):
            os.write(fd, payload[start : start + _PIECE])
        os.fsync(fd)
    finally:
        os.close(fd)


def timed_raw_write(directory: Path, size: int) -> float:
    """Seconds to :func:`raw_write` ``size`` random bytes (not counting making them) into ``directory``."""
    # Generated in place: a copy (``tobytes()``) would free as many just-touched pages right
    # before the write, which the page cache then reuses, several times faster on a virtual
    # machine than the new pages the save had to take (studies/save_rate.py, "recycled").
    payload = memoryview(np.random.default_rng(0).integers(0, 255, size, dtype=np.uint8))
    path = directory / "raw_write.bin"
    start = time.perf_counter()
    raw_write(path, payload)
    seconds = time.perf_counter() - start
    path.unlink()
    return seconds


def _warm_up(exporter: str, directory: Path) -> None:
    """Pay the exporter's one-time costs (lazy imports, first torch.export) on a tiny module."""
    from model_cases import mlp

    tiny = mlp()
    export(tiny, exporter, directory / "warmup.onnx")


# -- measuring -----------------------------------------------------------------------


def _leaves(out: Any) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def _median_seconds(fn: Any, runs: int) -> float:
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def count_nodes(path: Path) -> dict[str, int]:
    """Nodes of the saved model: main graph, inside subgraphs, inside local functions."""
    model = onnx.load(str(path), load_external_data=False)

    def walk(nodes: Any) -> int:
        total = 0
        for node in nodes:
            total += 1
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    total += walk(attr.g.node)
                elif attr.type == onnx.AttributeProto.GRAPHS:
                    total += sum(walk(g.node) for g in attr.graphs)
        return total

    top = len(model.graph.node)
    graph = walk(model.graph.node)
    functions = sum(walk(f.node) for f in model.functions)
    return {"top": top, "subgraphs": graph - top, "functions": functions, "total": graph + functions}


def _max_abs(expected: list[torch.Tensor], got: list[np.ndarray]) -> float:
    if len(expected) != len(got):
        raise AssertionError(f"{len(got)} ONNX outputs, {len(expected)} eager outputs")
    worst = 0.0
    for e, g in zip(expected, got):
        g = torch.from_numpy(np.asarray(g))
        if tuple(e.shape) != tuple(g.shape):
            raise AssertionError(f"output shape {tuple(g.shape)} != eager {tuple(e.shape)}")
        if e.numel():
            worst = max(worst, (e.double() - g.double()).abs().max().item())
    return worst


def measure(
    name: str,
    exporter: str,
    directory: Path,
    runs: int,
    warm_up: bool = True,
    capture_first: bool = False,
    **options: Any,
) -> dict[str, Any]:
    """Everything the benchmark records for ``name`` exported by ``exporter`` (``options``: pt2onnx's).

    ``capture_first``: time pt2onnx's floor, torch.export alone, before the export instead of after.
    """
    record: dict[str, Any] = {"model": name, "exporter": exporter, "ok": False}
    torch.manual_seed(0)
    torch.set_num_threads(1)
    case = build(name)
    record["family"] = case.family
    record["parameters"] = sum(p.numel() for p in case.model.parameters())
    record["inputs"] = {n: list(t.shape) for n, t in case.inputs.items()}
    with torch.inference_mode():
        expected = [_leaves(case.model(**case.inputs)), _leaves(case.model(**case.second))]
        if runs:
            record["eager_latency_s"] = _median_seconds(lambda: case.model(**case.inputs), runs)
    path = directory / f"{name}.{exporter}.onnx"
    if warm_up:
        try:
            _warm_up(exporter, directory)
        except Exception:  # noqa: BLE001
            record["warmup_error"] = traceback.format_exc(limit=3)[-2000:]
    floor = exporter.startswith("pt2onnx")
    if floor and capture_first:
        capture_alone(case, record)
    gc.collect()
    _reset_peak_rss()
    rss_before = _status_kib("VmRSS")
    start = time.perf_counter()
    try:
        record.update(export(case, exporter, path, **options))
    except Exception as e:  # noqa: BLE001
        record["export_s"] = time.perf_counter() - start
        record["error"] = f"{type(e).__name__}: {e}"[:4000]
        unsupported = getattr(e, "unsupported", None)
        if unsupported:
            record["unsupported_ops"] = sorted(unsupported)
        return record
    record["export_s"] = time.perf_counter() - start
    record["peak_rss_growth_mb"] = (_status_kib("VmHWM") - rss_before) / 1024
    if floor:
        # After the peak RSS is read: the payload would add the file's size to it.
        record["raw_write_s"] = timed_raw_write(directory, record["saved_bytes"])
        if not capture_first:
            gc.collect()
            capture_alone(case, record)
    if "phase_peak_rss_mb" in record:
        # Growth of the peak up to the end of each phase: how much of it capture alone takes.
        before_mb = rss_before / 1024
        record["phase_peak_rss_growth_mb"] = {k: v - before_mb for k, v in record.pop("phase_peak_rss_mb").items()}
    record["nodes"] = count_nodes(path)
    record["file_mb"] = sum(p.stat().st_size for p in directory.glob(f"{path.name}*")) / 2**20
    try:
        loaded = session(path)
        input_names = [i.name for i in loaded.get_inputs()]
        diffs = []
        for inputs, reference in zip((case.inputs, case.second), expected):
            feeds = {n: inputs[n].numpy() for n in input_names}
            diffs.append(_max_abs(reference, loaded.run(None, feeds)))
        record["max_abs_diff"], record["max_abs_diff_second"] = diffs
        feeds = {n: case.inputs[n].numpy() for n in input_names}
        if runs:
            record["ort_latency_s"] = _median_seconds(lambda: loaded.run(None, feeds), runs)
    except Exception as e:  # noqa: BLE001
        record["error"] = f"onnxruntime: {type(e).__name__}: {e}"[:4000]
        return record
    record["ok"] = True
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("exporter", choices=["pt2onnx", "pt2onnx+ort", "torch.onnx"])
    parser.add_argument("out", type=Path)
    parser.add_argument("--runs", type=int, default=20, help="latency runs after warm-up (median); 0: no latency")
    parser.add_argument("--dir", type=Path, default=None, help="where the .onnx files go (default: beside OUT)")
    parser.add_argument("--no-warmup", action="store_true", help="measure the exporter cold")
    parser.add_argument("--opset", type=int, default=None, help="pt2onnx's target opset (default: its own)")
    parser.add_argument(
        "--capture-first", action="store_true", help="time torch.export alone before the export (default: after)"
    )
    args = parser.parse_args()
    if args.opset is not None and not args.exporter.startswith("pt2onnx"):
        parser.error("--opset applies to pt2onnx exporters only")
    directory = args.dir or args.out.parent
    directory.mkdir(parents=True, exist_ok=True)
    options = {} if args.opset is None else {"opset": args.opset}
    record = measure(
        args.model,
        args.exporter,
        directory,
        args.runs,
        warm_up=not args.no_warmup,
        capture_first=args.capture_first,
        **options,
    )
    args.out.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
