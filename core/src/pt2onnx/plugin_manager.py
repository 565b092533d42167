"""Finding plugins: entry points, the user's project, the ``plugins=`` argument.

Builtin packs are entry points like any installed pack; only their distribution name
puts them in the builtin layer. One :class:`PluginSet` per export session, so tests
and concurrent exports never share state.

What is read when, and how to close each source, is ``docs/trust.md``. In short:
builtin packs always load (``-p no:NAME`` blocks one); installed entry points and the
project's ``[tool.pt2onnx] plugins`` load unless ``PT2ONNX_DISABLE_PLUGIN_AUTOLOAD`` is
set, and only those named in ``PT2ONNX_PLUGINS`` when that is set; ``plugins=`` always
loads. A broken installed pack is skipped with a :class:`PluginLoadWarning`; a broken
``plugins=`` entry is a :class:`PluginError`, since the caller asked for it. The user's
project config is as strict as ``plugins=``: a pyproject.toml that does not parse, an
unknown key in ``[tool.pt2onnx]``, or a plugin it names that cannot be imported or
registers wrongly is a :class:`PluginError`, unless the table says ``on_error = "warn"``
(or ``PT2ONNX_PROJECT_ON_ERROR=warn`` is set): then each is a warning, as for a pack.
``pt2onnx plugins`` and ``pt2onnx ops`` load with ``diagnose=True``: they list every
problem instead of stopping on it.
The project's and the ``plugins=`` modules are imported by :mod:`pt2onnx.loader`, which
says how each treats ``sys.path``.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import importlib_metadata
import pluggy

from . import hookspecs
from .errors import PluginError, PluginLoadWarning, PluginNameWarning
from .loader import import_argument_plugin, import_project_module
from .project import OnError, ProjectConfig, read_project_config
from .registration import Layer

__all__ = [
    "ALLOW_ENV",
    "BUILTIN_DISTRIBUTIONS",
    "DISABLE_AUTOLOAD_ENV",
    "ENTRY_POINT_GROUP",
    "PROJECT_ON_ERROR_ENV",
    "BrokenPlugin",
    "PluginInfo",
    "PluginLoadWarning",
    "PluginSet",
    "hook_callers",
    "load_plugins",
]

ENTRY_POINT_GROUP = "pt2onnx"
#: Set (to anything but 0/false/no) to load no installed entry point and no project config.
DISABLE_AUTOLOAD_ENV = "PT2ONNX_DISABLE_PLUGIN_AUTOLOAD"
#: Comma-separated names: of the installed and project plugins, load only these.
ALLOW_ENV = "PT2ONNX_PLUGINS"
#: ``warn`` (or ``error``): what a mistake in the project's ``[tool.pt2onnx]`` does, whatever its ``on_error`` says.
PROJECT_ON_ERROR_ENV = "PT2ONNX_PROJECT_ON_ERROR"
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
    """A plugin (or the project config) that could not be loaded or registered, and why."""

    name: str
    distribution: str | None
    error: str
    #: How to silence it.
    hint: str = ""


@dataclass
class PluginSet:
    """The plugins of one export session, registered in a fresh pluggy manager.

    Attributes:
        plugins: the loaded plugins by name.
        broken: plugins skipped because they failed to load or register.
        blocked: names blocked with ``disable=`` / ``-p no:NAME`` that matched a plugin.
        not_allowed: installed or project plugins skipped because ``PT2ONNX_PLUGINS`` omits them.
        project_config: the pyproject.toml whose ``[tool.pt2onnx]`` table was read.
        closed: sources not read, each with the reason (e.g. the autoload switch).
        project_on_error: what a mistake in the project config does (``on_error``, or
            ``PT2ONNX_PROJECT_ON_ERROR``): ``"error"`` or ``"warn"``.
        diagnose: loaded to show problems (``pt2onnx plugins``): the project's mistakes are
            recorded as broken, never raised.
    """

    manager: pluggy.PluginManager
    plugins: dict[str, PluginInfo] = field(default_factory=dict)
    broken: list[BrokenPlugin] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    not_allowed: list[str] = field(default_factory=list)
    project_config: Path | None = None
    closed: list[str] = field(default_factory=list)
    project_on_error: OnError = "error"
    diagnose: bool = False

    def skip(
        self,
        name: str,
        error: BaseException | str,
        *,
        distribution: str | None = None,
        hint: str = "",
        project: bool | None = None,
    ) -> None:
        """Record ``name`` as broken, unregister it if it was registered, and warn once.

        For the project's config or one of its plugins (``project``; by default: whether
        ``name`` is loaded in the project layer), a :class:`PluginError` instead, unless
        the project says ``on_error = "warn"`` or the set is loaded to ``diagnose``.
        """
        message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        if project is None:
            info = self.plugins.get(name)
            project = info is not None and info.layer == Layer.PROJECT
        if project:
            hint = self.project_hint(name)
            if self.project_on_error == "error" and not self.diagnose:
                raise PluginError(self.project_problem(name, message), hint=_sentences(hint))
        if self.manager.has_plugin(name):
            self.manager.unregister(name=name)
        self.plugins.pop(name, None)
        self.broken.append(BrokenPlugin(name, distribution, message, hint))
        where = f" (distribution {distribution})" if distribution else ""
        warnings.warn(
            f"pt2onnx plugin {name!r}{where} is skipped: {message}. {hint}".rstrip(),
            PluginLoadWarning,
            stacklevel=2,
        )

    def project_problem(self, name: str, message: str) -> str:
        """What is wrong with the project config (``name`` ``project config``) or one of its plugins."""
        if name == PROJECT_CONFIG:
            return f"the project config {message}"
        return f"the project plugin {name!r} (in [tool.pt2onnx] plugins of {self.project_config}) is broken: {message}"

    def project_hint(self, name: str) -> str:
        """How to fix a problem of the project's config or plugin, and what it does until then."""
        if name == PROJECT_CONFIG:
            fix = f"Fix that file, or set {DISABLE_AUTOLOAD_ENV}=1 to not read it."
            opt_out = f'{PROJECT_ON_ERROR_ENV}=warn (or on_error = "warn" in [tool.pt2onnx], where the file parses)'
        else:
            fix = f"Remove it from [tool.pt2onnx] plugins in {self.project_config}, or block it with -p no:{name}."
            opt_out = f'on_error = "warn" in [tool.pt2onnx] (or {PROJECT_ON_ERROR_ENV}=warn)'
        if self.project_on_error == "warn":
            return f"{fix} (on_error is warn: exports go on without it.)"
        return f"{fix} Exports stop on it until then; {opt_out} makes it a warning."

    def closed_note(self) -> str | None:
        """A sentence saying which plugin sources were closed, for "no converter" errors."""
        notes = list(self.closed)
        if self.not_allowed:
            notes.append(f"{ALLOW_ENV} left out {', '.join(self.not_allowed)}")
        if self.blocked:
            notes.append(f"blocked: {', '.join(self.blocked)}")
        if self.broken:
            notes.append(f"broken and skipped: {', '.join(b.name for b in self.broken)} (see `pt2onnx plugins`)")
        return "; ".join(notes) or None


