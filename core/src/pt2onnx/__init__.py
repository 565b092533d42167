"""pt2onnx: a PyTorch to ONNX exporter built as a plugin framework.

Users call :func:`export`. Plugin authors import :mod:`pt2onnx.plugin` only.

The names below are imported on first use, so ``import pt2onnx`` (and ``pt2onnx --help``)
does not import torch until something needs it.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from . import errors
from .errors import Pt2OnnxError

if TYPE_CHECKING:
    from .export import export
    from .report import Report
    from .result import ExportResult
    from .runtime import Verification

__all__ = ["ExportResult", "Pt2OnnxError", "Report", "Verification", "__version__", "errors", "export"]

__version__ = "0.1.0"

_LAZY = {"export": ".export", "ExportResult": ".result", "Report": ".report", "Verification": ".runtime"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


class _Package(types.ModuleType):
    """Keeps ``pt2onnx.export`` the function once the submodule of the same name is imported.

    Importing a submodule sets it as an attribute of its package; for ``pt2onnx.export``
    that would hide the function users call, so the function is stored instead (as the
    eager ``from .export import export`` did).
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "export" and isinstance(value, types.ModuleType):
            value = value.export
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
