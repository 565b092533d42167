"""Installed pack whose registration fails half-way: skipped whole, with a warning."""

from pt2onnx.plugin import hookimpl


def relu(op, self):
    return op.Max(self, op.constant(0.0, op.output_dtype))


@hookimpl
def pt2onnx_register_converters(register):
    register.converter("aten::relu.default", relu)  # dropped with the rest when the next line fails
    register.converter("not an op name", relu)