def _new_manager() -> pluggy.PluginManager:
    manager = pluggy.PluginManager("pt2onnx")
    manager.add_hookspecs(hookspecs)
    return manager


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def _allow_list() -> list[str] | None:
    value = os.environ.get(ALLOW_ENV)
    if value is None:
        return None
    return [name.strip() for name in value.split(",") if name.strip()]


def _canonical(name: str) -> str:
    """Entry-point, distribution and module names compare alike (``pt2onnx_aten`` = ``pt2onnx-aten``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _has_hookimpls(manager: pluggy.PluginManager, plugin: object) -> bool:
    return any(manager.parse_hookimpl_opts(plugin, attr) is not None for attr in dir(plugin))


#: The name the project config's own problems are listed under (``pt2onnx plugins``: BROKEN project config).
PROJECT_CONFIG = "project config"


def _sentences(hint: str) -> str:
    """A hint written as sentences for a listing, as the what-to-do line of an error."""
    return hint[:1].lower() + hint[1:].rstrip(".")


def _project_on_error(config: ProjectConfig | None, diagnose: bool) -> OnError:
    """``PT2ONNX_PROJECT_ON_ERROR`` if set, else the config's ``on_error``, else ``error``."""
    value = os.environ.get(PROJECT_ON_ERROR_ENV, "").strip().lower()
    if not value or config is None:
        return config.on_error if config is not None else "error"
    if value == "warn":
        return "warn"
    if value != "error" and not diagnose:
        raise PluginError(
            f"{PROJECT_ON_ERROR_ENV}={value!r} is not understood, so the project config {config.path} is not read",
            hint=f"set {PROJECT_ON_ERROR_ENV} to warn or error, or unset it",
        )
    return "error"


