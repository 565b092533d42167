"""A second installed pack for aten::relu, without override: conflicts with p2o_relu_pack."""

from pt2onnx.plugin import hookimpl


def relu(op, self):
    return op.Relu(self)


@hookimpl
def pt2onnx_register_converters(register):
    register.converter("aten::relu.default", relu)
