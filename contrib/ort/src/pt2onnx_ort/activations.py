"""``gelu`` with the tanh approximation as one ``com.microsoft::FastGelu`` node, below opset 20.

Below opset 20 the builtin standard-op graph for it is eight elementwise nodes (Mul, Add,
Tanh, ...), and FastGelu, one vectorized kernel, runs it x2.4 faster; from opset 20 the
builtin export is one ONNX ``Gelu``, as fast as FastGelu (x1.00,
``benchmarks/results/ort_fusions.md``), so the converter serves opsets up to 19 only and
the builtin one, portable, serves the newer ones. Where FastGelu does not apply (exact
gelu, float64, 0-d tensors) it declines, and the builtin converter takes the node.
"""

from __future__ import annotations

import torch

from pt2onnx.plugin import converter

from ._runtime import DOMAIN

PROBE = ("FastGelu", ((2, 8),), ())


@converter("aten::gelu.default", until=19)
def gelu(op, self, *, approximate="none"):
    val = op.node.args[0].meta["val"]
    if approximate != "tanh":
        raise op.decline("FastGelu is the tanh approximation")
    if val.dtype == torch.float64 or not val.dim():
        raise op.decline("FastGelu takes float32, float16 and bfloat16 tensors of rank 1 or more")
    # bfloat16 runs in float32, as onnxruntime has no bfloat16 kernel for it.
    x = self if val.dtype in (torch.float32, torch.float16) else op.Cast(self, to=op.dtype(torch.float32))
    y = op.custom_node(DOMAIN, "FastGelu", [x], num_outputs=1)
    return y if x is self else op.Cast(y, to=op.dtype(val.dtype))