def _import_failure(name: str, error: Exception, root: Path) -> str:
    """Why the project plugin ``name`` cannot be imported; for a name found nowhere, the modules beside
    the pyproject.toml it may have meant."""
    message = f"{type(error).__name__}: {error}"
    if not isinstance(error, ModuleNotFoundError) or error.name is None or not name.startswith(error.name):
        return message
    top = name.split(".", 1)[0]
    modules = {p.stem for p in root.glob("*.py")} | {p.parent.name for p in root.glob("*/__init__.py")}
    beside = sorted(modules - {"setup", "conftest", "noxfile"})
    near = difflib.get_close_matches(top, beside, n=1)
    guess = f" (did you mean {near[0]!r}?)" if near else ""
    return f"{message}: neither {top}.py nor {top}/__init__.py is beside {root / 'pyproject.toml'}, nor is it installed{guess}"


def _block_hint(name: str) -> str:
    return f"Block it with -p no:{name} (or disable=[{name!r}]) to silence this warning."


class _Loader:
    def __init__(
        self, disable: Iterable[str], autoload: bool, closed_by: str, allow: list[str] | None, diagnose: bool = False
    ) -> None:
        self.disable = list(disable)
        self.blocked = {_canonical(n) for n in self.disable}
        self.allow = allow
        self.allowed = {_canonical(n) for n in allow} if allow is not None else None
        self.autoload = autoload
        self.closed_by = closed_by
        self.known: set[str] = set()
        self.argument_names: dict[str, object] = {}
        self.result = PluginSet(manager=_new_manager(), diagnose=diagnose)

    def is_blocked(self, *names: str | None) -> bool:
        present = [n for n in names if n]
        self.known.update(_canonical(n) for n in present)
        hit = next((n for n in present if _canonical(n) in self.blocked), None)
        if hit is not None:
            self.result.blocked.append(hit)
        return hit is not None

    def is_allowed(self, *names: str | None) -> bool:
        return self.allowed is None or any(_canonical(n) in self.allowed for n in names if n)

    def add(self, plugin: object, info: PluginInfo, *, hint: str = "") -> None:
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
            if info.layer == Layer.ARGUMENT:
                raise PluginError(
                    f"plugin {info.name!r} ({info.source}) is invalid: {e}",
                    hint="check the hook names and signatures against pt2onnx.hookspecs",
                ) from e
            self.result.skip(
                info.name, e, distribution=info.distribution, hint=hint, project=info.layer == Layer.PROJECT
            )
            return
        self.result.plugins[info.name] = info

    def entry_points(self) -> None:
        for ep, dist, version in _installed_entry_points():
            if self.is_blocked(ep.name, dist, ep.module):
                continue
            builtin = dist in BUILTIN_DISTRIBUTIONS
            if not builtin and not self.autoload:
                continue
            if not builtin and not self.is_allowed(ep.name, dist, ep.module):
                self.result.not_allowed.append(ep.name)
                continue
            hint = _block_hint(ep.name)
            try:
                plugin = ep.load()
            except Exception as e:  # noqa: BLE001 - any import failure of a plugin is a warning
                self.result.skip(ep.name, e, distribution=dist, hint=hint)
                continue
            layer = Layer.BUILTIN if builtin else Layer.INSTALLED
            self.add(plugin, PluginInfo(ep.name, layer, dist, version, f"entry point {ep.value}"), hint=hint)

    def project(self, start: Path | None) -> None:
        if not self.autoload:
            self.result.closed.append(f"the project's [tool.pt2onnx] plugins were not read ({self.closed_by})")
            return
        config = read_project_config(start)
        self.result.project_on_error = _project_on_error(config, self.result.diagnose)
        if config is None:
            return
        self.result.project_config = config.path
        problems = [config.error] if config.error is not None else []
        if problems or config.problems:
            # Every mistake of the file at once, not one per run.
            self.result.skip(PROJECT_CONFIG, f"{config.path}: {'; '.join([*problems, *config.problems])}", project=True)
        if config.error is not None:
            return
        for name in config.plugins:
            if self.is_blocked(name):
                continue
            if not self.is_allowed(name):
                self.result.not_allowed.append(name)
                continue
            try:
                module = import_project_module(name, config.path.parent)
            except Exception as e:  # noqa: BLE001 - the project's module may raise anything
                self.result.skip(name, _import_failure(name, e, config.path.parent), project=True)
                continue
            self.add(module, PluginInfo(name, Layer.PROJECT, source=str(config.path)))

    def argument_name(self, plugin: object) -> tuple[str, str]:
        """The plugin's unique name, and the name it was made from (blocking either blocks it).

        A module's name; else an object's ``name`` attribute; else its class's. A second
        object of the same name gets ``#2``, a third ``#3``, so none is dropped.
        """
        if isinstance(plugin, ModuleType):
            return plugin.__name__, plugin.__name__
        explicit = getattr(plugin, "name", None)
        cls = plugin if isinstance(plugin, type) else type(plugin)
        base = explicit if isinstance(explicit, str) and explicit else f"{cls.__module__}.{cls.__qualname__}"
        name, count = base, 1
        while self.argument_names.get(name, plugin) is not plugin:
            count += 1
            name = f"{base}#{count}"
        self.argument_names[name] = plugin
        return name, base

    def arguments(self, plugins: Sequence[PluginSpec]) -> None:
        if isinstance(plugins, (str, ModuleType)) or not isinstance(plugins, Iterable):
            raise PluginError(
                f"plugins= takes a list of plugins, got {type(plugins).__name__} {plugins!r:.80}",
                hint="wrap it in a list: plugins=[...]",
            )
        for plugin in plugins:
            if isinstance(plugin, str):
                try:
                    plugin = import_argument_plugin(plugin)
                except Exception as e:  # importing runs the module's code
                    raise PluginError(
                        f"plugins=[...] names {plugin!r}, which cannot be imported: {type(e).__name__}: {e}",
                        hint="pass an importable module name, a module, or a plugin object",
                    ) from e
            if not _has_hookimpls(self.result.manager, plugin):
                raise PluginError(
                    f"plugins=[...] holds {plugin!r:.80} ({type(plugin).__name__}), which is not a plugin: "
                    "it has no function marked @hookimpl",
                    hint="pass a module, class instance or object with @hookimpl functions such as "
                    "pt2onnx_register_converters (see docs/plugins.md)",
                )
            name, base = self.argument_name(plugin)
            if self.is_blocked(name, base):
                continue
            self.add(plugin, PluginInfo(name, Layer.ARGUMENT, source="plugins= argument"))

    def check_hooks(self) -> None:
        """Skip (or, for ``plugins=``, raise for) every plugin implementing a hook pt2onnx does not define."""
        manager = self.result.manager
        while True:
            try:
                manager.check_pending()
                return
            except pluggy.PluginValidationError as e:
                name = manager.get_name(e.plugin) or repr(e.plugin)
                info = self.result.plugins.get(name)
                message = f"implements a hook pt2onnx does not define: {e}"
                if info is None or info.layer == Layer.ARGUMENT:
                    raise PluginError(
                        f"plugin {name!r} {message}",
                        hint="check the spelling against pt2onnx.hookspecs (e.g. pt2onnx_register_converters)",
                    ) from e
                self.result.skip(name, message, distribution=info.distribution, hint=_block_hint(name))

    def warn_unknown(self) -> None:
        unknown = [n for n in self.disable if _canonical(n) not in self.known]
        for name in unknown:
            warnings.warn(
                f"-p no:{name} / disable=[{name!r}] names no plugin; known: {', '.join(sorted(self.known))}",
                PluginNameWarning,
                stacklevel=3,
            )
        for name in self.allow or ():
            if _canonical(name) not in self.known:
                warnings.warn(
                    f"{ALLOW_ENV} names {name!r}, which is no installed or project plugin",
                    PluginNameWarning,
                    stacklevel=3,
                )


