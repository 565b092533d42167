"""``wrap_with_set_grad_enabled`` / ``wrap_with_autocast`` -> inlined."""

from __future__ import annotations

import torch

from pt2onnx.testing import assert_exports_like_eager


class NoGradInside(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        with torch.no_grad():
            y = self.lin(x) * 2
        return y + 1


class AutocastInside(torch.nn.Module):
    def forward(self, x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            z = x @ y
        return z.float() + 1


def test_set_grad_enabled_is_inlined():
    torch.set_grad_enabled(True)
    result = assert_exports_like_eager(
        NoGradInside().train(False), (torch.randn(2, 4),), expect_ops=["higher_order::wrap_with_set_grad_enabled"]
    )
    assert not any(n.op_type in {"If", "Loop", "Scan"} for n in result.model.graph)


def test_autocast_is_inlined():
    assert_exports_like_eager(
        AutocastInside(),
        (torch.randn(2, 4), torch.randn(4, 3)),
        expect_ops=["higher_order::wrap_with_autocast"],
        atol=5e-2,
        rtol=2e-2,
    )
