"""The ``pt2onnx`` command, run as a subprocess as a user would."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import onnxruntime as ort
import pytest

ROOT = Path(__file__).parent.parent
PT2ONNX = shutil.which("pt2onnx", path=str(Path(sys.executable).parent)) or "pt2onnx"


def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PT2ONNX, *args], cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=300
    )


def test_plugins_lists_the_builtin_packs_with_their_layer_and_counts():
    out = run("plugins")
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line.split() for line in out.stdout.splitlines()[1:] if line and not line.startswith(" ")}
    builtin = [("aten", "pt2onnx-aten"), ("hops", "pt2onnx-hops"), ("decomp", "pt2onnx-decomp")]
    for name, dist in [*builtin, ("fusions", "pt2onnx-fusions")]:
        assert rows[name][1] == "builtin" and rows[name][2] == dist
    assert int(rows["aten"][4]) > 0  # converters
    assert int(rows["hops"][5]) > 0  # lowerings
    assert int(rows["fusions"][9]) > 0  # rewrites


def test_blocking_a_plugin_on_the_command_line():
    out = run("-p", "no:aten", "plugins")
    assert out.returncode == 0
    assert "blocked: aten" in out.stdout
    assert not any(line.startswith("aten ") for line in out.stdout.splitlines())
    assert run("-p", "aten", "plugins").returncode != 0


def test_ops_names_the_provider_and_what_it_shadows(tmp_path):
    out = run("ops", "aten::relu.default", "aten::special_bessel_j0")
    assert re.search(r"aten::relu.default: converter pt2onnx_aten\.\w+\.relu from aten \[builtin\]", out.stdout)
    assert "aten::special_bessel_j0: no converter" in out.stdout
    assert out.returncode == 1  # an op without converter
    (tmp_path / "pyproject.toml").write_text('[tool.pt2onnx]\nplugins = ["local_relu"]\n')
    (tmp_path / "local_relu.py").write_text(
        "from pt2onnx.plugin import hookimpl\n\n"
        "def relu(op, self):\n    return op.Relu(self)\n\n"
        "@hookimpl\ndef pt2onnx_register_converters(register):\n"
        "    register.converter('aten::relu.default', relu)\n"
    )
    out = run("ops", "aten::relu.default", cwd=tmp_path)
    assert "from local_relu [project]" in out.stdout
    assert "shadows aten [builtin]" in out.stdout
    assert "overrides aten::relu.default: aten [builtin]" in run("plugins", cwd=tmp_path).stdout


def test_export_saves_and_verifies_the_demo_model(tmp_path):
    target = tmp_path / "demo.onnx"
    out = run("export", str(ROOT / "docs/examples/demo.py") + ":make_model", "-o", str(target), "--verify")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "max abs difference to eager:" in out.stdout
    assert float(out.stdout.rsplit("max abs difference to eager:", 1)[1].split()[0]) <= 1e-4
    assert [i.name for i in ort.InferenceSession(str(target)).get_inputs()] == ["image"]


@pytest.mark.parametrize("spec", ["nonexistent_module:make", "docs/examples/demo.py"])
def test_export_with_a_bad_factory_fails_clearly(spec, tmp_path):
    out = run("export", spec, "-o", str(tmp_path / "x.onnx"), cwd=ROOT)
    assert out.returncode != 0
    assert not (tmp_path / "x.onnx").exists()
