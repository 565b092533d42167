"""What passing tests proved: the registrations that did work in exports that matched eager.

:func:`pt2onnx.testing.assert_exports_like_eager` hands every verified export's
contributions to :func:`record`, with what the call's checks were worth: how far its
tolerance is above the outputs' dtypes' defaults (its *looseness*), and whether the
export also matched eager on the harness's own *witness* input. The pytest plugin
collects them per test and keeps those of passing tests. A registration counts as
proven when a passing test converted something with it (a rewrite: changed a graph) in
an export that matched eager on the witness too, at a looseness of at most
:data:`TOLERANCE_FACTOR` or the ``tolerance=`` its registration declares. A
registration is identified by kind, op (or rewrite name) and function, whatever name
its plugin was loaded under.

This module imports nothing heavy, so the pytest plugin costs nothing where unused.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = [
    "PROVEN_KINDS",
    "TOLERANCE_FACTOR",
    "Evidence",
    "Proof",
    "collecting",
    "find_plugin",
    "record",
    "registered",
    "selected",
    "unproven",
]

#: ``(kind, name, function)``: a registration, as a test proves it.
Proof = tuple[str, str, str]

#: The kinds of registration a test can prove (``keep`` entries do nothing to prove).
PROVEN_KINDS = ("converter", "lowering", "custom_op", "decomposition", "rewrite", "pytree", "patch", "dynamic_shapes")

#: How far above its dtype's default tolerance (:data:`pt2onnx.testing.TOLERANCES`) a
#: call's ``atol``/``rtol`` may be and still prove the registrations it used: a wider one
#: proves only those that declare it (``@converter(..., tolerance=N)``). The factor of an
#: ``atol`` is taken against the default scaled by the largest finite eager value, so a
#: tolerance that grows with the outputs' magnitude (a sum's roundings) is not loose.
TOLERANCE_FACTOR = 100.0


@dataclass
class Evidence:
    """What verified exports say of the registrations that did work in them.

    ``proven``: for each registration, the least looseness of an export that matched
    eager on its example inputs and on the witness. ``refuted``: for registrations whose
    exports matched only on the inputs the test chose, why the witness proves nothing
    (the first reason met, with the test that met it).
    """

    proven: dict[Proof, float] = field(default_factory=dict)
    refuted: dict[Proof, str] = field(default_factory=dict)

    def add(self, other: Evidence, where: str = "") -> None:
        """Take ``other``'s evidence in (``where``: the test it comes from, named in reasons)."""
        for proof, looseness in other.proven.items():
            self.proven[proof] = min(looseness, self.proven.get(proof, math.inf))
        for proof, why in other.refuted.items():
            self.refuted.setdefault(proof, f"{why} ({where})" if where else why)

    def to_wire(self) -> dict[str, list[Any]]:
        """Plain lists, as pytest-xdist sends a worker's output to the controller."""
        return {
            "proven": [[*proof, looseness] for proof, looseness in self.proven.items()],
            "refuted": [[*proof, why] for proof, why in self.refuted.items()],
        }

    @classmethod
    def from_wire(cls, wire: dict[str, list[Any]]) -> Evidence:
        """The evidence :meth:`to_wire` wrote."""
        return cls(
            {(k, n, f): float(x) for k, n, f, x in wire.get("proven", [])},
            {(k, n, f): str(why) for k, n, f, why in wire.get("refuted", [])},
        )


_lock = threading.Lock()
_current: Evidence | None = None


class _Calls:
    """The harness calls of one test (of the process, outside a test): how many, and the inputs selected."""

    def __init__(self) -> None:
        self.count = 0
        self.chosen: set[int] = set()


_calls = _Calls()


@contextmanager
def collecting() -> Iterator[Evidence]:
    """Collect what :func:`record` receives while the block runs (one test); its harness calls start anew."""
    global _current, _calls
    evidence = Evidence()
    with _lock:
        previous, _current = _current, evidence
        previous_calls, _calls = _calls, _Calls()
    try:
        yield evidence
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


def record(contributions: Iterable[Any], *, looseness: float = 1.0, refuted: str | None = None) -> None:
    """Note the contributions (:class:`pt2onnx.report.Contribution`) of an export that matched eager.

    ``looseness``: how far the call's tolerance is above the default (see
    :data:`TOLERANCE_FACTOR`). ``refuted``: why the export proves nothing although it
    matched (the witness differed, or could not be run), or None.
    """
    with _lock:
        if _current is None:
            return
        for c in contributions:
            proof = (c.kind, c.name, c.function)
            if refuted is None:
                _current.proven[proof] = min(looseness, _current.proven.get(proof, math.inf))
            else:
                _current.refuted.setdefault(proof, refuted)


def find_plugin(plugin: str) -> tuple[Registry, set[str]]:
    """The registry of a session that loads ``plugin``, and the names ``plugin`` is loaded under.

    ``plugin`` is the name of a plugin loaded by a normal session (an entry-point name or
    its distribution's name) or an importable module that is a plugin.

    Raises:
        PluginError: ``plugin`` is neither; the message lists the plugins a session loads
            (entry-point names and their distributions), for ``--pt2onnx-prove`` to report
            as a usage error before any test runs.
    """
    import importlib

    from ..errors import PluginError
    from ..plugin_manager import load_plugins
    from ..registry import build_registry

    registry = build_registry(load_plugins())
    infos = registry.plugin_set.plugins.values()
    names = {i.name for i in infos if plugin in (i.name, i.distribution)}
    if names:
        return registry, names
    try:
        module = importlib.import_module(plugin)
    except ModuleNotFoundError as e:
        if e.name is None or not (plugin == e.name or plugin.startswith(f"{e.name}.")):
            raise  # the module exists, and something it imports does not: its own traceback says what
        known = ", ".join(sorted(f"{i.name} ({i.distribution})" if i.distribution else i.name for i in infos))
        raise PluginError(
            f"{plugin!r} is no pt2onnx plugin and no importable module; the plugins a session loads: {known}",
            hint="name a plugin as 'pt2onnx plugins' lists it (entry-point or distribution name), or an "
            "importable module whose @hookimpl functions register what it converts",
        ) from None
    return build_registry(load_plugins([module], autoload=False)), {module.__name__}


def registered(plugin: str) -> dict[Proof, float | None]:
    """Every provable registration of ``plugin``, keyed as a test proves it, with the tolerance it declares.

    ``plugin`` is named as :func:`find_plugin` takes it.
    """
    from ..report import function_id

    registry, names = find_plugin(plugin)
    declared: dict[Proof, float | None] = {}
    for r in registry.registrations:
        if r.plugin in names and r.kind in PROVEN_KINDS:
            key = (r.kind, r.op, function_id(r.fn))
            # One function may serve an op in several forms: the widest tolerance any declares.
            declared[key] = max((t for t in (declared.get(key), r.tolerance) if t is not None), default=None)
    return declared


def unproven(plugin: str, evidence: Evidence) -> list[tuple[Proof, str]]:
    """The registrations of ``plugin`` that no passing test proved, each with why."""
    missing = []
    for proof, tolerance in sorted(registered(plugin).items()):
        allowed = max(TOLERANCE_FACTOR, tolerance or 0.0)
        looseness = evidence.proven.get(proof)
        if looseness is not None and looseness <= allowed:
            continue
        if looseness is not None:
            why = (
                f"matched eager only at a tolerance {looseness:.3g}x its dtype's default, above the "
                f"{allowed:.3g}x a test may use without the registration declaring it (tolerance=)"
            )
        else:
            why = evidence.refuted.get(proof, "no passing test converted with it")
        missing.append((proof, why))
    return missing
