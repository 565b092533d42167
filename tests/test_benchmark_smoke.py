"""The benchmark harness end to end on the MLP: both exporters, every recorded field, the outputs."""

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
    "family",
    "parameters",
    "export_s",
    "peak_rss_growth_mb",
    "nodes",
    "file_mb",
    "eager_latency_s",
    "ort_latency_s",
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
}
PHASES = {"plugins", "capture", "decompose", "translate", "assemble", "optimize", "save"}


def test_benchmark_runs_on_the_mlp_and_writes_every_field(tmp_path):
    command = [
        sys.executable,
        str(ROOT / "benchmarks" / "run.py"),
        "--models",
        "mlp",
        "--exporters",
        "pt2onnx,torch.onnx",
        "--runs",
        "2",
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
    records = {r["exporter"]: r for r in data["records"]}
    assert set(records) == {"pt2onnx", "torch.onnx"}
    for exporter, record in records.items():
        assert record["ok"], record.get("error")
        assert set(record) >= RECORD_FIELDS, (exporter, RECORD_FIELDS - set(record))
        assert record["max_abs_diff"] <= 1e-4 and record["max_abs_diff_second"] <= 1e-4
        assert record["nodes"]["total"] >= 1 and record["ort_latency_s"] > 0 and record["export_s"] > 0
        assert record["ort_latency_paired_s"] > 0  # both files timed interleaved
    ours = records["pt2onnx"]
    assert set(ours) >= PT2ONNX_FIELDS
    assert set(ours["phases"]) >= PHASES
    assert {p["name"] for p in ours["passes"]} >= {"constant_folding", "cse"}

    ratios = data["ratios"]["pt2onnx"]["mlp"]
    assert set(ratios) >= {"export_time", "peak_rss_growth", "nodes", "ort_latency", "after_capture_over_capture"}
    assert {t["target"] for t in data["targets"]} >= {"export time, median ratio", "peak RSS growth, median ratio"}
    markdown = (tmp_path / "results.md").read_text()
    assert "| mlp | pt2onnx | yes |" in markdown and "| mlp | torch.onnx | yes |" in markdown
    assert (tmp_path / "results.png").read_bytes().startswith(b"\x89PNG")
