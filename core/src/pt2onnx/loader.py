"""Importing the user's code: every module pt2onnx imports because the user named it.

Each way in keeps its own ``sys.path`` rule; they stand side by side here:

- ``pt2onnx export FILE.py:FACTORY`` (:func:`load_factory`): the file's directory is
  first on ``sys.path`` while the file is imported, as ``python FILE.py`` has it, so the
  file can import its neighbours; it is removed afterwards.
- ``pt2onnx export MODULE:FACTORY`` (:func:`load_factory`) and ``pt2onnx export --plugins
  MODULE`` (:func:`import_cli_plugins`): the working directory is first on ``sys.path``
  while the module is imported, as ``python -m`` has it; it is removed afterwards.
- ``[tool.pt2onnx] plugins`` of the project (:func:`import_project_module`): each module
  is loaded by file location from beside the project's pyproject.toml and ``sys.path`` is
  never changed, before or after, so a module the project happens to contain (a
  ``smtplib.py``) never shadows another one later in the process.
- ``export(plugins=["MODULE"])`` (:func:`import_argument_plugin`): imported with
  ``sys.path`` as the caller has it; nothing is added.

Installed packs are not named by the user: their entry points load through
``importlib.metadata`` (:mod:`pt2onnx.plugin_manager`).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = [
    "SourceError",
    "UserCodeError",
    "import_argument_plugin",
    "import_cli_plugins",
    "import_project_module",
    "load_factory",
]

# Project modules are executed by hand (not through sys.path), so their imports are serialized here.
_IMPORT_LOCK = threading.RLock()


class SourceError(Exception):
    """The code the user named cannot be found or used: no such file or module, or no such function in it."""


class UserCodeError(Exception):
    """An exception raised by the user's module or factory, reported with its file:line."""

    def __init__(self, doing: str, error: BaseException) -> None:
        from .capture import user_frame

        frame = user_frame(error)
        where = f" at {frame[0]}" if frame else ""
        super().__init__(f"{doing} {type(error).__name__}: {error}{where}")


def _names_missing(error: ModuleNotFoundError, name: str) -> bool:
    """Whether ``error`` says the module ``name`` itself (or a package above it) is missing, not one it imports.

    Told by name prefix, as the command has always done.
    """
    return error.name is not None and name.startswith(error.name)


@contextmanager
def _first_on_sys_path(directory: Path) -> Iterator[None]:
    """``directory`` first on sys.path while the user's module is imported; removed afterwards."""
    entry = str(directory)
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        sys.path.remove(entry)


def _import_file(path: Path) -> ModuleType:
    """Import the file ``path`` as a module named after it (or ``__pt2onnx_factory__`` if that name is taken)."""
    name = path.stem if path.stem.isidentifier() and path.stem not in sys.modules else "__pt2onnx_factory__"
    module = _exec_file(name, path)
    if module is None:
        raise SourceError(f"{path} is not a Python file")
    return module


def _exec_file(name: str, file: Path, *, package: bool = False) -> ModuleType | None:
    """Run ``file`` as the module ``name`` in ``sys.modules`` (taken out again if it raises); None if no loader takes it."""
    spec = (
        importlib.util.spec_from_file_location(name, file, submodule_search_locations=[str(file.parent)])
        if package
        else importlib.util.spec_from_file_location(name, file)  # the default: an __init__.py loads as a package
    )
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def load_factory(spec: str) -> Callable[[], Any]:
    """The function ``spec`` names: ``FILE.py:FACTORY`` or ``MODULE:FACTORY``, imported as the module docstring says.

    Raises:
        SourceError: ``spec`` is malformed, or names a file, module or function that does not exist.
        UserCodeError: importing the module raised.
    """
    source, sep, attr = spec.rpartition(":")
    if not sep or not source or not attr:
        raise SourceError(f"expected MODULE:FACTORY or FILE.py:FACTORY, got {spec!r}")
    try:
        if source.endswith(".py") or "/" in source or os.sep in source:
            path = Path(source)
            if not path.is_file():
                raise SourceError(f"{source}: no such file (in {Path.cwd()})")
            with _first_on_sys_path(path.resolve().parent):
                module = _import_file(path.resolve())
        else:
            with _first_on_sys_path(Path.cwd()):
                module = importlib.import_module(source)
    except ModuleNotFoundError as e:
        if not _names_missing(e, source):
            raise UserCodeError(f"importing {source} raised", e) from e
        raise SourceError(f"no module named {source!r} (looked in {Path.cwd()} and the installed packages)") from e
    except SourceError:
        raise
    except Exception as e:  # the user's module may raise anything
        raise UserCodeError(f"importing {source} raised", e) from e
    factory = getattr(module, attr, None)
    if not callable(factory):
        defined = sorted(
            n for n, v in vars(module).items() if callable(v) and getattr(v, "__module__", None) == module.__name__
        )
        what = "is not callable" if factory is not None else "is not defined there"
        raise SourceError(f"{source}:{attr} {what}; {source} defines: {', '.join(defined) or 'no functions'}")
    return factory


def import_cli_plugins(names: Sequence[str]) -> list[ModuleType]:
    """The modules ``pt2onnx export --plugins`` names, the working directory first on sys.path while they import.

    Raises:
        SourceError: no module of that name exists.
        UserCodeError: a module imports one that does not exist.
    """
    with _first_on_sys_path(Path.cwd()):
        return [_import_cli_plugin(name) for name in names]


def _import_cli_plugin(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if _names_missing(e, name):
            raise SourceError(f"--plugins {name}: no module named {name!r} (looked in {Path.cwd()})") from e
        raise UserCodeError(f"importing {name} raised", e) from e


def import_argument_plugin(name: str) -> ModuleType:
    """The module ``export(plugins=[name])`` names, imported with ``sys.path`` as the caller has it."""
    return importlib.import_module(name)


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
        if _exec_file(top, file, package=is_package) is None:
            raise ImportError(f"cannot load {file}")
        return importlib.import_module(name)
