"""Scripts run in a fresh Python process: for what is process-wide (pytree registrations, imports)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run_script(script: str) -> str:
    """Run ``script`` with ``python -c`` in this folder (``tiny_models`` importable); its stdout, or fail with its stderr."""
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout
