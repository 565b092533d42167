"""What passing tests proved: the registrations that did work in exports that matched eager.

:func:`pt2onnx.testing.assert_exports_like_eager` hands every verified export's
contributions to :func:`record`; the pytest plugin collects them per test and keeps
those of passing tests. A registration counts as proven when a passing test converted
something with it (a rewrite: changed a graph), whatever name its plugin was loaded
under: it is identified by kind, op (or rewrite name) and function.

This module imports nothing heavy, so the pytest plugin costs nothing where unused.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["PROVEN_KINDS", "Proof", "collecting", "record", "selected", "registered", "unproven"]

#: ``(kind, name, function)``: a registration, as a test proves it.
Proof = tuple[str, str, str]

#: The kinds of registration a test can prove (``keep`` entries do nothing to prove).
PROVEN_KINDS = ("converter", "lowering", "custom_op", "decomposition", "rewrite", "pytree", "patch", "dynamic_shapes")

_lock = threading.Lock()
_current: set[Proof] | None = None


class _Calls:
    """The harness calls of one test (of the process, outside a test): how many, and the inputs selected."""

    def __init__(self) -> None:
        self.count = 0
        self.chosen: set[int] = set()


_calls = _Calls()


@contextmanager
def collecting() -> Iterator[set[Proof]]:
    """Collect what :func:`record` receives while the block runs (one test); its harness calls start anew."""
    global _current, _calls
    proofs: set[Proof] = set()
    with _lock:
        previous, _current = _current, proofs
        previous_calls, _calls = _calls, _Calls()
    try:
        yield proofs
    finally:
        with _lock:
            _current, _calls = previous, previous_calls


def selected(digest: int, every: int) -> bool:
    """Whether the harness call on inputs whose digest is ``digest`` is one of every ``every``.

    The first call of the running test is, and so is each call whose digest is a multiple
    of ``every`` or was selected before in this test, so that hypothesis, replaying a
    failing example, meets the same check (a call number alone would differ on replay).
    ``every`` 1 selects every call, 0 none. Outside a :func:`collecting` block, the calls
    of the whole process count as one test.
    """
    with _lock:
        first = _calls.count == 0
        _calls.count += 1
        if every <= 0:
            return False
        chosen = first or digest % every == 0 or digest in _calls.chosen
        if chosen:
            _calls.chosen.add(digest)
        return chosen


def record(contributions: Iterable[Any]) -> None:
    """Note the contributions (:class:`pt2onnx.report.Contribution`) of an export that matched eager."""
    with _lock:
        if _current is not None:
            _current.update((c.kind, c.name, c.function) for c in contributions)


def registered(plugin: str) -> dict[Proof, str]:
    """Every provable registration of ``plugin``, keyed as a test proves it, with the plugin's own name.

    ``plugin`` is the name of a plugin loaded by a normal session (an entry-point name or
    its distribution's name) or an importable module that is a plugin.
    """
    import importlib

    from ..plugin_manager import load_plugins
    from ..registry import build_registry
    from ..report import function_id

    registry = build_registry(load_plugins())
    infos = registry.plugin_set.plugins.values()
    names = {i.name for i in infos if plugin in (i.name, i.distribution)}
    if not names:
        module = importlib.import_module(plugin)
        registry = build_registry(load_plugins([module], autoload=False))
        names = {module.__name__}
    return {
        (r.kind, r.op, function_id(r.fn)): r.plugin
        for r in registry.registrations
        if r.plugin in names and r.kind in PROVEN_KINDS
    }


def unproven(plugin: str, proofs: set[Proof]) -> list[Proof]:
    """The registrations of ``plugin`` that no passing test proved."""
    return sorted(set(registered(plugin)) - proofs)
