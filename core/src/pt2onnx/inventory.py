"""What the loaded plugins provide, as plain data: ``pt2onnx plugins --json`` and ``pt2onnx ops --json``.

The same facts the text of those commands shows, as dicts and lists of strings and
numbers, so scripts need not parse columns.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from .opnames import normalize_op_name
from .registration import Kind, Registration
from .registry import Entry, Registry

__all__ = ["coverage_data", "ops_data", "plugins_data"]

_KINDS: tuple[Kind, ...] = ("converter", "lowering", "custom_op", "decomposition", "keep", "rewrite")


def _registration(r: Registration) -> dict[str, Any]:
    return {
        "plugin": r.plugin,
        "layer": str(r.layer),
        "kind": r.kind,
        "override": r.override,
        "since": r.since,
        "until": r.until,
    }


def _function(r: Registration) -> str | None:
    fn = r.fn
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}" if fn else None


def _entry(op: str, entry: Entry) -> dict[str, Any]:
    return {
        "op": op,
        **_registration(entry.winner),
        "function": _function(entry.winner),
        "shadows": [_registration(s) for s in entry.shadowed],
    }


def plugins_data(registry: Registry) -> dict[str, Any]:
    """Every plugin with its layer, distribution, what it registers and what it overrides."""
    plugin_set = registry.plugin_set
    grouped = registry.by_plugin()
    plugins = []
    for info in sorted(plugin_set.plugins.values(), key=lambda p: (-p.layer, p.name)):
        kinds = Counter(r.kind for r in grouped.get(info.name, []))
        plugins.append(
            {
                "name": info.name,
                "layer": str(info.layer),
                "distribution": info.distribution,
                "version": info.version,
                "registers": {kind: kinds[kind] for kind in _KINDS},
                "overrides": [_entry(e.winner.op, e) for e in registry.overrides(info.name)],
            }
        )
    return {
        "plugins": plugins,
        "project_config": str(plugin_set.project_config) if plugin_set.project_config else None,
        "blocked": list(plugin_set.blocked),
        "broken": [{"name": b.name, "distribution": b.distribution, "error": b.error} for b in plugin_set.broken],
    }


def ops_data(registry: Registry, names: Sequence[str]) -> list[dict[str, Any]]:
    """For each op name asked about: what converts it at the registry's opset (and what that shadows),
    what converts it at other opsets, or what happens to it."""
    found: list[dict[str, Any]] = []
    for raw in names:
        try:
            name = normalize_op_name(raw)
        except ValueError as e:
            found.append({"query": raw, "error": str(e)})
            continue
        packet = name.split(".", 1)[0]
        decomposition = registry.decompositions.get(name) or registry.decompositions.get(packet)
        found.append(
            {
                "query": raw,
                "op": name,
                "opset": registry.opset,
                "converters": [_entry(key, entry) for key, entry in sorted(registry.entries_for(name).items())],
                "other_opsets": [
                    {"op": key, **_registration(r), "function": _function(r)}
                    for key, regs in registry.other_opsets_for(name).items()
                    for r in regs
                ],
                "decomposed_by": _registration(decomposition.winner) if decomposition else None,
                "kept": name in registry.kept or packet in registry.kept,
            }
        )
    return found


def coverage_data(registry: Registry) -> dict[str, Any]:
    """The Core ATen opset coverage: covered and missing ops, and the ops kept whole."""
    from .coverage import coverage

    covered, missing = coverage(registry)
    return {"covered": covered, "missing": missing, "kept": sorted(registry.kept)}
