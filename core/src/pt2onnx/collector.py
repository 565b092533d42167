"""Python's cyclic garbage collector, paused while an export runs.

An export allocates hundreds of thousands of objects that live until it returns: FX nodes,
sympy expressions, fake tensors, ONNX IR values. Their allocation keeps triggering the
collector, and every full collection walks each tracked object in the process, the caller's
and torch's included, to find almost nothing: reference counting frees what an export drops,
and little of it is cyclic. Measured on ``pt2onnx-transformers causal-lm`` with a two-layer
Llama checkpoint, 7 full collections took 0.65 s of the command's 4.7 s and freed 275 objects;
with collection paused, the command's peak memory grew by 2% (``benchmarks/README.md``, "The
garbage collector"). The cycles an export leaves are freed by the first collection after it.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["collector_paused"]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause automatic garbage collection inside the block (or the decorated function).

    The collector is enabled again on the way out, error or not, unless it was already
    disabled on the way in: a caller's own ``gc.disable()`` and nested pauses are kept.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
