"""tests/cli_process.py: a command forked warm gives what the same command started fresh gives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import cli_process

FACTORY = """\
import torch


def broken():
    raise RuntimeError("no weights here")


def tests_helper():
    import case_draw  # in tests/: on the test's sys.path, not on a console script's

    return case_draw


def fine():
    return torch.nn.ReLU(), (torch.randn(2, 3),)
"""


@pytest.mark.parametrize(
    ("args", "env", "status"),
    [
        (("ops",), {}, 2),  # a usage error: stderr only
        (("plugins", "--json"), {"PT2ONNX_DISABLE_PLUGIN_AUTOLOAD": "1"}, 0),  # the environment is the command's
        (("export", "models.py:broken", "-o", "m.onnx"), {}, 1),  # a model file in the working directory
        (("export", "models.py:tests_helper", "-o", "m.onnx"), {}, 1),  # the command's sys.path
        (("export", "models.py:fine", "-o", "m.onnx", "--quiet"), {}, 0),
    ],
    ids=["usage", "environment", "model-file", "sys-path", "export"],
)
def test_a_warm_command_does_what_a_fresh_one_does(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], status: int
):
    environment = {**os.environ, **env}
    fresh, warm = tmp_path / "fresh", tmp_path / "warm"
    for folder in (fresh, warm):
        folder.mkdir()
        (folder / "models.py").write_text(FACTORY)
    command = [cli_process.which("pt2onnx"), *args]
    started = subprocess.run(command, cwd=fresh, env=environment, capture_output=True, text=True, timeout=300)
    forked = cli_process.run("pt2onnx", *args, cwd=warm, env=environment)

    def seen(done: subprocess.CompletedProcess[str], folder: Path) -> tuple:
        out, err = (text.replace(str(folder), "DIR") for text in (done.stdout, done.stderr))
        return done.returncode, out, err, sorted(p.name for p in folder.iterdir())

    assert seen(forked, warm) == seen(started, fresh)
    assert started.returncode == status, started.stderr


SCRIPT = """\
import os
import sys

import helper  # beside the script: its folder is first on sys.path

print(__name__, sys.argv[2:], os.getcwd() == sys.argv[1], helper.NAME)
try:
    import case_draw  # in tests/: on the test's sys.path, not on a script's
except ImportError as e:
    print("not importable:", e.name)
print("to stderr", file=sys.stderr)
raise SystemExit(int(sys.argv[2]))
"""


@pytest.mark.parametrize("status", [0, 3])
def test_a_warm_script_does_what_python_running_it_fresh_does(tmp_path: Path, status: int):
    scripts, fresh, warm = tmp_path / "scripts", tmp_path / "fresh", tmp_path / "warm"
    for folder in (scripts, fresh, warm):
        folder.mkdir()
    (scripts / "script.py").write_text(SCRIPT)
    (scripts / "helper.py").write_text("NAME = 'helper'\n")
    started = subprocess.run(
        [sys.executable, str(scripts / "script.py"), str(fresh), str(status)],
        cwd=fresh,
        capture_output=True,
        text=True,
        timeout=300,
    )
    forked = cli_process.run_python(scripts / "script.py", str(warm), str(status), cwd=warm)
    assert (forked.returncode, forked.stdout, forked.stderr) == (started.returncode, started.stdout, started.stderr)
    assert started.returncode == status
    assert started.stdout == f"__main__ ['{status}'] True helper\nnot importable: case_draw\n"
