"""Installed pack with a typo in a hook name: skipped with a warning, never a failed export."""

from pt2onnx.plugin import hookimpl


def relu(op, self):
    return op.Relu(self)


@hookimpl
def pt2onnx_register_convertors(register):  # misspelled on purpose
    register.converter("aten::relu.default", relu)
