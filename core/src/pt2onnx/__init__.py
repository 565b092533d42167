"""pt2onnx: a PyTorch to ONNX exporter built as a plugin framework.

Users call :func:`export`. Plugin authors import :mod:`pt2onnx.plugin` only.
"""

from __future__ import annotations

from . import errors
from .errors import Pt2OnnxError
from .export import export
from .report import Report
from .result import ExportResult
from .runtime import Verification

__all__ = ["ExportResult", "Pt2OnnxError", "Report", "Verification", "__version__", "errors", "export"]

__version__ = "0.1.0"
