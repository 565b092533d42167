"""A project-local plugin: exports every ``gelu`` as ONNX ``Gelu(approximate="tanh")``.

It replaces the builtin lowering for this project only (the project layer wins over
installed and builtin packs). The tanh approximation differs from exact gelu by < 1e-3.
"""

from __future__ import annotations

import sys

from pt2onnx.plugin import converter, hookimpl


@converter("aten::gelu.default")
def gelu(op, self, *, approximate="none"):
    if op.opset < 20:
        raise op.unsupported("approximate", approximate, "ONNX Gelu needs opset 20")
    return op.Gelu(self, approximate="tanh")


@hookimpl
def pt2onnx_register_converters(register):
    register.module(sys.modules[__name__])
