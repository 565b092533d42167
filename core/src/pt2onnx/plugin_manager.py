"""Finding plugins: entry points, the user's project, the ``plugins=`` argument.

Builtin packs are entry points like any installed pack; only their distribution name
puts them in the builtin layer. One :class:`PluginSet` per export session, so tests
and concurrent exports never share state.
"""

from __future__ import annotations

import importlib
import os
import sys
import tomllib
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import importlib_metadata
import pluggy

from . import hookspecs
from .errors import PluginError, PluginLoadWarning
from .registration import Layer

__all__ = [
    "BUILTIN_DISTRIBUTIONS",
    "DISABLE_AUTOLOAD_ENV",
    "ENTRY_POINT_GROUP",
    "BrokenPlugin",
    "PluginInfo",
    "PluginSet",
    "find_project_config",
    "load_plugins",
]

ENTRY_POINT_GROUP = "pt2onnx"
DISABLE_AUTOLOAD_ENV = "PT2ONNX_DISABLE_PLUGIN_AUTOLOAD"
#: Distributions whose entry points form the builtin layer.
BUILTIN_DISTRIBUTIONS = frozenset({"pt2onnx-aten", "pt2onnx-hops", "pt2onnx-decomp", "pt2onnx-fusions"})

PluginSpec = str | ModuleType | object


@dataclass(frozen=True)
class PluginInfo:
    """A loaded plugin: its name, where it came from and which layer it is in."""

    name: str
    layer: Layer
    distribution: str | None = None
    version: str | None = None
    source: str | None = None


@dataclass(frozen=True)
class BrokenPlugin:
    """A plugin that could not be loaded, and why."""

    name: str
    distribution: str | None
    error: str


@dataclass
class PluginSet:
    """The plugins of one export session, registered in a fresh pluggy manager."""

    manager: pluggy.PluginManager
    plugins: dict[str, PluginInfo] = field(default_factory=dict)
    broken: list[BrokenPlugin] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    project_config: Path | None = None


def _new_manager() -> pluggy.PluginManager:
    manager = pluggy.PluginManager("pt2onnx")
    manager.add_hookspecs(hookspecs)
    return manager


def _autoload_disabled() -> bool:
    return os.environ.get(DISABLE_AUTOLOAD_ENV, "").strip().lower() not in ("", "0", "false", "no")


def find_project_config(start: Path | None = None) -> tuple[Path, list[str]] | None:
    """The first ``pyproject.toml`` from ``start`` (default: cwd) upward, and its plugin list.

    Returns None when no pyproject.toml is found or it has no ``[tool.pt2onnx] plugins``.
    """
    directory = (start or Path.cwd()).resolve()
    for candidate in (directory, *directory.parents):
        path = candidate / "pyproject.toml"
        if not path.is_file():
            continue
        try:
            config = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise PluginError(f"cannot read {path}: {e}", hint="fix the TOML syntax of that file") from e
        plugins = config.get("tool", {}).get("pt2onnx", {}).get("plugins", [])
        if not isinstance(plugins, list) or not all(isinstance(p, str) for p in plugins):
            raise PluginError(f"{path}: [tool.pt2onnx] plugins must be a list of module names, got {plugins!r}")
        return (path, plugins) if plugins else None
    return None


def _import_module(name: str, extra_path: Path | None) -> ModuleType:
    if extra_path is not None and str(extra_path) not in sys.path:
        # A project-local plugin lives beside the project's pyproject.toml, as tox's toxfile.py does.
        sys.path.insert(0, str(extra_path))
    return importlib.import_module(name)


def _plugin_name(plugin: object) -> str:
    if isinstance(plugin, ModuleType):
        return plugin.__name__
    if isinstance(plugin, type):
        return f"{plugin.__module__}.{plugin.__qualname__}"
    return f"{type(plugin).__module__}.{type(plugin).__qualname__}"


