"""Progress: shown per phase on a terminal, silent in a pipe and with quiet=True."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from terminal import run_on_a_terminal

SCRIPT = """
import sys, torch, pt2onnx
model = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(12)]).eval()
x = torch.randn(2, 16)
result = pt2onnx.export(model, (x,), quiet=(sys.argv[1] == "quiet"))
result.save(sys.argv[2])
print("exported", len(result.model.graph), "nodes", flush=True)
"""


def _run(tmp_path: Path, mode: str, *, terminal: bool) -> tuple[str, str]:
    """Run SCRIPT with stderr on a pseudo-terminal (or a pipe); returns (stdout, stderr)."""
    script = tmp_path / "export_it.py"
    script.write_text(SCRIPT)
    args = [sys.executable, str(script), mode, str(tmp_path / "model.onnx")]
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    if not terminal:
        done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout, done.stderr
    status, out, err = run_on_a_terminal(args)
    assert status == 0, err[-3000:]
    return out, err


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def test_a_terminal_shows_every_phase_with_nodes_and_bytes_counted(tmp_path):
    out, err = _run(tmp_path, "loud", terminal=True)
    assert "exported" in out
    screen = _plain(err)
    for phase in ("plugins", "capture", "decompose", "translate", "assemble", "optimize", "save"):
        assert f"pt2onnx {phase}" in screen, screen[-2000:]
    # Translation counts the graph's 12 linear nodes; saving counts the weights' bytes.
    assert re.search(r"pt2onnx translate .*12/12 nodes", screen), screen[-2000:]
    weights = 12 * (16 * 16 + 16) * 4
    assert re.search(rf"pt2onnx save .*{weights / 1000:.1f}/{weights / 1000:.1f} kB", screen), screen[-2000:]


def test_quiet_silences_progress_on_a_terminal(tmp_path):
    out, err = _run(tmp_path, "quiet", terminal=True)
    assert "exported" in out
    assert "pt2onnx" not in _plain(err)


def test_nothing_is_shown_when_stderr_is_not_a_terminal(tmp_path):
    out, err = _run(tmp_path, "loud", terminal=False)
    assert "exported" in out
    assert "pt2onnx" not in err
