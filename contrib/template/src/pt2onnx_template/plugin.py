"""The pt2onnx plugin: exports ``template::scaled_swish`` as standard ONNX ops."""

from __future__ import annotations

from pt2onnx.plugin import CustomOpRegistrar, hookimpl


def scaled_swish(op, x, beta):
    # Parameters mirror the op's schema: ``x`` arrives as an onnx_ir.Value, ``beta`` as a float.
    scaled = op.Mul(x, op.constant(beta, op.dtype_of(x)))
    return op.Mul(x, op.Sigmoid(scaled))


@hookimpl
def pt2onnx_register_custom_ops(register: CustomOpRegistrar) -> None:
    register.expand("template::scaled_swish", scaled_swish)
