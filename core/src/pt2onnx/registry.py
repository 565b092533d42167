"""The resolved registry: one plain table per session, built once from all plugins' hooks.

Everything that says how an op is handled — a converter, a lowering, a custom-op
handler (``expand``, ``custom_domain``, ``decompose``) or a plugin decomposition —
competes for the op as one: the highest layer wins; within one layer, registrations of
several plugins conflict unless exactly one says ``override=True``. A conflict is kept
in the table, shown by ``pt2onnx plugins``/``pt2onnx ops``, and raised as a
:class:`~pt2onnx.errors.PluginConflictError` only by an export that reaches the op.
Whatever a winner shadows is kept, so the report and ``pt2onnx ops`` can show it.

The table is built for one target opset. Registrations whose ``since``/``until`` range
does not hold it are set aside first (``other_opsets``, shown by ``pt2onnx ops`` and
named by the "no converter" error); of one plugin's registrations of an op that serve
the opset, the one with the highest ``since`` (None counting as the lowest) stands for
the plugin. Only then do layers and ``override=True`` decide between plugins: a project
converter registered ``since=20`` shadows the builtin one at opsets 20 and later, and the
builtin one still converts the op at 19 and below.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import PluginConflictError, PluginError
from .opnames import lookup_keys, op_name
from .opset import default_opset
from .plugin_manager import PluginInfo, PluginSet, hook_callers, load_plugins
from .registration import (
    PREPARATION_KINDS,
    ConverterRegistrar,
    CustomOpRegistrar,
    DecompositionRegistrar,
    Layer,
    LoweringRegistrar,
    PreparationRegistrar,
    Registration,
    RewriteRegistrar,
    _Registrar,
    _Sink,
)

__all__ = ["Entry", "Registry", "build_registry", "session_registry"]

_HOOKS: tuple[tuple[str, type[_Registrar]], ...] = (
    ("pt2onnx_register_converters", ConverterRegistrar),
    ("pt2onnx_register_lowerings", LoweringRegistrar),
    ("pt2onnx_register_custom_ops", CustomOpRegistrar),
    ("pt2onnx_register_decompositions", DecompositionRegistrar),
    ("pt2onnx_register_rewrites", RewriteRegistrar),
    ("pt2onnx_register_capture_preparations", PreparationRegistrar),
)


@dataclass(frozen=True)
class Entry:
    """The winning registration for one op, the registrations it shadows, and any conflict.

    ``conflict`` holds the same-layer registrations of several plugins, none with
    ``override=True``; then ``winner`` is only the first of them and :meth:`check` raises.
    """

    winner: Registration
    shadowed: tuple[Registration, ...] = ()
    conflict: tuple[Registration, ...] = ()

    @property
    def in_turn(self) -> tuple[Registration, ...]:
        """The winner, then the registrations it shadows, higher layers first: the order in which
        converters are tried when one declines a node (``op.decline``)."""
        return (self.winner, *sorted(self.shadowed, key=lambda r: r.layer, reverse=True))

    def check(self) -> Entry:
        """This entry, or a :class:`PluginConflictError` naming the plugins if it is a conflict."""
        if self.conflict:
            raise conflict_error(self.winner.op, self.conflict)
        return self


def conflict_error(op: str, registrations: Sequence[Registration]) -> PluginConflictError:
    """The error for ``registrations`` of one layer competing for ``op``."""
    names = ", ".join(f"{r.plugin!r} ({r.kind})" for r in registrations)
    if registrations[0].kind == "rewrite":
        what, where = "rewrite", "register.rewrite(name, fn, override=True)"
    elif registrations[0].kind in PREPARATION_KINDS:
        what = "capture preparation"
        where = "register.pytree(cls, ..., override=True), register.patch(name, fn, override=True), ..."
    else:
        what = "op"
        where = (
            "on its @converter/@lowering decorator, or in its call: register.converter(op, fn, override=True), "
            "register.expand(op, fn, override=True), register.decompose(op, fn, override=True), ..."
        )
    return PluginConflictError(
        f"{what} {op!r} is registered by several {registrations[0].layer} plugins: {names}",
        hint=f"mark the one that should win with override=True ({where}), "
        "or block the other with -p no:NAME / disable=[NAME]",
    )


def _serving(registrations: Sequence[Registration], opset: int) -> tuple[list[Registration], list[Registration]]:
    """(those that serve ``opset``, one per plugin: the highest ``since``; the others)."""
    serving = [r for r in registrations if r.serves(opset)]
    newest: dict[str, int] = {}
    for r in serving:
        newest[r.plugin] = max(newest.get(r.plugin, 0), r.since or 0)
    chosen = [r for r in serving if (r.since or 0) == newest[r.plugin]]
    return chosen, [r for r in registrations if not any(r is c for c in chosen)]


def _resolve(registrations: Sequence[Registration]) -> Entry:
    ranked = sorted(registrations, key=lambda r: r.layer, reverse=True)
    top = [r for r in ranked if r.layer == ranked[0].layer]
    winner = top[0]
    if len(top) > 1:
        overriding = [r for r in top if r.override]
        if len(overriding) != 1:
            return Entry(winner, tuple(r for r in ranked if r is not winner), tuple(top))
        winner = overriding[0]
    return Entry(winner, tuple(r for r in ranked if r is not winner))


def _most_specific(entries: Sequence[Entry]) -> Entry | None:
    """Of the entries for an exact overload and its packet (in that order), the one that wins.

    The higher layer wins. In one layer, one plugin's exact registration refines its own
    packet registration; two plugins conflict unless exactly one says ``override=True``.
    """
    if not entries:
        return None
    top = max(e.winner.layer for e in entries)
    tied = [e for e in entries if e.winner.layer == top]
    chosen = tied[0]
    conflict = chosen.conflict
    if len(tied) > 1 and tied[0].winner.plugin != tied[1].winner.plugin:
        best = _resolve([e.winner for e in tied])
        chosen = next(e for e in tied if e.winner is best.winner)
        conflict = best.conflict or chosen.conflict
    others = tuple(r for e in entries if e is not chosen for r in (e.winner, *e.shadowed))
    return Entry(chosen.winner, chosen.shadowed + others, conflict)


@dataclass(frozen=True)
class _Tables:
    """The registrations resolved for one opset; read-only once built."""

    kept: set[str]
    other_opsets: dict[str, list[Registration]]
    handlers: dict[str, Entry]
    rewrites: dict[str, Entry]
    rewrites_off: dict[str, list[Registration]]
    preparations: dict[str, Entry]


def _resolve_serving(
    registered: dict[str, list[Registration]], opset: int, other_opsets: dict[str, list[Registration]]
) -> dict[str, Entry]:
    resolved = {}
    for name, regs in registered.items():
        serving, others = _serving(regs, opset)
        if others:
            other_opsets[name] = others
        if serving:
            resolved[name] = _resolve(serving)
    return resolved


def _build_tables(registrations: Sequence[Registration], opset: int) -> _Tables:
    handling: dict[str, list[Registration]] = defaultdict(list)
    rewriting: dict[str, list[Registration]] = defaultdict(list)
    preparing: dict[str, list[Registration]] = defaultdict(list)
    kept: set[str] = set()
    for r in registrations:
        if r.kind == "keep":
            kept.add(r.op)
        elif r.kind == "rewrite":
            rewriting[r.op].append(r)
        elif r.kind in PREPARATION_KINDS:
            preparing[r.op].append(r)
        else:
            handling[r.op].append(r)
    other_opsets: dict[str, list[Registration]] = {}
    handlers = _resolve_serving(handling, opset, other_opsets)
    rewrites = _resolve_serving(rewriting, opset, other_opsets)
    return _Tables(
        kept,
        other_opsets,
        handlers,
        rewrites,
        {name: regs for name, regs in rewriting.items() if name not in rewrites},
        {name: _resolve(regs) for name, regs in preparing.items()},
    )


# The last few resolutions, by opset and the registrations' identities (the registrations
# are held, so no identity is reused). Without project or plugins= plugins every export
# of a process registers the same pack registrations (_PACK_REGISTRATIONS), and resolving
# them again cost 3 ms an export.
_TABLES: dict[tuple[int, tuple[int, ...]], tuple[tuple[Registration, ...], _Tables]] = {}
_TABLES_KEPT = 8


def _tables(registrations: tuple[Registration, ...], opset: int) -> _Tables:
    key = (opset, tuple(map(id, registrations)))
    if key not in _TABLES:
        if len(_TABLES) >= _TABLES_KEPT:
            del _TABLES[next(iter(_TABLES))]
        _TABLES[key] = (registrations, _build_tables(registrations, opset))
    return _TABLES[key][1]


class Registry:
    """Every op's handler (converter, lowering, custom-op handler or decomposition), keeps, rewrites and
    capture preparations, resolved.

    ``lookup`` and ``decomposition`` are what an export asks; they raise the
    :class:`PluginConflictError` of an op in conflict. ``find``, ``converts`` and
    ``entries_for`` never raise: they serve diagnosis. Resolved for the target
    ``opset`` (default: :func:`~pt2onnx.opset.default_opset`).
    """

    def __init__(
        self, plugin_set: PluginSet, registrations: Iterable[Registration], *, opset: int | None = None
    ) -> None:
        self.plugin_set = plugin_set
        self.registrations = list(registrations)
        #: The target opset the tables are resolved for.
        self.opset = default_opset() if opset is None else opset
        tables = _tables(tuple(self.registrations), self.opset)
        self.kept: set[str] = tables.kept
        #: Per op name (and rewrite name), its registrations that do not serve :attr:`opset`
        #: or that a newer form of the same plugin supersedes.
        self.other_opsets: dict[str, list[Registration]] = tables.other_opsets
        #: Every registered op name's entry (its handlers of all kinds, resolved by layer).
        self.handlers: dict[str, Entry] = tables.handlers
        #: Rewrite passes by name, in the order their names were first registered.
        self.rewrites: dict[str, Entry] = tables.rewrites
        #: Rewrite passes registered only for other opsets: off in this export.
        self.rewrites_off: dict[str, list[Registration]] = tables.rewrites_off
        #: Capture preparations (pytree types, patches, dynamic-shape hints) by name, in registration order.
        self.preparations: dict[str, Entry] = tables.preparations
        self._cache: dict[str, Entry | None] = {}

    def unserved(self, target: Any) -> list[Registration]:
        """The converting registrations of ``target`` (overload or packet) for opsets other than :attr:`opset`."""
        return [r for k in lookup_keys(target) for r in self.other_opsets.get(k, ()) if r.converts]

    @property
    def converters(self) -> dict[str, Entry]:
        """The registered names whose handler translates the op (converter, lowering, expand, custom domain)."""
        return {op: e for op, e in self.handlers.items() if e.winner.converts and not e.conflict}

    @property
    def decompositions(self) -> dict[str, Entry]:
        """The registered names whose handler is a decomposition into other ops."""
        return {op: e for op, e in self.handlers.items() if e.winner.kind == "decomposition" and not e.conflict}

    @property
    def conflicts(self) -> dict[str, Entry]:
        """The registered names in conflict, an overload's with its packet's (raised by an export that reaches them)."""
        resolved = {op: self.entries_for(op).get(op) for op in self.handlers}
        return {op: e for op, e in resolved.items() if e is not None and e.conflict}

    def find(self, target: Any) -> Entry | None:
        """The entry that handles an FX target (exact overload and packet compete by layer); never raises."""
        key = op_name(target)
        if key not in self._cache:
            self._cache[key] = _most_specific([self.handlers[k] for k in lookup_keys(target) if k in self.handlers])
        return self._cache[key]

    def lookup(self, target: Any) -> Entry | None:
        """The converter entry for an FX target, or None when nothing converts it (or it is decomposed).

        Raises:
            PluginConflictError: the op's handlers conflict.
        """
        entry = self.find(target)
        if entry is None or not entry.check().winner.converts:
            return None
        return entry

    def decomposition(self, target: Any) -> Entry | None:
        """The plugin decomposition that handles an FX target, if that is what won.

        Raises:
            PluginConflictError: the op's handlers conflict.
        """
        entry = self.find(target)
        if entry is None or entry.check().winner.kind != "decomposition":
            return None
        return entry

    def converts(self, target: Any) -> bool:
        """Whether a plugin translates ``target`` itself (also when its handlers conflict); never raises."""
        entry = self.find(target)
        return entry is not None and any(r.converts for r in (entry.winner, *entry.conflict))

    def is_kept(self, target: Any) -> bool:
        """Whether a plugin converts or explicitly keeps ``target``, so torch's table never decomposes it."""
        entry = self.find(target)
        if entry is not None and entry.winner.kind == "decomposition" and not entry.conflict:
            return False
        return self.converts(target) or any(k in self.kept for k in lookup_keys(target))

    def entries_for(self, name: str) -> dict[str, Entry]:
        """What handles the op named ``name`` (canonical): one entry, or one per registered overload of a packet."""
        packet = name.split(".", 1)[0]
        packet_entry = self.handlers.get(packet)
        if name != packet:
            found = _most_specific([e for e in (self.handlers.get(name), packet_entry) if e is not None])
            return {name: found} if found is not None else {}
        result = {
            k: _most_specific([e for e in (entry, packet_entry) if e is not None])
            for k, entry in self.handlers.items()
            if k.startswith(f"{packet}.")
        }
        if packet_entry is not None:
            result[packet] = packet_entry
        return {k: e for k, e in result.items() if e is not None}

    def other_opsets_for(self, name: str) -> dict[str, list[Registration]]:
        """Like :meth:`entries_for`: the registrations of ``name`` (or of its packet's overloads) for other opsets."""
        packet = name.split(".", 1)[0]
        keys = {name, packet} if name != packet else {k for k in self.other_opsets if k.split(".", 1)[0] == packet}
        return {k: regs for k in sorted(keys) if (regs := [r for r in self.other_opsets.get(k, ()) if r.converts])}

    def rewrite_functions(self) -> dict[str, Any]:
        """Each rewrite pass's winning function by name (see :meth:`check_rewrites` for conflicts)."""
        return {name: e.winner.fn for name, e in self.rewrites.items()}

    def rewrites_off_reasons(self) -> dict[str, str]:
        """Why each rewrite registered only for other opsets is off in this export."""
        return {
            name: f"registered for opsets {', '.join(sorted({r.opsets for r in regs}))}, the target is {self.opset}"
            for name, regs in self.rewrites_off.items()
        }

    def check_rewrites(self, names: Iterable[str]) -> None:
        """Raise the :class:`PluginConflictError` of the first of the rewrite passes ``names`` in conflict."""
        for name in names:
            entry = self.rewrites.get(name)
            if entry is not None:
                entry.check()

    def by_plugin(self) -> dict[str, list[Registration]]:
        """Every registration, grouped by the plugin that made it."""
        grouped: dict[str, list[Registration]] = defaultdict(list)
        for r in self.registrations:
            grouped[r.plugin].append(r)
        return dict(grouped)

    def overrides(self, plugin: str) -> list[Entry]:
        """The entries where ``plugin`` wins over registrations of other plugins."""
        return [
            e
            for table in (self.handlers, self.rewrites, self.preparations)
            for e in table.values()
            if not e.conflict and e.winner.plugin == plugin and any(s.plugin != plugin for s in e.shadowed)
        ]


