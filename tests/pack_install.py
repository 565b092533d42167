"""Installing a pack for a test: ``pip install --target``, the one way the tests and the docs runner do it.

A pack installed into a folder of its own, not into the development environment, is an
installed plugin only for what puts that folder on its path (a test's ``sys.path``, a
subprocess's ``PYTHONPATH``): every other test still proves the builtin converters alone.
The root conftest.py puts ``tests/`` on ``sys.path``, so test folders anywhere in the
repository import this module by name, as ``tests/docs_runner.py`` does when run as a script.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def pip_install(*packs: str | Path, target: Path, timeout: float | None = None) -> Path:
    """Install the distributions in the folders ``packs`` into ``target``; returns ``target``.

    Without their dependencies (the environment has them) and without build isolation
    (setuptools comes from the environment, so no index is asked). ``pip``'s output is
    captured; a failed install raises ``subprocess.CalledProcessError``.
    """
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            *(str(pack) for pack in packs),
        ],
        check=True,
        capture_output=True,
        timeout=timeout,
    )
    return target
