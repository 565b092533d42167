"""pt2onnx-hops: lowerings of higher-order ops, one module per family."""

from __future__ import annotations

import importlib
import pkgutil

from pt2onnx.plugin import LoweringRegistrar, hookimpl


@hookimpl
def pt2onnx_register_lowerings(register: LoweringRegistrar) -> None:
    # Every public module of this package is one family of lowerings.
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            register.module(importlib.import_module(f"{__name__}.{info.name}"))