# A pack's registrations by (hook function, plugin name, layer). An entry-point pack's
# modules are imported once per process, and calling its hooks again on every export
# redid the same work: 9 of the 18 ms session_registry() took with the builtin packs. Hooks of project and plugins= plugins are called on every export.
_PACK_REGISTRATIONS: dict[tuple[Any, str, Layer], list[Registration]] = {}


def _registrations(info: PluginInfo, impl: Any, registrar_type: type[_Registrar]) -> list[Registration]:
    """What ``impl`` registers: called once per process for a builtin or installed pack; raises what it raises."""
    key = (impl.function, info.name, info.layer)
    kept = _PACK_REGISTRATIONS.get(key)
    if kept is not None:
        return kept
    sink = _Sink(info.name, info.layer)
    impl.function(**({"register": registrar_type(sink)} if "register" in impl.argnames else {}))
    if info.layer <= Layer.INSTALLED:
        _PACK_REGISTRATIONS[key] = sink.registrations
    return sink.registrations


def build_registry(plugin_set: PluginSet, opset: int | None = None) -> Registry:
    """Call every plugin's registration hooks once and resolve the result for the target ``opset``.

    A plugin whose hook raises (e.g. an invalid op name) is skipped with a
    :class:`~pt2onnx.errors.PluginLoadWarning`, all its registrations dropped; one
    passed with ``plugins=`` is a :class:`PluginError` instead.
    """
    registrations: list[Registration] = []
    failed: dict[str, tuple[str, Exception]] = {}
    for hook, registrar_type in _HOOKS:
        for info, impl in hook_callers(plugin_set, hook):
            if info.name in failed:
                continue
            try:
                registrations.extend(_registrations(info, impl, registrar_type))
            except Exception as e:  # a plugin may raise anything while registering
                if info.layer == Layer.ARGUMENT:
                    raise PluginError(
                        f"plugin {info.name!r} failed in {hook}: {type(e).__name__}: {e}",
                        hint=f"fix the plugin, or leave it out of plugins= / block it with disable=[{info.name!r}]",
                    ) from e
                failed[info.name] = (hook, e)
    for name, (hook, error) in failed.items():
        info = plugin_set.plugins[name]
        plugin_set.skip(
            name,
            f"failed in {hook}: {type(error).__name__}: {error}",
            distribution=info.distribution,
            hint=f"Block it with -p no:{name} (or disable=[{name!r}]) to silence this warning.",
        )
    return Registry(plugin_set, [r for r in registrations if r.plugin not in failed], opset=opset)


def session_registry(
    plugins: Sequence[Any] | None = None, disable: Iterable[str] = (), opset: int | None = None
) -> Registry:
    """Load the plugins of one session and build its registry for ``opset`` (default: the default opset)."""
    return build_registry(load_plugins(plugins, disable=disable), opset)
