"""An installed pack for aten::relu that says override=True: wins over p2o_relu_pack in the same layer."""

import sys

from pt2onnx.plugin import converter, hookimpl


@converter("aten::relu", override=True)
def relu(op, self):
    return op.Relu(self)


@hookimpl
def pt2onnx_register_converters(register):
    register.module(sys.modules[__name__])
