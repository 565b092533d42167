"""Modules that call a function: how the aten tests export a single op.

torch.export takes an ``nn.Module``; these wrap a lambda as its ``forward``. The
parameter names (``x``, ``y``, ``z``) are what a test's ``dynamic_shapes`` dict names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


class Unary(torch.nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


class Binary(Unary):
    def forward(self, x, y):
        return self.fn(x, y)


class Ternary(Unary):
    def forward(self, x, y, z):
        return self.fn(x, y, z)


class Variadic(Unary):
    def forward(self, *args):
        return self.fn(*args)
