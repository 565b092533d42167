"""``map`` (``map_impl``, as in ExportDB's ``dynamic_shape_map``) -> ``Scan`` without state."""

from __future__ import annotations

import pytest
import torch
from torch._higher_order_ops.map import map as hop_map

from pt2onnx.testing import assert_exports_like_eager

N = torch.export.Dim("n", min=2, max=64)
MODES = pytest.mark.parametrize("strict", [False, True], ids=["nonstrict", "strict"])


class MapTwoOutputs(torch.nn.Module):
    def forward(self, xs, y):
        def body(x, y):
            return x + y, x * y

        return hop_map(body, xs, y)


@MODES
def test_map_dynamic_length(strict):
    xs, y = torch.randn(4, 3), torch.randn(3)
    assert_exports_like_eager(
        MapTwoOutputs(),
        (xs, y),
        strict=strict,
        dynamic_shapes={"xs": {0: N}, "y": None},
        expect_ops=["higher_order::map_impl"],
        other_inputs=[((torch.randn(7, 3), y), {})],
    )
