"""The resolved registry: one plain table per session, built once from all plugins' hooks.

For each op the highest layer wins; within one layer, two registrations are an error
unless exactly one says ``override=True``. Whatever a winner shadows is kept, so the
report and ``pt2onnx ops`` can show it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import PluginConflictError, PluginError
from .opnames import lookup_keys, op_name
from .plugin_manager import PluginSet, hook_callers, load_plugins
from .registration import (
    ConverterRegistrar,
    CustomOpRegistrar,
    DecompositionRegistrar,
    LoweringRegistrar,
    Registration,
    RewriteRegistrar,
    _Registrar,
    _Sink,
)

__all__ = ["Entry", "Registry", "build_registry"]

_HOOKS: tuple[tuple[str, type[_Registrar]], ...] = (
    ("pt2onnx_register_converters", ConverterRegistrar),
    ("pt2onnx_register_lowerings", LoweringRegistrar),
    ("pt2onnx_register_custom_ops", CustomOpRegistrar),
    ("pt2onnx_register_decompositions", DecompositionRegistrar),
    ("pt2onnx_register_rewrites", RewriteRegistrar),
)


@dataclass(frozen=True)
class Entry:
    """The winning registration for one op, and the registrations it shadows."""

    winner: Registration
    shadowed: tuple[Registration, ...] = ()


def _resolve(op: str, registrations: Sequence[Registration]) -> Entry:
    ranked = sorted(registrations, key=lambda r: r.layer, reverse=True)
    top_layer = ranked[0].layer
    top = [r for r in ranked if r.layer == top_layer]
    if len(top) > 1:
        overriding = [r for r in top if r.override]
        if len(overriding) != 1:
            names = ", ".join(f"{r.plugin!r}" for r in top)
            raise PluginConflictError(
                f"op {op!r} is registered by several {top_layer} plugins: {names}",
                hint="uninstall or block one of them (-p no:NAME / disable=[NAME]), "
                "or mark the one that should win with override=True",
            )
        winner = overriding[0]
    else:
        winner = top[0]
    return Entry(winner, tuple(r for r in ranked if r is not winner))


def _most_specific(op: str, entries: Sequence[Entry]) -> Entry | None:
    """Of the entries for an exact overload and its packet (in that order), the one that wins.

    The higher layer wins. In one layer, one plugin's exact registration refines its own
    packet registration; two plugins are a conflict unless exactly one says ``override=True``.
    """
    if not entries:
        return None
    top = max(e.winner.layer for e in entries)
    tied = [e for e in entries if e.winner.layer == top]
    if len(tied) > 1 and tied[0].winner.plugin != tied[1].winner.plugin:
        best = _resolve(op, [e.winner for e in tied])
        chosen = next(e for e in tied if e.winner is best.winner)
    else:
        chosen = tied[0]
    others = tuple(r for e in entries if e is not chosen for r in (e.winner, *e.shadowed))
    return Entry(chosen.winner, chosen.shadowed + others)


class Registry:
    """Every op's converter or lowering, decomposition and keep entry, and the rewrites, resolved."""

    def __init__(self, plugin_set: PluginSet, registrations: Iterable[Registration]) -> None:
        self.plugin_set = plugin_set
        self.registrations = list(registrations)
        translating: dict[str, list[Registration]] = defaultdict(list)
        decomposing: dict[str, list[Registration]] = defaultdict(list)
        rewriting: dict[str, list[Registration]] = defaultdict(list)
        self.kept: set[str] = set()
        for r in self.registrations:
            if r.converts:
                translating[r.op].append(r)
            elif r.kind == "decomposition":
                decomposing[r.op].append(r)
            elif r.kind == "rewrite":
                rewriting[r.op].append(r)
            else:
                self.kept.add(r.op)
        #: Rewrite passes by name, in the order their names were first registered.
        self.rewrites = {name: _resolve(name, regs) for name, regs in rewriting.items()}
        self.converters = {op: _resolve(op, regs) for op, regs in translating.items()}
        self._lookup_cache: dict[str, Entry | None] = {}
        self.decompositions = {op: _resolve(op, regs) for op, regs in decomposing.items()}

    def lookup(self, target: Any) -> Entry | None:
        """The converter entry for an FX target.

        The registrations for the exact overload and for its packet compete by layer;
        within one layer the exact overload wins.
        """
        key = op_name(target)
        if key not in self._lookup_cache:
            entries = [self.converters[k] for k in lookup_keys(target) if k in self.converters]
            self._lookup_cache[key] = _most_specific(key, entries)
        return self._lookup_cache[key]

    def entries_for(self, name: str) -> dict[str, Entry]:
        """What converts the op named ``name`` (canonical): one entry, or one per registered overload of a packet."""
        packet = name.split(".", 1)[0]
        packet_entry = self.converters.get(packet)
        if name != packet:
            found = _most_specific(name, [e for e in (self.converters.get(name), packet_entry) if e is not None])
            return {name: found} if found is not None else {}
        result = {
            k: _most_specific(k, [e for e in (entry, packet_entry) if e is not None])
            for k, entry in self.converters.items()
            if k.startswith(f"{packet}.")
        }
        if packet_entry is not None:
            result[packet] = packet_entry
        return {k: e for k, e in result.items() if e is not None}

    def decomposition(self, target: Any) -> Entry | None:
        """The plugin decomposition registered for an FX target, if any."""
        for key in lookup_keys(target):
            entry = self.decompositions.get(key)
            if entry is not None:
                return entry
        return None

    def is_kept(self, target: Any) -> bool:
        """Whether a plugin converts or explicitly keeps ``target``, so it is never decomposed."""
        return self.lookup(target) is not None or any(k in self.kept for k in lookup_keys(target))

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
            for table in (self.converters, self.decompositions, self.rewrites)
            for e in table.values()
            if e.winner.plugin == plugin and any(s.plugin != plugin for s in e.shadowed)
        ]


def build_registry(plugin_set: PluginSet) -> Registry:
    """Call every plugin's registration hooks once and resolve the result."""
    registrations: list[Registration] = []
    for hook, registrar_type in _HOOKS:
        for info, impl in hook_callers(plugin_set, hook):
            sink = _Sink(info.name, info.layer)
            kwargs = {"register": registrar_type(sink)} if "register" in impl.argnames else {}
            try:
                impl.function(**kwargs)
            except Exception as e:
                raise PluginError(
                    f"plugin {info.name!r} failed in {hook}: {type(e).__name__}: {e}",
                    hint=f"fix the plugin, or block it with -p no:{info.name} / disable=[{info.name!r}]",
                ) from e
            registrations.extend(sink.registrations)
    return Registry(plugin_set, registrations)


def session_registry(plugins: Sequence[Any] | None = None, disable: Iterable[str] = ()) -> Registry:
    """Load the plugins of one session and build its registry."""
    return build_registry(load_plugins(plugins, disable=disable))
