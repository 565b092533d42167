"""The command line's features: .pt2 input, --dynamic, capture mode, plugins, --json, fast --help."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch

import cli_process
from pack_install import pip_install

ROOT = Path(__file__).parent.parent
PT2ONNX = cli_process.which("pt2onnx")

MODELS = """
import torch


class Pair(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x, y):
        return torch.relu(self.proj(x)) + y


def make():
    torch.manual_seed(0)
    return Pair().eval(), (torch.randn(3, 4), torch.randn(3, 4))
"""

LOCAL_RELU = """
from pt2onnx.plugin import hookimpl


@hookimpl
def pt2onnx_register_converters(register):
    register.converter("aten::relu.default", lambda op, self: op.Relu(self))
"""


def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return cli_process.run("pt2onnx", *args, cwd=cwd, env={**os.environ, **(env or {})})


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "local_relu.py").write_text(LOCAL_RELU)
    return tmp_path


def test_help_answers_without_importing_torch():
    code = (
        "import sys\nfrom pt2onnx.cli import main\n"
        "for argv in (['--help'], ['export', '--help']):\n"
        "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
        "print('torch imported:', 'torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "torch imported: False" in done.stdout
    assert "examples:" in done.stdout and "pt2onnx export models.py:make" in done.stdout
    # Loading a .pt2 unpickles: --help says so.
    assert "unpickles" in done.stdout and "from a source you trust" in done.stdout


def test_export_a_saved_program_and_verify_it(project):
    code = (
        "import torch, models\n"
        "model, args = models.make()\n"
        "batch = torch.export.Dim('batch')\n"
        "program = torch.export.export(model, args, dynamic_shapes={'x': {0: batch}, 'y': {0: batch}})\n"
        "torch.export.save(program, 'program.pt2')\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=project, check=True, capture_output=True, timeout=300)
    done = run("export", "program.pt2", "-o", "model.onnx", "--verify", "--report", "report.json", cwd=project)
    assert done.returncode == 0, done.stderr
    assert "max abs difference to eager" in done.stdout
    report = json.loads((project / "report.json").read_text())
    assert report["capture"] == "given ExportedProgram"
    [check] = report["verifications"]
    assert check["ok"] is True
    # The saved program's dynamic batch survives: the model runs at another batch size.
    session = ort.InferenceSession(str(project / "model.onnx"))
    x, y = np.random.randn(7, 4).astype(np.float32), np.random.randn(7, 4).astype(np.float32)
    assert session.run(None, {"x": x, "y": y})[0].shape == (7, 4)


def test_dynamic_flags_name_and_share_dims(project):
    done = run(
        "export",
        "models.py:make",
        "-o",
        "m.onnx",
        "--dynamic",
        "x:0=batch",
        "--dynamic",
        "y:0=batch",
        "--json",
        cwd=project,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert [i["shape"] for i in data["report"]["inputs"]] == [["batch", 4], ["batch", 4]]
    session = ort.InferenceSession(str(project / "m.onnx"))
    x, y = torch.randn(5, 4), torch.randn(5, 4)
    model, _ = _make(project)
    np.testing.assert_allclose(
        session.run(None, {"x": x.numpy(), "y": y.numpy()})[0], model(x, y).detach().numpy(), rtol=1e-5, atol=1e-6
    )


def _make(project: Path):
    namespace: dict = {}
    exec((project / "models.py").read_text(), namespace)
    return namespace["make"]()


def test_dynamic_flag_errors_name_the_inputs(project):
    done = run("export", "models.py:make", "-o", "m.onnx", "--dynamic", "z:0", cwd=project)
    assert done.returncode != 0
    assert "the model has no input 'z'; its inputs are ['x', 'y']" in done.stderr
    done = run("export", "models.py:make", "-o", "m.onnx", "--dynamic", "x=batch", cwd=project)
    assert done.returncode != 0 and "--dynamic takes NAME:AXIS[=DIM]" in done.stderr


def test_capture_mode_plugins_and_blocking_on_the_export_command(project):
    done = run(
        "export",
        "models.py:make",
        "-o",
        "m.onnx",
        "--strict",
        "--plugins",
        "local_relu",
        "-p",
        "no:fusions",
        "--opset",
        "21",
        "--json",
        "--quiet",
        cwd=project,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)["report"]
    assert report["capture"] == "strict=True"
    assert report["opset"] == 21
    relu = next(op for op in report["ops"] if op["op"] == "aten::relu.default")
    assert (relu["plugin"], relu["layer"], relu["shadowed"]) == ("local_relu", "argument", ["aten [builtin]"])
    assert "fusions" not in {p["name"] for p in report["plugins"]}
    non_strict = run("export", "models.py:make", "-o", "m.onnx", "--non-strict", "--json", cwd=project)
    assert json.loads(non_strict.stdout)["report"]["capture"] == "strict=False"


def test_report_file_formats_and_a_bad_suffix(project):
    done = run("export", "models.py:make", "-o", "m.onnx", "--verify", "--report", "r.html", cwd=project)
    assert done.returncode == 0, done.stderr
    page = (project / "r.html").read_text()
    assert "<h2>Verification</h2>" in page and "aten::linear.default" in page
    bad = run("export", "models.py:make", "-o", "other.onnx", "--report", "r.txt", cwd=project)
    assert bad.returncode != 0 and "unknown suffix '.txt'" in bad.stderr
    assert not (project / "other.onnx").exists()


def test_plugins_and_ops_as_json(project):
    plugins = json.loads(run("plugins", "--json", cwd=project).stdout)
    by_name = {p["name"]: p for p in plugins["plugins"]}
    assert by_name["aten"]["layer"] == "builtin" and by_name["aten"]["distribution"] == "pt2onnx-aten"
    assert by_name["aten"]["registers"]["converter"] > 100
    assert by_name["fusions"]["registers"]["rewrite"] > 0
    done = run("ops", "aten::relu.default", "aten::special_bessel_j0", "--json", cwd=project)
    assert done.returncode == 1  # one op has no converter
    relu, bessel = json.loads(done.stdout)
    [converter] = relu["converters"]
    assert (converter["plugin"], converter["layer"], converter["kind"]) == ("aten", "builtin", "converter")
    assert converter["function"].startswith("pt2onnx_aten.")
    assert bessel["converters"] == [] and bessel["decomposed_by"] is None
    coverage = json.loads(run("ops", "--coverage", "--json", cwd=project).stdout)
    assert len(coverage["covered"]) > 150 and "aten::relu.default" in coverage["covered"]


def test_a_broken_plugin_warns_once_per_export(project, tmp_path_factory):
    site = pip_install(
        ROOT / "tests" / "plugin_dists" / "p2o-test-broken", target=tmp_path_factory.mktemp("broken-site")
    )
    done = run("export", "models.py:make", "-o", "m.onnx", cwd=project, env={"PYTHONPATH": str(site)})
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("pt2onnx plugin 'p2o_broken'") == 1, done.stderr


def test_torch_internal_deprecations_do_not_reach_the_user(project):
    # A mutated buffer makes pt2onnx re-trace (run_decompositions), where torch 2.13 warns about LeafSpec.
    (project / "counter.py").write_text(
        "import torch\n\n"
        "class Counter(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.register_buffer('count', torch.zeros(1))\n\n"
        "    def forward(self, x):\n"
        "        self.count.add_(1)\n"
        "        return x * self.count\n\n"
        "def make():\n"
        "    return Counter(), (torch.randn(2, 3),)\n"
    )
    done = run(
        "export", "counter.py:make", "-o", "c.onnx", "--report", "-", cwd=project, env={"PYTHONWARNINGS": "always"}
    )
    assert done.returncode == 0, done.stderr
    assert "decompose: re-traced" in done.stdout
    assert "LeafSpec" not in done.stderr, done.stderr
