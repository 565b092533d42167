"""The development set-up resolves on any Linux with Python 3.11+ and pip's standard configuration."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOCKS = ["requirements-dev.txt", "constraints-dev.txt"]


@pytest.mark.parametrize("name", LOCKS)
def test_the_lock_pins_no_local_version_label(name):
    # torch==2.13.0+cpu exists on PyTorch's CPU index only: with the standard index pip could
    # not resolve the lock (ResolutionImpossible); torch==2.13.0 takes the +cpu wheel where
    # pip sees it and PyPI's elsewhere.
    pins = re.findall(r"^([A-Za-z0-9_.\-]+)==(\S+)", (ROOT / name).read_text(), re.M)
    assert pins or name == "requirements-dev.txt"
    assert [f"{n}=={v}" for n, v in pins if "+" in v] == []


def test_the_published_distributions_declare_ranges_not_pins():
    # A user's torch must not be replaced by pip install pt2onnx.
    for pyproject in sorted(ROOT.glob("*/**/pyproject.toml")):
        if ".venv" in pyproject.parts:
            continue
        pinned = re.findall(r'"(torch|onnx|onnxruntime|onnxscript|onnx-ir)==', pyproject.read_text())
        assert pinned == [], f"{pyproject.relative_to(ROOT)} pins {pinned}"