# The installed entry points with their distribution's name and version, per state of the
# import path: importlib-metadata reads every distribution's metadata on each call (30 ms in
# a venv of 150, and 10 ms more for the names and versions), which every export paid.
_EntryPoint = tuple[importlib_metadata.EntryPoint, str | None, str | None]
_ENTRY_POINTS: dict[tuple[tuple[str, int], ...], list[_EntryPoint]] = {}


def _installed_entry_points() -> list[_EntryPoint]:
    """The group's entry points by name, read again whenever a folder of ``sys.path`` changes.

    Installing or removing a distribution (editable ones included) adds or removes an entry
    of its site folder, which changes that folder's modification time: a pack installed
    while the process runs is found by its next export.
    """
    state = tuple((entry, _mtime(entry)) for entry in sys.path)
    if state not in _ENTRY_POINTS:
        _ENTRY_POINTS.clear()
        found = sorted(importlib_metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)
        _ENTRY_POINTS[state] = [
            (ep, ep.dist.name, ep.dist.version) if ep.dist is not None else (ep, None, None) for ep in found
        ]
    return _ENTRY_POINTS[state]


def _mtime(path: str) -> int:
    try:
        return os.stat(path or ".").st_mtime_ns
    except OSError:
        return -1


def load_plugins(
    plugins: Sequence[PluginSpec] | None = None,
    *,
    disable: Iterable[str] = (),
    autoload: bool | None = None,
    project_dir: Path | None = None,
    diagnose: bool = False,
) -> PluginSet:
    """Load every plugin of one session, in all four layers.

    Args:
        plugins: the ``plugins=`` layer: modules, importable module names or plugin objects.
        disable: plugin names (entry-point names, distribution names or module names) to block.
        autoload: load installed entry points and the project config; default: unless
            ``PT2ONNX_DISABLE_PLUGIN_AUTOLOAD`` is set. Builtin packs load either way.
        project_dir: where to start looking for the project's pyproject.toml (default: cwd).
        diagnose: record the project config's mistakes as broken instead of raising for
            them (``pt2onnx plugins`` and ``pt2onnx ops`` show them); a broken ``plugins=``
            entry still raises.

    Raises:
        PluginError: a ``plugins=`` entry is broken; or the project config is (it does not
            parse, has an unknown key, names a plugin that cannot be imported or registered),
            unless it says ``on_error = "warn"`` or ``diagnose`` is set.
    """
    if autoload is None:
        autoload = not _env_flag(DISABLE_AUTOLOAD_ENV)
        closed_by = f"{DISABLE_AUTOLOAD_ENV} is set"
    else:
        closed_by = "autoload=False"
    loader = _Loader(disable, autoload, closed_by, _allow_list(), diagnose)
    if not autoload:
        loader.result.closed.append(f"installed plugin packs were not loaded ({closed_by})")
    loader.entry_points()
    loader.project(project_dir)
    loader.arguments(plugins if plugins is not None else ())
    loader.check_hooks()
    loader.warn_unknown()
    return loader.result


def hook_callers(plugin_set: PluginSet, hook: str) -> list[tuple[PluginInfo, Any]]:
    """Each plugin's implementation of ``hook``, with the plugin it belongs to."""
    caller = getattr(plugin_set.manager.hook, hook)
    return [(plugin_set.plugins[impl.plugin_name], impl) for impl in caller.get_hookimpls()]
