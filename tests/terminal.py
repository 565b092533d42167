"""Run a command with its stderr on a pseudo-terminal, as a user's shell has it (progress lines show there only)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
from pathlib import Path

import pytest


def run_on_a_terminal(args: list[str], cwd: Path | None = None) -> tuple[int, str, str]:
    """``(status, stdout, stderr)`` of ``args``, stderr read from a pseudo-terminal (120 columns)."""
    controller, device = pty.openpty()
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    proc = subprocess.Popen(args, cwd=cwd, stdout=subprocess.PIPE, stderr=device, env=env, text=True)
    os.close(device)
    chunks = []
    while True:
        ready, _, _ = select.select([controller], [], [], 300)
        if not ready:
            proc.kill()
            pytest.fail(f"no output from {args} for 300 s")
        try:
            data = os.read(controller, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(controller)
    assert proc.stdout is not None
    out = proc.stdout.read()
    status = proc.wait(timeout=60)
    return status, out, b"".join(chunks).decode("utf-8", "replace")
