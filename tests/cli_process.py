"""The tests' console commands, each in a process of its own, started with torch already imported.

A ``pt2onnx`` command run by a test is a process of its own, as a user's is: its own working
directory, environment, plugin discovery, exit status and output. Started from scratch it
spends about 4 s of these machines' time importing torch, onnx, onnxscript and onnxruntime
before it does anything, and the suite runs some hundred commands. So each one is forked
from a server that has imported those libraries and nothing else (multiprocessing's
forkserver, one per test worker): pt2onnx, its plugins and the model files are imported
afresh by every command, from the command's own directory, environment and ``sys.path``.
The documentation pages' runner (``python tests/docs_runner.py PAGE DIR``) starts the same way
(:func:`run_python`).

What only a fresh interpreter has stays with :func:`subprocess.run`: an environment that
sets ``PYTHON*`` variables (``PYTHONPATH``, ``PYTHONWARNINGS`` are read at start-up) and
the tests of terminals, pipes and signals, which start their processes themselves.
"""

from __future__ import annotations

import atexit
import io
import json
import multiprocessing
import os
import runpy
import shutil
import subprocess
import sys
import tempfile
import traceback
from importlib.metadata import entry_points
from pathlib import Path

#: Imported once by the server; every command starts with them in ``sys.modules``.
PRELOADED = ["torch", "onnx", "onnx_ir", "onnxscript", "onnxruntime", "numpy"]

_BIN = Path(sys.executable).parent
_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(PRELOADED)
_plain_path: list[str] | None = None


def run(
    command: str, *args: str, cwd: Path | str | None = None, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run the console script ``command`` (``pt2onnx``, ``pt2onnx-transformers``) with ``args``,
    in ``cwd``, with the environment ``env`` (default ``os.environ``), and capture its output as
    text: what ``subprocess.run([command, *args], cwd=cwd, env=env, capture_output=True,
    text=True, timeout=timeout)`` returns."""
    return _forked([str(_BIN / command), *args], _sys_path(), cwd, env, timeout, script=False)


def run_python(
    script: Path | str,
    *args: str,
    cwd: Path | str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """``python SCRIPT ARGS...`` as :func:`run` runs a command: the script runs as ``__main__``
    with its own folder first on ``sys.path``, as a fresh interpreter would put it."""
    script = Path(script).resolve()
    return _forked([str(script), *args], [str(script.parent), *_sys_path()[1:]], cwd, env, timeout, script=True)


def _forked(
    argv: list[str], path: list[str], cwd: Path | str | None, env: dict[str, str] | None, timeout: float, script: bool
) -> subprocess.CompletedProcess[str]:
    environment = dict(os.environ if env is None else env)
    python = {k for k in {*environment, *os.environ} if k.startswith("PYTHON")}
    if any(environment.get(k) != os.environ.get(k) for k in python):
        fresh = [sys.executable, *argv] if script else argv
        return subprocess.run(fresh, cwd=cwd, env=environment, capture_output=True, text=True, timeout=timeout)
    with tempfile.TemporaryDirectory() as tmp:
        out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
        process = _context.Process(
            target=_command, args=(argv, str(cwd or os.getcwd()), environment, path, str(out), str(err), script)
        )
        process.start()
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
            process.join()
            raise subprocess.TimeoutExpired(argv, timeout, out.read_bytes(), err.read_bytes())
        return subprocess.CompletedProcess(argv, process.exitcode, out.read_text(), err.read_text())


def _sys_path() -> list[str]:
    """The ``sys.path`` of a console script's process: the script's folder, then what the
    interpreter adds from this environment (``PYTHONPATH``, the site's folders)."""
    global _plain_path
    if _plain_path is None:
        code = "import json, sys; print(json.dumps(sys.path[1:]))"
        shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        _plain_path = [str(_BIN), *json.loads(shown.stdout)]
    return _plain_path


def _command(argv: list[str], cwd: str, env: dict[str, str], path: list[str], out: str, err: str, script: bool) -> None:
    """In the forked process: become the command (or ``python`` running ``script``), run it, exit
    with its status (never returns)."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.path[:] = path
    sys.argv = argv
    for fd, name, mode in ((0, os.devnull, os.O_RDONLY), (1, out, os.O_WRONLY), (2, err, os.O_WRONLY)):
        os.dup2(os.open(name, mode | (os.O_CREAT if fd else 0)), fd)
    # What a fresh interpreter writing to a file has: block-buffered stdout (unless
    # PYTHONUNBUFFERED), stderr by line.
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8", write_through=unbuffered
    )
    sys.stderr = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
    )
    try:
        if script:
            runpy.run_path(argv[0], run_name="__main__")
            status = None
        else:
            (entry,) = entry_points(group="console_scripts", name=Path(argv[0]).name)
            status = entry.load()()
    except SystemExit as e:
        status = e.code
    except BaseException:  # noqa: BLE001 - what the interpreter does with an uncaught exception
        traceback.print_exc()
        status = 1
    if status is not None and not isinstance(status, int):
        print(status, file=sys.stderr)
        status = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(status or 0)


def which(command: str) -> str:
    """The path of the console script ``command`` in this environment."""
    return shutil.which(command, path=str(_BIN)) or command
