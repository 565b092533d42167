"""pt2onnx-aten: the builtin converters of aten ops, one module per op family."""

from __future__ import annotations

from pt2onnx.plugin import ConverterRegistrar, hookimpl

from . import conv, elementwise, linear, norm, pooling, python_ops, shape, special

FAMILIES = (conv, elementwise, linear, norm, pooling, python_ops, shape, special)


@hookimpl
def pt2onnx_register_converters(register: ConverterRegistrar) -> None:
    for family in FAMILIES:
        register.module(family)
