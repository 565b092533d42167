"""Custom op, way 3 (decompose): a Python decomposition into aten ops.

pt2onnx re-traces the program with the decomposition, and the aten converters
translate what it produced.

Run: python docs/examples/custom_op_decompose.py
"""

from __future__ import annotations

import sys

import torch

import pt2onnx
from pt2onnx.plugin import hookimpl


@torch.library.custom_op("docs_decompose::rms_scale", mutates_args=())
def rms_scale(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


@rms_scale.register_fake
def _(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.empty_like(x)


def rms_scale_decomposition(x, weight, eps):
    # Plain torch code over the op's arguments, traced into aten ops.
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


@hookimpl
def pt2onnx_register_custom_ops(register):
    register.decompose("docs_decompose::rms_scale", rms_scale_decomposition)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(8) + 0.5)

    def forward(self, x):
        return rms_scale(x, self.weight, 1e-6)


if __name__ == "__main__":
    x = torch.randn(3, 8)
    result = pt2onnx.export(Model(), (x,), plugins=[sys.modules[__name__]])
    print(result.report.decompose_reason)
    print([n.op_type for n in result.model_proto.graph.node])
    check = result.verify(x)
    print(check)
    assert check.ok
