"""Override a builtin lowering in your project, both ways.

Run from this directory: python export_model.py
"""

from __future__ import annotations

import gelu_tanh
import torch

import pt2onnx


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.nn.functional.gelu(self.linear(x))


def converted_by(result):
    [usage] = [u for u in result.report.ops if u.op.startswith("aten::gelu")]
    return f"{usage.op} converted by {usage.plugin} [{usage.layer}], shadowing {', '.join(usage.shadowed) or '-'}"


x = torch.randn(4, 8)

# 1. [tool.pt2onnx] plugins in ./pyproject.toml: every export run from this project uses it.
result = pt2onnx.export(Model(), (x,))
print("pyproject.toml:", converted_by(result))
assert result.verify(x, _atol=2e-3).ok

# 2. plugins= at the call: the highest layer, for one export, from anywhere.
result = pt2onnx.export(Model(), (x,), plugins=[gelu_tanh])
print("plugins=:", converted_by(result))
assert result.verify(x, _atol=2e-3).ok

# Blocking it brings the builtin lowering back.
result = pt2onnx.export(Model(), (x,), disable=["gelu_tanh"])
print("disabled:", converted_by(result))
assert result.verify(x).ok
