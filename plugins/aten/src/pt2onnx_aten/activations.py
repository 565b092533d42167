"""Activation functions.

Where onnxruntime has the fused op only in float32/float16, other dtypes get the same
formula from primitives (float64) or compute in float32 (bfloat16).
"""

from __future__ import annotations

import math

from pt2onnx.plugin import converter

from ._common import FLOAT32_16, FLOATS, NUMBERS, D, as_dtype, compute, kernel_dtype

_RELU = FLOATS | {D.INT8, D.INT32}
_MAX = FLOATS | {D.INT8, D.INT32, D.INT64, D.UINT8}


@converter("aten::relu.default")
def relu(op, self):
    if op.output_dtype in _RELU | {D.BFLOAT16}:
        return compute(op, op.Relu, [self], op.output_dtype, _RELU)
    # int16, int64, uint8: no Relu kernel in onnxruntime.
    return compute(op, lambda x: op.Max(x, op.constant(0, x.dtype)), [self], op.output_dtype, _MAX)


@converter("aten::relu6.default")
def relu6(op, self):
    return hardtanh(op, self, 0.0, 6.0)


@converter("aten::hardtanh.default")
def hardtanh(op, self, min_val=-1.0, max_val=1.0):
    def clip(x):
        return op.Clip(x, as_dtype(op, min_val, x.dtype), as_dtype(op, max_val, x.dtype))

    # onnxruntime's Clip has no int16 kernel: int16 clips in int32.
    return compute(op, clip, [self], op.output_dtype, NUMBERS - {D.INT16})


@converter("aten::leaky_relu.default")
def leaky_relu(op, self, negative_slope=0.01):
    if kernel_dtype(op, op.output_dtype, FLOATS) in FLOAT32_16:
        return compute(op, lambda x: op.LeakyRelu(x, alpha=float(negative_slope)), [self], op.output_dtype, FLOATS)
    return op.Where(op.Greater(self, 0.0), self, op.Mul(self, negative_slope))


@converter("aten::elu.default")
def elu(op, self, alpha=1.0, scale=1.0, input_scale=1.0):
    def elu_(x):
        # torch: scale * (x if x > 0 else alpha * (exp(x * input_scale) - 1))
        negative = op.Mul(op.Sub(op.Exp(op.Mul(x, float(input_scale))), 1.0), float(alpha))
        return op.Mul(op.Where(op.Greater(x, 0.0), x, negative), float(scale))

    return compute(op, elu_, [self], op.output_dtype, FLOATS)


@converter("aten::gelu.default", until=19)
def gelu_before_20(op, self, *, approximate="none"):
    """GELU as its formula: ONNX has ``Gelu`` from opset 20."""
    if approximate not in ("none", "tanh"):
        raise op.unsupported("approximate", approximate, "torch knows 'none' and 'tanh'")
    if approximate == "tanh":

        def gelu_(x):
            # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
            inner = op.Mul(op.Add(x, op.Mul(op.Mul(op.Mul(x, x), x), 0.044715)), math.sqrt(2 / math.pi))
            return op.Mul(op.Mul(x, 0.5), op.Add(op.Tanh(inner), 1.0))

        return compute(op, gelu_, [self], op.output_dtype, FLOATS)

    def gelu_erf(x):
        return op.Mul(op.Mul(x, 0.5), op.Add(op.Erf(op.Mul(x, math.sqrt(0.5))), 1.0))

    return compute(op, gelu_erf, [self], op.output_dtype, FLOAT32_16)


@converter("aten::gelu.default", since=20)
def gelu(op, self, *, approximate="none"):
    """The exact GELU as one ``Gelu`` (opset 20). The tanh approximation stays its
    formula here, as below 20: the rewrite ``fuse_gelu_tanh`` (pt2onnx-fusions) makes it
    one ``Gelu(approximate="tanh")``, as it does for the formula a model writes by hand."""
    if approximate != "none":
        return gelu_before_20(op, self, approximate=approximate)
    return compute(op, op.Gelu, [self], op.output_dtype, FLOAT32_16)


@converter("aten::silu.default")
def silu(op, self):
    return compute(op, lambda x: op.Mul(x, op.Sigmoid(x)), [self], op.output_dtype, FLOATS)


@converter("aten::hardsigmoid.default")
def hardsigmoid(op, self):
    return compute(
        op,
        lambda x: op.Clip(op.Add(op.Div(x, 6.0), 0.5), op.constant(0.0, x.dtype), op.constant(1.0, x.dtype)),
        [self],
        op.output_dtype,
        FLOATS,
    )


@converter("aten::hardswish.default")
def hardswish(op, self):
    def hardswish_(x):
        return op.Div(op.Mul(x, op.Clip(op.Add(x, 3.0), op.constant(0.0, x.dtype), op.constant(6.0, x.dtype))), 6.0)

    return compute(op, hardswish_, [self], op.output_dtype, FLOATS)


def _softplus(op, x, beta=1.0, threshold=20.0):
    # torch: x where beta * x > threshold (linear there), else log(1 + exp(beta * x)) / beta
    scaled = op.Mul(x, float(beta))
    smooth = op.Div(op.Log(op.Add(op.Exp(scaled), 1.0)), float(beta))
    return op.Where(op.Greater(scaled, float(threshold)), x, smooth)


@converter("aten::softplus.default")
def softplus(op, self, beta=1.0, threshold=20.0):
    return compute(op, lambda x: _softplus(op, x, beta, threshold), [self], op.output_dtype, FLOATS)


@converter("aten::mish.default")
def mish(op, self):
    return compute(op, lambda x: op.Mul(x, op.Tanh(_softplus(op, x))), [self], op.output_dtype, FLOATS)
