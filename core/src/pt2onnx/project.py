"""The user's project: its root and its ``[tool.pt2onnx]`` table.

The project is the directory of the nearest ``pyproject.toml`` from the working
directory upward; nothing above it is ever read. The plugin modules its table names are
imported by :func:`pt2onnx.loader.import_project_module`, from beside that file and
without putting the directory on ``sys.path``.

The table takes the keys of :data:`KEYS`. What a mistake in it does (an export stops, or
goes on with a warning: ``on_error``) is decided by :mod:`pt2onnx.plugin_manager`; this
module only reads the file and says what is wrong with it.
"""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

__all__ = ["KEYS", "ON_ERROR", "OnError", "ProjectConfig", "find_pyproject", "project_root", "read_project_config"]

#: What a mistake in the project config does: ``"error"`` stops every export (the
#: default), ``"warn"`` warns and goes on without what is broken.
OnError = Literal["error", "warn"]
ON_ERROR: tuple[OnError, ...] = ("error", "warn")

#: The keys ``[tool.pt2onnx]`` takes, and what each holds.
KEYS = {
    "plugins": "the modules of the project's plugins (beside pyproject.toml, or installed)",
    "on_error": 'what a mistake in this table does: "error" (the default) stops the export, '
    '"warn" warns and goes on without what is broken',
}


@dataclass(frozen=True)
class ProjectConfig:
    """What the nearest pyproject.toml says about pt2onnx.

    Attributes:
        path: the pyproject.toml read.
        plugins: the module names of ``[tool.pt2onnx] plugins``.
        on_error: ``[tool.pt2onnx] on_error``: what a mistake in the table does.
        error: why the file could not be used (then ``plugins`` is empty).
        problems: mistakes that leave the rest usable (an unknown key, a bad ``on_error``),
            one sentence each.
    """

    path: Path
    plugins: list[str] = field(default_factory=list)
    on_error: OnError = "error"
    error: str | None = None
    problems: list[str] = field(default_factory=list)


def find_pyproject(start: Path | None = None) -> Path | None:
    """The nearest ``pyproject.toml`` from ``start`` (default: the working directory) upward."""
    directory = (start or Path.cwd()).resolve()
    for candidate in (directory, *directory.parents):
        path = candidate / "pyproject.toml"
        if path.is_file():
            return path
    return None


def project_root(start: Path | None = None) -> Path:
    """The project's root: the directory of the nearest pyproject.toml, else the working directory."""
    found = find_pyproject(start)
    return found.parent if found is not None else (start or Path.cwd()).resolve()


def read_project_config(start: Path | None = None) -> ProjectConfig | None:
    """The ``[tool.pt2onnx]`` table of the nearest pyproject.toml, or None if it has none.

    Never raises for a bad file: a file that cannot be read or parsed, a ``tool.pt2onnx``
    that is no table, or a plugin list that is not a list of strings comes back with
    ``error`` set; an unknown key or a bad ``on_error`` with ``problems``. A file that does
    not parse and never mentions pt2onnx cannot configure it, so it counts as having no table.
    """
    path = find_pyproject(start)
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return ProjectConfig(path, error=f"cannot read it: {e}")
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        return ProjectConfig(path, error=f"invalid TOML: {e}") if "pt2onnx" in text else None
    tool = config.get("tool", {})
    table = tool.get("pt2onnx") if isinstance(tool, dict) else None
    if table is None:
        return None
    if not isinstance(table, dict):
        return ProjectConfig(path, error=f"tool.pt2onnx must be a table ([tool.pt2onnx]), got {table!r}")
    problems = [_unknown_key(key) for key in table if key not in KEYS]
    on_error = table.get("on_error", "error")
    if on_error not in ON_ERROR:
        problems.append(f'[tool.pt2onnx] on_error must be "error" or "warn", got {on_error!r}')
        on_error = "error"
    plugins = table.get("plugins", [])
    if not isinstance(plugins, list) or not all(isinstance(p, str) and p for p in plugins):
        return ProjectConfig(
            path,
            on_error=on_error,
            error=f"[tool.pt2onnx] plugins must be a list of module names, got {plugins!r}",
            problems=problems,
        )
    return ProjectConfig(path, list(plugins), on_error, problems=problems)


def _unknown_key(key: str) -> str:
    near = difflib.get_close_matches(key, KEYS, n=1, cutoff=0.6)
    guess = f" (did you mean {near[0]!r}?)" if near else ""
    return f"[tool.pt2onnx] has no key {key!r}{guess}; its keys are {', '.join(sorted(KEYS))}"
