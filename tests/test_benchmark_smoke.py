"""The benchmark harness end to end on the MLP: two repeats of both exporters, every recorded field, the outputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]

RECORD_FIELDS = {
    "model",
    "exporter",
    "ok",
    "repeat",
    "family",
    "parameters",
    "inputs",
    "export_s",
    "peak_rss_growth_mb",
    "nodes",
    "file_mb",
    "max_abs_diff",
    "max_abs_diff_second",
}
PT2ONNX_FIELDS = {
    "phases",
    "phase_peak_rss_growth_mb",
    "retraced",
    "decompose_reason",
    "nodes_translated",
    "nodes_final",
    "passes",
    "saved_bytes",
    "capture_alone_s",
    "raw_write_s",
}
PHASES = {"plugins", "capture", "decompose", "translate", "assemble", "optimize", "save"}
RUNS = 3


def _is_spread(figure) -> bool:
    return figure["low"] <= figure["value"] <= figure["high"]


def test_benchmark_runs_on_the_mlp_and_writes_every_field(tmp_path):
    command = [
        sys.executable,
        str(ROOT / "benchmarks" / "run.py"),
        "--models",
        "mlp",
        "--exporters",
        "pt2onnx,torch.onnx",
        "--repeats",
        "2",
        "--runs",
        str(RUNS),
        "--scaling",
        "none",
        "--scaling-baseline",
        "none",
        "--out",
        str(tmp_path),
        "--no-warmup",
    ]
    subprocess.run(command, check=True, capture_output=True, text=True, timeout=300)

    data = json.loads((tmp_path / "results.json").read_text())
    records = data["records"]
    # Two repeats, the exporters' order rotated between them.
    assert [(r["repeat"], r["exporter"]) for r in records] == [
        (0, "pt2onnx"),
        (0, "torch.onnx"),
        (1, "torch.onnx"),
        (1, "pt2onnx"),
    ]
    for record in records:
        assert record["ok"], record.get("error")
        assert set(record) >= RECORD_FIELDS, (record["exporter"], RECORD_FIELDS - set(record))
        assert record["max_abs_diff"] <= 1e-4 and record["max_abs_diff_second"] <= 1e-4
        assert record["nodes"]["total"] >= 1 and record["export_s"] > 0
        assert record["inputs"] == {"x": [4, 64]}
    ours = records[0]
    assert set(ours) >= PT2ONNX_FIELDS
    assert set(ours["phases"]) >= PHASES
    assert {p["name"] for p in ours["passes"]} >= {"constant_folding", "cse"}

    # Both files timed in one process, round by round, beside eager.
    example = data["latency"]["mlp"]["shapes"][0]
    assert example["label"] == "example" and example["inputs"] == {"x": [4, 64]}
    assert {e: len(t) for e, t in example["times"].items()} == {"pt2onnx": RUNS, "torch.onnx": RUNS, "eager": RUNS}
    assert data["latency"]["mlp"]["no_sweep"] == "no sequence dimension"

    summary = data["summary"]["mlp"]["pt2onnx"]
    assert summary["ok_repeats"] == 2 and _is_spread(summary["export_s"])
    ratios = data["ratios"]["pt2onnx"]["mlp"]
    for key in ("export_time", "peak_rss_growth", "ort_latency", "after_capture_over_capture"):
        assert _is_spread(ratios[key]), key
    assert ratios["nodes"] == 1.0
    # The floor: torch.export alone (timed after the export in repeat 0, before it in repeat 1), a raw write.
    floor = ratios["floor"]
    for key in ("capture_alone_s", "graph_over_capture", "save_s", "raw_write_s", "save_rate_over_raw"):
        assert _is_spread(floor[key]), key
    assert floor["saved_mb"] > 0
    assert {t["target"] for t in data["targets"]} >= {
        "export time, median of medians",
        "peak RSS growth, median of medians",
    }
    env = data["environment"]
    assert set(env["versions"]) >= {"pt2onnx", "torch", "onnxruntime", "onnx"} and env["cores"] >= 1
    assert data["repeats"] == 2 and data["threads"] == 1

    markdown = (tmp_path / "results.md").read_text()
    assert "| mlp | pt2onnx | 2/2 |" in markdown and "| mlp | torch.onnx | 2/2 |" in markdown
    assert f"CPU: {env['cpu']}" in markdown and f"onnxruntime {env['versions']['onnxruntime']}" in markdown
    assert "| mlp | x 4x64 | none: no sequence dimension |" in markdown
    assert "| **median of medians** |" in markdown
    assert "## pt2onnx against its floor" in markdown and "| mlp | pt2onnx | " in markdown
    # The MLP's save is too small for its rate to be the disk's: that target measures nothing here.
    assert "| save rate / raw write rate, slowest model saving ≥ 64 MB | - | ≥ 0.9 | not measured |" in markdown
    assert (tmp_path / "results.png").read_bytes().startswith(b"\x89PNG")
