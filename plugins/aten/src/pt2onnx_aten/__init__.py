"""pt2onnx-aten: the builtin converters of aten ops, one module per op family."""

from __future__ import annotations

import importlib
import pkgutil

from pt2onnx.plugin import ConverterRegistrar, hookimpl


@hookimpl
def pt2onnx_register_converters(register: ConverterRegistrar) -> None:
    # Every public module of this package is one family of converters.
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            register.module(importlib.import_module(f"{__name__}.{info.name}"))
