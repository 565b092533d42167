"""``gelu`` with the tanh approximation as one ``com.microsoft::FastGelu`` node.

The builtin standard-op graph for it is eight elementwise nodes (Mul, Add, Tanh, ...);
FastGelu is one vectorized kernel. Being installed, this converter shadows the builtin
one for every ``gelu``, so it also emits the standard graph where FastGelu does not apply.
"""

from __future__ import annotations

import math

import torch

from pt2onnx.plugin import converter

from ._runtime import DOMAIN

PROBE = ("FastGelu", ((2, 8),), ())


@converter("aten::gelu.default")
def gelu(op, self, *, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise op.unsupported("approximate", approximate, "torch knows 'none' and 'tanh'")
    val = op.node.args[0].meta["val"]
    if val.dtype == torch.float64:
        if approximate == "none":
            raise op.unsupported("self", val.dtype, "onnxruntime has no float64 kernel for exact gelu (Erf)")
        return _gelu_tanh_formula(op, self)
    # bfloat16 runs in float32, as onnxruntime has no bfloat16 kernels for these.
    x = self if val.dtype in (torch.float32, torch.float16) else op.Cast(self, to=op.dtype(torch.float32))
    if approximate == "tanh":
        # FastGelu takes tensors of rank >= 1.
        y = op.custom_node(DOMAIN, "FastGelu", [x], num_outputs=1) if val.dim() else _gelu_tanh_formula(op, x)
    elif op.opset >= 20:
        y = op.Gelu(x)
    else:
        y = op.Mul(op.Mul(x, 0.5), op.Add(op.Erf(op.Mul(x, math.sqrt(0.5))), 1.0))
    return y if x is self else op.Cast(y, to=op.dtype(val.dtype))


def _gelu_tanh_formula(op, x):
    # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    inner = op.Mul(op.Add(x, op.Mul(op.Mul(op.Mul(x, x), x), 0.044715)), math.sqrt(2 / math.pi))
    return op.Mul(op.Mul(x, 0.5), op.Add(op.Tanh(inner), 1.0))
