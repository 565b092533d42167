"""pt2onnx-hops: lowerings of higher-order ops, one module per family."""

from __future__ import annotations

from pt2onnx.plugin import LoweringRegistrar, hookimpl

from . import wrappers

FAMILIES = (wrappers,)


@hookimpl
def pt2onnx_register_lowerings(register: LoweringRegistrar) -> None:
    for family in FAMILIES:
        register.module(family)
