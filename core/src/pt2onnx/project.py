"""The user's project: its root and its ``[tool.pt2onnx]`` table.

The project is the directory of the nearest ``pyproject.toml`` from the working
directory upward; nothing above it is ever read. The plugin modules its table names are
imported by :func:`pt2onnx.loader.import_project_module`, from beside that file and
without putting the directory on ``sys.path``.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ProjectConfig", "find_pyproject", "project_root", "read_project_config"]


@dataclass(frozen=True)
class ProjectConfig:
    """What the nearest pyproject.toml says about pt2onnx.

    Attributes:
        path: the pyproject.toml read.
        plugins: the module names of ``[tool.pt2onnx] plugins``.
        error: why the file could not be used (then ``plugins`` is empty).
    """

    path: Path
    plugins: list[str] = field(default_factory=list)
    error: str | None = None


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

    Never raises for a bad file: a file that cannot be read or parsed, or whose plugin list
    is not a list of strings, comes back with ``error`` set. A file that does not parse and
    never mentions pt2onnx cannot configure it, so it counts as having no table.
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
    table = config.get("tool", {}).get("pt2onnx")
    if not isinstance(table, dict):
        return None
    plugins = table.get("plugins", [])
    if not isinstance(plugins, list) or not all(isinstance(p, str) and p for p in plugins):
        return ProjectConfig(path, error=f"[tool.pt2onnx] plugins must be a list of module names, got {plugins!r}")
    return ProjectConfig(path, list(plugins))
