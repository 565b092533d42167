"""torch.histc against eager PyTorch through onnxruntime: bins, explicit and data ranges, edge values."""

from __future__ import annotations

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from pt2onnx.testing import FLOAT_DTYPES, assert_exports_like_eager, dtypes, shapes, tensors


def _accepted(x, bins):
    """Whether torch bins ``x`` by a defined rule: it raises for a range it cannot widen, and in
    half precision a span that overflows the dtype divides inf by inf (no defined bin)."""
    try:
        torch.histc(x, bins)
    except RuntimeError:
        return False
    return x.dtype not in (torch.float16, torch.bfloat16) or bool(torch.isfinite(x.amax() - x.amin()))


@given(
    x=tensors(shapes(max_rank=3, min_side=0, max_side=6), dtypes(FLOAT_DTYPES)),
    bins=st.integers(1, 12),
    low=st.floats(-4, 4, width=16),
    width=st.floats(0.125, 8, width=16),
)
def test_histc_explicit_range(x, bins, low, width):
    # NaN, inf and values outside [low, low + width] are skipped; the last bin takes its right edge.
    high = low + width
    assert_exports_like_eager(lambda t: torch.histc(t, bins, low, high), (x,), expect_ops={"aten::histc": "aten"})


@given(
    x=tensors(
        shapes(min_rank=1, max_rank=3, max_side=6), dtypes(FLOAT_DTYPES), edge_values=("zero", "subnormal", "extreme")
    ),
    bins=st.integers(1, 12),
)
def test_histc_data_range(x, bins):
    # min == max bins over the data's own range; torch refuses a range that is not finite, or
    # that its widening by 1 leaves empty (half precision above 2048).
    assume(_accepted(x, bins))
    # torch counts a bfloat16 histogram in bfloat16, one by one: past 256 a count stops
    # growing (256 + 1 rounds to 256). The model's counts are exact, so draws stay below that.
    assume(x.dtype != torch.bfloat16 or x.numel() <= 256)
    assert_exports_like_eager(lambda t: torch.histc(t, bins), (x,), expect_ops={"aten::histc": "aten"})


@pytest.mark.parametrize(
    "value, dtype",
    [
        (2.5, torch.float32),
        (2.0**24, torch.float32),
        (7.9975e37, torch.float32),
        (-(2.0**60), torch.float64),
        (2048.0, torch.float16),
        (torch.finfo(torch.float32).max, torch.float32),
        (-torch.finfo(torch.float64).max, torch.float64),
    ],
)
def test_histc_of_equal_values_widens_the_range_as_torch_does(value, dtype):
    # By 1, or to the next float where 1 is less than its gap (by 1 in half precision); never
    # past the dtype's largest float.
    x = torch.full((5,), value, dtype=dtype)
    for bins in (1, 3, 4):
        assert_exports_like_eager(lambda t, b=bins: torch.histc(t, b, 7, 7), (x,), expect_ops=["aten::histc"])


def test_histc_over_a_span_beyond_float32_counts_nothing_as_torch_does():
    x = torch.tensor([3.4e38, -3.4e38, 1.0])
    assert_exports_like_eager(lambda t: torch.histc(t, 3), (x,), expect_ops=["aten::histc"])
