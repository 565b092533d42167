"""The user's project: its root, its ``[tool.pt2onnx]`` table, and importing its plugin modules.

The project is the directory of the nearest ``pyproject.toml`` from the working
directory upward; nothing above it is ever read. Its plugin modules are imported from
beside that file without putting the directory on ``sys.path``, so a module the project
happens to contain (a ``smtplib.py``) never shadows another one later in the process.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

__all__ = ["ProjectConfig", "find_pyproject", "import_project_module", "project_root", "read_project_config"]

# Project modules are executed by hand (not through sys.path), so their imports are serialized here.
_IMPORT_LOCK = threading.RLock()


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


def _module_file(root: Path, top: str) -> tuple[Path, bool] | None:
    """``root/top.py`` or ``root/top/__init__.py`` (and whether it is a package), if present."""
    package = root / top / "__init__.py"
    if package.is_file():
        return package, True
    module = root / f"{top}.py"
    if module.is_file():
        return module, False
    return None


def import_project_module(name: str, root: Path) -> ModuleType:
    """Import the project plugin ``name`` (dotted) from beside the project's pyproject.toml.

    ``name.py`` or ``name/__init__.py`` in ``root`` is loaded by file location; a dotted
    name's submodules are found through that package. A name with nothing beside the
    pyproject.toml is imported as usual (an installed package). ``sys.path`` is never
    changed. Raises ImportError for a name that would shadow the standard library or a
    module of that name already imported from elsewhere.
    """
    top = name.split(".", 1)[0]
    with _IMPORT_LOCK:
        found = _module_file(root, top)
        if found is None:
            return importlib.import_module(name)
        file, is_package = found
        if top in sys.stdlib_module_names:
            raise ImportError(f"{file} would shadow the standard library module {top!r}; rename it")
        loaded = sys.modules.get(top)
        if loaded is not None:
            loaded_file = getattr(loaded, "__file__", None)
            if loaded_file is None or Path(loaded_file).resolve() != file.resolve():
                raise ImportError(
                    f"a module named {top!r} is already imported from {loaded_file or 'a built-in'}; "
                    f"the project's {file.name} would shadow it: rename it"
                )
            return importlib.import_module(name)
        spec = importlib.util.spec_from_file_location(
            top, file, submodule_search_locations=[str(file.parent)] if is_package else None
        )
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {file}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[top] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(top, None)
            raise
        return importlib.import_module(name)
