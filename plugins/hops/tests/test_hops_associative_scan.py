"""``associative_scan``: where ONNX can express it.

``combine_mode="generic"`` is traced by torch into slices and ``vmap`` batching markers,
which capture resolves by re-tracing; the result is plain ONNX ops (no loop needed).
``combine_mode="pointwise"`` needs CUDA/XPU tensors in torch itself, so it cannot be
captured on CPU: pt2onnx reports torch's error clearly. torch specializes the scanned
length (a dynamic length raises in torch.export), so other sizes need another export.
"""

from __future__ import annotations

import pytest
import torch
from torch._higher_order_ops.associative_scan import associative_scan

import pt2onnx
from pt2onnx.errors import CaptureError
from pt2onnx.testing import assert_exports_like_eager

MODES = pytest.mark.parametrize("strict", [False, True], ids=["nonstrict", "strict"])


class CumulativeMax(torch.nn.Module):
    def __init__(self, dim: int, reverse: bool) -> None:
        super().__init__()
        self.dim, self.reverse = dim, reverse

    def forward(self, x):
        return associative_scan(torch.maximum, x, dim=self.dim, reverse=self.reverse, combine_mode="generic")


class CumulativeSum(torch.nn.Module):
    def forward(self, x):
        return associative_scan(lambda a, b: a + b, x, dim=0, combine_mode="generic")


@MODES
@pytest.mark.parametrize("dim, reverse, length", [(0, False, 5), (1, True, 4)])
def test_generic_associative_scan(strict, dim, reverse, length):
    shape = (length, 3) if dim == 0 else (2, length)
    result = assert_exports_like_eager(CumulativeMax(dim, reverse), (torch.randn(shape),), strict=strict)
    assert "vmap applied by re-tracing" in result.report.capture


def test_generic_associative_scan_sum():
    assert_exports_like_eager(CumulativeSum(), (torch.randn(6, 2),))


def test_pointwise_mode_on_cpu_is_a_clear_error():
    class Pointwise(torch.nn.Module):
        def forward(self, x):
            return associative_scan(lambda a, b: a + b, x, dim=0, combine_mode="pointwise")

    with pytest.raises(CaptureError, match="CUDA or XPU"):
        pt2onnx.export(Pointwise(), (torch.randn(4, 3),), fallback=False)
