"""The custom op, as a user's library defines it with ``torch.library``.

``template::scaled_swish(x, beta) = x * sigmoid(beta * x)``. In a real project this
module belongs to your own library; the plugin names the op by string and never
imports it.
"""

from __future__ import annotations

import torch


@torch.library.custom_op("template::scaled_swish", mutates_args=())
def scaled_swish(x: torch.Tensor, beta: float) -> torch.Tensor:
    """``x * sigmoid(beta * x)``."""
    return x * torch.sigmoid(beta * x)


@scaled_swish.register_fake
def _(x: torch.Tensor, beta: float) -> torch.Tensor:
    # What torch.export needs to trace the op: its output's dtype and shape.
    return torch.empty_like(x)
