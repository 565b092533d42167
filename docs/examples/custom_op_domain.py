"""Custom op, way 2 (custom domain): one node in a domain of your choosing.

Here the domain is onnxruntime's ``com.microsoft``: the op becomes its contrib op
``BiasGelu`` (``gelu(x + bias)``), so onnxruntime runs the model as is. Your own domain
works the same way; onnxruntime then needs your custom-op library
(``SessionOptions.register_custom_ops_library(path)``).

Run: python docs/examples/custom_op_domain.py
"""

from __future__ import annotations

import sys

import torch

import pt2onnx
from pt2onnx.plugin import hookimpl

# The op, defined with Library.define + register_fake (the older torch.library API).
_lib = torch.library.Library("docs_domain", "DEF")
_lib.define("bias_gelu(Tensor x, Tensor bias) -> Tensor")
_lib.impl("bias_gelu", lambda x, bias: torch.nn.functional.gelu(x + bias), "CompositeExplicitAutograd")
torch.library.register_fake("docs_domain::bias_gelu", lambda x, bias: torch.empty_like(x), lib=_lib)


@hookimpl
def pt2onnx_register_custom_ops(register):
    # Tensor arguments become the node's inputs in schema order; its output gets
    # torch's dtype and shape. Non-tensor arguments would go through attributes=.
    register.custom_domain("docs_domain::bias_gelu", domain="com.microsoft", op_type="BiasGelu", version=1)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(16, 32, bias=False)
        self.bias = torch.nn.Parameter(torch.randn(32))

    def forward(self, x):
        return torch.ops.docs_domain.bias_gelu(self.linear(x), self.bias)


if __name__ == "__main__":
    x = torch.randn(4, 16)
    result = pt2onnx.export(Model(), (x,), plugins=[sys.modules[__name__]])
    print([f"{n.domain or 'ai.onnx'}::{n.op_type}" for n in result.model_proto.graph.node])
    check = result.verify(x)
    print(check)
    assert check.ok
