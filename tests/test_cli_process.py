"""tests/cli_process.py: a command forked warm gives what the same command started fresh gives."""

from __future__ import annotations

import os
import subprocess
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
    ("args", "env"),
    [
        (("ops",), {}),  # a usage error: status 2, stderr only
        (("plugins", "--json"), {"PT2ONNX_DISABLE_PLUGIN_AUTOLOAD": "1"}),  # the environment is the command's
        (("export", "models.py:broken", "-o", "m.onnx"), {}),  # a model file in the working directory
        (("export", "models.py:tests_helper", "-o", "m.onnx"), {}),  # the command's sys.path
        (("export", "models.py:fine", "-o", "m.onnx", "--quiet"), {}),
    ],
    ids=["usage", "environment", "model-file", "sys-path", "export"],
)
def test_a_warm_command_does_what_a_fresh_one_does(tmp_path: Path, args: tuple[str, ...], env: dict[str, str]):
    environment = {**os.environ, **env}
    results = []
    for name, start in [("fresh", subprocess.run), ("warm", None)]:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "models.py").write_text(FACTORY)
        if start is None:
            done = cli_process.run("pt2onnx", *args, cwd=folder, env=environment)
        else:
            command = [cli_process.which("pt2onnx"), *args]
            done = start(command, cwd=folder, env=environment, capture_output=True, text=True, timeout=300)
        results.append(
            (done.returncode, done.stdout.replace(str(folder), "DIR"), done.stderr.replace(str(folder), "DIR"))
        )
        results[-1] += (sorted(p.name for p in folder.iterdir()),)
    assert results[0] == results[1]
    assert args[0] != "export" or results[0][0] == (0 if "fine" in args[1] else 1), results[0]