class _Loader:
    def __init__(self, disable: Iterable[str]) -> None:
        self.blocked = set(disable)
        self.result = PluginSet(manager=_new_manager())

    def is_blocked(self, *names: str | None) -> bool:
        hit = next((n for n in names if n and n in self.blocked), None)
        if hit is not None:
            self.result.blocked.append(hit)
        return hit is not None

    def add(self, plugin: object, info: PluginInfo) -> None:
        # The same plugin reached through two layers (e.g. installed and named in the
        # project or in plugins=, maybe under another name) counts once, in the higher layer.
        known = self.result.manager.get_name(plugin) or info.name
        for name in {info.name, known} & self.result.plugins.keys():
            if self.result.plugins[name].layer >= info.layer:
                return
            self.result.manager.unregister(name=name)
            del self.result.plugins[name]
        try:
            self.result.manager.register(plugin, name=info.name)
        except (ValueError, pluggy.PluginValidationError) as e:
            raise PluginError(
                f"plugin {info.name!r} ({info.source}) is invalid: {e}",
                hint="check the hook names and signatures against pt2onnx.hookspecs",
            ) from e
        self.result.plugins[info.name] = info

    def broken(self, name: str, distribution: str | None, error: BaseException) -> None:
        message = f"{type(error).__name__}: {error}"
        self.result.broken.append(BrokenPlugin(name, distribution, message))
        where = f" from distribution {distribution!r}" if distribution else ""
        warnings.warn(
            f"pt2onnx plugin {name!r}{where} failed to load and is skipped: {message}",
            PluginLoadWarning,
            stacklevel=4,
        )

    def entry_points(self) -> None:
        for ep in sorted(importlib_metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            dist = ep.dist.name if ep.dist is not None else None
            version = ep.dist.version if ep.dist is not None else None
            if self.is_blocked(ep.name, dist):
                continue
            layer = Layer.BUILTIN if dist in BUILTIN_DISTRIBUTIONS else Layer.INSTALLED
            try:
                plugin = ep.load()
            except Exception as e:  # noqa: BLE001 - any import failure of a plugin is a warning
                self.broken(ep.name, dist, e)
                continue
            self.add(plugin, PluginInfo(ep.name, layer, dist, version, f"entry point {ep.value}"))

    def project(self, start: Path | None) -> None:
        found = find_project_config(start)
        if found is None:
            return
        path, names = found
        self.result.project_config = path
        for name in names:
            if self.is_blocked(name):
                continue
            try:
                module = _import_module(name, path.parent)
            except Exception as e:  # noqa: BLE001
                self.broken(name, None, e)
                continue
            self.add(module, PluginInfo(name, Layer.PROJECT, source=str(path)))

    def arguments(self, plugins: Sequence[PluginSpec]) -> None:
        for plugin in plugins:
            if isinstance(plugin, str):
                try:
                    plugin = importlib.import_module(plugin)
                except ImportError as e:
                    raise PluginError(
                        f"plugins=[...] names {plugin!r}, which cannot be imported: {e}",
                        hint="pass an importable module name, a module, or a plugin object",
                    ) from e
            name = _plugin_name(plugin)
            if self.is_blocked(name):
                continue
            self.add(plugin, PluginInfo(name, Layer.ARGUMENT, source="plugins= argument"))


def load_plugins(
    plugins: Sequence[PluginSpec] | None = None,
    *,
    disable: Iterable[str] = (),
    autoload: bool | None = None,
    project_dir: Path | None = None,
) -> PluginSet:
    """Load every plugin of one session, in all four layers.

    Args:
        plugins: the ``plugins=`` layer: modules, importable module names or plugin objects.
        disable: plugin names (entry-point names, distribution names or module names) to block.
        autoload: load entry points; default: unless ``PT2ONNX_DISABLE_PLUGIN_AUTOLOAD`` is set.
        project_dir: where to start looking for the project's pyproject.toml (default: cwd).
    """
    loader = _Loader(disable)
    if autoload is None:
        autoload = not _autoload_disabled()
    if autoload:
        loader.entry_points()
    loader.project(project_dir)
    loader.arguments(plugins or ())
    try:
        loader.result.manager.check_pending()
    except pluggy.PluginValidationError as e:
        raise PluginError(
            f"plugin {e.plugin!r} implements a hook pt2onnx does not define: {e}",
            hint="check the spelling against pt2onnx.hookspecs (e.g. pt2onnx_register_converters)",
        ) from e
    return loader.result


def hook_callers(plugin_set: PluginSet, hook: str) -> list[tuple[PluginInfo, Any]]:
    """Each plugin's implementation of ``hook``, with the plugin it belongs to."""
    caller = getattr(plugin_set.manager.hook, hook)
    return [(plugin_set.plugins[impl.plugin_name], impl) for impl in caller.get_hookimpls()]
