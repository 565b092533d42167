"""Installed-layer pack: converts aten::relu as Max(x, 0), so tests can see who won."""

import sys

from pt2onnx.plugin import converter, hookimpl


@converter("aten::relu")
def relu(op, self):
    return op.Max(self, op.constant(0.0, op.output_dtype))


@hookimpl
def pt2onnx_register_converters(register):
    register.module(sys.modules[__name__])
