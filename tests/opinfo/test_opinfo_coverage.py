"""``pt2onnx ops --coverage`` states the OpInfo figure beside the Core ATen one, and the
figure agrees with the expected-failure list the OpInfo test module enforces."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from opinfo_expected import EXPECTED, SKIPPED_FLOAT32
from opinfo_samples import opinfos

from pt2onnx.coverage import OPINFO_FIGURE


def test_the_figure_is_what_the_expected_failures_leave():
    float32 = {n for n, info in opinfos().items() if "float32" in {str(d)[6:] for d in info.supported_dtypes("cpu")}}
    failing = {n for n, per in EXPECTED.items() if "float32" in per or "*" in per}
    tested = float32 - set(SKIPPED_FLOAT32)
    assert (len(tested - failing), len(tested)) == OPINFO_FIGURE


def test_coverage_prints_both_figures():
    pt2onnx = shutil.which("pt2onnx", path=str(Path(sys.executable).parent)) or "pt2onnx"
    out = subprocess.run([pt2onnx, "ops", "--coverage"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    passing, tested = OPINFO_FIGURE
    assert out.stdout.startswith("Core ATen opset: ")
    assert f"OpInfo (torch's op_db, first float32 sample, builtin packs): {passing}/{tested} ops pass" in out.stdout
