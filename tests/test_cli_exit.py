"""The command's exit status: a closed output pipe never changes it, and docs/cli.md lists each one."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PT2ONNX = shutil.which("pt2onnx", path=str(Path(sys.executable).parent)) or "pt2onnx"


def _with_a_closed_pipe(args: list[str], *, buffered: bool) -> tuple[int, str]:
    """Run the command with its stdout a pipe whose reader is gone before it writes (``| head -0``).

    ``buffered``: stdout is block-buffered, as Python has it in a pipe by default, so the
    output may reach the pipe only when the interpreter flushes it at exit; unbuffered
    (``PYTHONUNBUFFERED=1``), the command's own write meets the closed pipe.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    reader = subprocess.Popen([PT2ONNX, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert reader.stdout is not None and reader.stderr is not None
    reader.stdout.close()
    stderr = reader.stderr.read().decode()
    return reader.wait(timeout=300), stderr


@pytest.mark.drawn(4, "every command writes through the same guarded exit")
@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize(
    ("args", "status"),
    [
        (["plugins"], 0),
        (["plugins", "--json"], 0),
        (["ops", "aten::relu"], 0),
        (["ops", "aten::special_bessel_j0"], 1),  # no converter: the status the command has
        (["--help"], 0),
        (["--version"], 0),
    ],
    ids=["plugins", "plugins-json", "ops", "ops-none", "help", "version"],
)
def test_a_closed_pipe_never_changes_the_exit_status(args, status, buffered):
    # Before, a buffered stdout failed the interpreter's flush at exit: status 120 and
    # "Exception ignored ... BrokenPipeError" on stderr, whenever the output fit the buffer.
    for _ in range(2):
        got, stderr = _with_a_closed_pipe(args, buffered=buffered)
        assert (got, stderr) == (status, "")


class _ClosedPipe(io.StringIO):
    """A stdout whose reader is gone: writes are buffered, the flush meets the closed pipe."""

    flushes = 0

    def flush(self) -> None:
        type(self).flushes += 1
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:
        raise io.UnsupportedOperation("no file descriptor")

    def close(self) -> None:  # not flushed again when collected
        pass


def test_main_flushes_stdout_itself_and_keeps_the_status(monkeypatch, capsys):
    from pt2onnx.cli import main

    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert main(["ops", "aten::special_bessel_j0"]) == 1
    assert _ClosedPipe.flushes >= 1  # flushed before main returned, not at the interpreter's exit
    monkeypatch.undo()
    assert capsys.readouterr().err == ""


def test_docs_list_every_exit_status():
    from pt2onnx.cli import EXIT_CODES

    text = (ROOT / "docs" / "cli.md").read_text()
    for code, meaning in EXIT_CODES.items():
        assert f"| {code} | {meaning} |" in text, f"docs/cli.md needs the row: | {code} | {meaning} |"
    [verify] = [line for line in text.splitlines() if line.startswith("| `--verify`")]
    assert "exit 5" in verify and "exit 1" not in verify, verify


def test_the_command_pauses_the_garbage_collector_and_freezes_it_at_exit():
    """``main`` pauses collection while it runs (``pt2onnx.collector``) and enables it again for
    a caller that goes on, unless that caller had disabled it; at exit every object is frozen,
    so the interpreter's final collections do not walk what torch left."""
    script = (
        "import atexit, gc\n"
        # Registered first, so it runs last: after pt2onnx's callback.
        "atexit.register(lambda: print('at exit', gc.get_freeze_count() > 0))\n"
        "import pt2onnx.cli as cli\n"
        "command = cli._main\n"
        "cli._main = lambda argv: print('during main', gc.isenabled()) or command(argv)\n"
        "cli.main(['plugins', '--json'])\n"
        "print('after main', gc.get_freeze_count(), gc.isenabled())\n"
        "gc.disable()\n"
        "cli.main(['plugins', '--json'])\n"
        "print('after main', gc.get_freeze_count(), gc.isenabled())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith(("during", "after", "at exit"))]
    assert lines == [
        "during main False",
        "after main 0 True",
        "during main False",
        "after main 0 False",
        "at exit True",
    ]
