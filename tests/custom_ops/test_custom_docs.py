"""The docs' custom-op and override examples, executed as a user would run them."""

from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from pack_install import pip_install

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
_FILE_BLOCK = re.compile(r'^```\w+ title="(?P<path>[^"]+)"\n(?P<body>.*?)^```$', re.M | re.S)


def _env(pythonpath: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return env


@pytest.mark.parametrize("example", ["custom_op_expand", "custom_op_domain", "custom_op_decompose"])
def test_custom_op_example_runs(example, capsys):
    # Each example defines its own op namespace, so they can share this process.
    runpy.run_path(str(DOCS / "examples" / f"{example}.py"), run_name="__main__")
    assert "ok ok ok ok" in capsys.readouterr().out


def test_from_nothing_to_an_installed_pack(tmp_path):
    """docs/custom_ops.md's walk-through: write its files, pip install the pack, export."""
    blocks = {m["path"]: m["body"] for m in _FILE_BLOCK.finditer((DOCS / "custom_ops.md").read_text())}
    assert set(blocks) == {
        "myops.py",
        "pt2onnx-myops/pyproject.toml",
        "pt2onnx-myops/pt2onnx_myops/__init__.py",
        "export_model.py",
    }
    for path, body in blocks.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(body)

    # Not installed yet: the export fails, naming the op and the three ways.
    before = subprocess.run(
        [sys.executable, "export_model.py"], cwd=tmp_path, env=_env(), capture_output=True, text=True
    )
    assert before.returncode != 0
    assert "myops::soft_clip.default is a custom op" in before.stderr

    site = pip_install(tmp_path / "pt2onnx-myops", target=tmp_path / "site")
    plugins = subprocess.run(
        [sys.executable, "-c", "from pt2onnx.cli import main; main(['plugins'])"],
        cwd=tmp_path,
        env=_env(site),
        capture_output=True,
        text=True,
    )
    [row] = [line.split() for line in plugins.stdout.splitlines() if line.startswith("myops ")]
    assert row[:3] == ["myops", "installed", "pt2onnx-myops"]
    after = subprocess.run(
        [sys.executable, "export_model.py"], cwd=tmp_path, env=_env(site), capture_output=True, text=True
    )
    assert after.returncode == 0, after.stderr[-3000:]
    assert "'myops::soft_clip.default': 'myops [installed]'" in after.stdout
    assert (tmp_path / "model.onnx").is_file()
