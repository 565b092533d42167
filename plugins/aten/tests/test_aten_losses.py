"""Loss functions against eager: soft_margin_loss in every float dtype and reduction."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from lambda_modules import Binary as Fn2
from pt2onnx.testing import assert_exports_like_eager, shapes, tensors

FLOAT_DTYPES = st.sampled_from([torch.float32, torch.float64, torch.float16, torch.bfloat16])


@given(
    data=st.data(),
    dtype=FLOAT_DTYPES,
    shape=shapes(max_rank=3, min_side=0),
    reduction=st.sampled_from(["none", "mean", "sum"]),
)
def test_soft_margin_loss(data, dtype, shape, reduction):
    # Products beyond ±11 (float16) overflow exp to inf in torch's half kernel: wide values on purpose.
    x = data.draw(tensors(shape, dtype, low=-20, high=20))
    y = data.draw(tensors(shape, dtype, low=-3, high=3))
    model = Fn2(lambda a, b: F.soft_margin_loss(a, b, reduction=reduction))
    assert_exports_like_eager(model, (x, y), expect_ops=["aten::soft_margin_loss"])


def test_soft_margin_loss_of_float16_overflows_as_torchs_kernel_does():
    # Thorough OpInfo: exp(30.6) is inf in float16, so the mean is inf in torch; torch's
    # decomposition computes in float32 and gave 7.64.
    x = torch.tensor([-8.4765625, -1.765625, -4.32421875], dtype=torch.float16)
    y = torch.tensor([3.611328125, -8.0703125, -0.57373046875], dtype=torch.float16)
    model = Fn2(lambda a, b: F.soft_margin_loss(a, b))
    assert_exports_like_eager(model, (x, y), expect_ops=["aten::soft_margin_loss"])
