"""Custom op, way 1 (expand): the handler emits standard ONNX ops with the op builder.

Run: python docs/examples/custom_op_expand.py
"""

from __future__ import annotations

import sys

import torch

import pt2onnx
from pt2onnx.plugin import hookimpl


# The op, defined with torch.library (its fake implementation tells torch.export its output).
@torch.library.custom_op("docs_expand::hard_swish_scaled", mutates_args=())
def hard_swish_scaled(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.nn.functional.hardswish(x) * scale


@hard_swish_scaled.register_fake
def _(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.empty_like(x)


# The handler: parameters as in the op's schema; tensors arrive as onnx_ir Values.
def hard_swish_scaled_onnx(op, x, scale):
    return op.Mul(op.HardSwish(x), op.constant(scale, op.dtype_of(x)))


# The plugin: this module itself, with one hook (a pack would add an entry point instead).
@hookimpl
def pt2onnx_register_custom_ops(register):
    register.expand("docs_expand::hard_swish_scaled", hard_swish_scaled_onnx)


class Model(torch.nn.Module):
    def forward(self, x):
        return hard_swish_scaled(x, 0.5) + 1


if __name__ == "__main__":
    x = torch.randn(2, 16)
    result = pt2onnx.export(Model(), (x,), plugins=[sys.modules[__name__]])
    print([n.op_type for n in result.model_proto.graph.node])
    check = result.verify(x)
    print(check)
    assert check.ok
