"""torch's deprecation warnings that pt2onnx's own calls into torch trigger, silenced there.

They are about torch's internals (e.g. ``run_decompositions`` building a ``LeafSpec``), so
a user can do nothing about them. Only these messages, only around pt2onnx's calls:
warnings from the user's own code and any other torch warning still show.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["TORCH_INTERNAL_WARNINGS", "torch_internal_warnings_silenced"]

#: (category, message regex) of each warning torch emits from its own code on pt2onnx's calls.
TORCH_INTERNAL_WARNINGS: tuple[tuple[type[Warning], str], ...] = (
    (FutureWarning, r"`isinstance\(treespec, LeafSpec\)` is deprecated"),
)


@contextmanager
def torch_internal_warnings_silenced() -> Iterator[None]:
    """Ignore :data:`TORCH_INTERNAL_WARNINGS` inside the block."""
    with warnings.catch_warnings():
        for category, message in TORCH_INTERNAL_WARNINGS:
            warnings.filterwarnings("ignore", message=message, category=category)
        yield
