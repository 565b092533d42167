"""fuse_rms_norm: the RMS norm transformers write by hand becomes one RMSNormalization, numerics unchanged."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import pt2onnx
from pt2onnx.testing import assert_exports_like_eager, tensors

_DIMS = {"x": {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq")}}
# Values whose squares stay finite (the fused op and the formula then agree), with NaN,
# inf, zeros and subnormals.
_DRAW = {"low": -10, "high": 10, "edge_values": ("nan", "inf", "zero", "subnormal")}


class HandWrittenRMSNorm(torch.nn.Module):
    """transformers' LlamaRMSNorm: statistics in float32, the weight applied in the input dtype."""

    def __init__(self, width: int, eps: float, dtype: torch.dtype, upcast: bool) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(width, dtype=dtype) + 0.5)
        self.eps, self.upcast = eps, upcast

    def forward(self, x):
        dtype = x.dtype
        h = x.to(torch.float32) if self.upcast else x
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(dtype)


def _removed(result):
    return {p.name: p.removed for p in result.report.passes}.get("fuse_rms_norm")


@given(
    data=st.data(),
    dtype=st.sampled_from([torch.float32, torch.bfloat16]),
    upcast=st.booleans(),
    eps=st.sampled_from([1e-6, 1e-5]),
    width=st.integers(2, 8),
)
def test_hand_written_rms_norm_becomes_one_rms_normalization(data, dtype, upcast, eps, width):
    x = data.draw(tensors((2, 3, width), dtype, **_DRAW))
    other = data.draw(tensors((3, 5, width), dtype, **_DRAW))
    module = HandWrittenRMSNorm(width, eps, dtype, upcast)
    result = assert_exports_like_eager(module, (x,), dynamic_shapes=_DIMS, other_inputs=[((other,), {})])
    ops = [n.op_type for n in result.model.graph]
    # The pattern is fused where it runs in float32 and the weight multiplies it directly
    # (a bfloat16 model's cast back before the weight is not part of the pattern).
    fused = dtype == torch.float32
    assert ops.count("RMSNormalization") == (1 if fused else 0), ops
    assert (_removed(result) >= 5) == fused


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_other_dtypes_stay_unfused(dtype):
    # onnxruntime has no bfloat16 RMSNormalization; float16 squares overflow above 256 in torch
    # (not in RMSNormalization's float32); float64 would lose precision in it.
    module = HandWrittenRMSNorm(8, 1e-6, dtype, upcast=False)
    x = torch.randn(2, 3, 8, dtype=dtype) * 5
    result = assert_exports_like_eager(module, (x,))
    assert "RMSNormalization" not in [n.op_type for n in result.model.graph] and _removed(result) == 0


def test_below_opset_23_stays_unfused():
    module = HandWrittenRMSNorm(8, 1e-6, torch.float32, upcast=False)
    result = pt2onnx.export(module, (torch.randn(2, 3, 8),), opset=22)
    assert "RMSNormalization" not in [n.op_type for n in result.model.graph]
    assert result.verify(torch.randn(2, 3, 8)).ok
