"""scaled_dot_product_attention against eager, in both forms (ONNX Attention at opset 26, MatMul/Softmax at 18)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from pt2onnx.errors import UnsupportedArgumentError
from pt2onnx.testing import assert_exports_like_eager, dtypes, tensors

ATOL = {torch.float16: 2e-2, torch.bfloat16: 1e-1}


class Attend(torch.nn.Module):
    def __init__(self, mask, **options):
        super().__init__()
        self.mask = mask
        self.options = options

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, self.mask, **self.options)


@st.composite
def attention_cases(draw):
    dtype = draw(dtypes(("float32", "float16", "float64", "bfloat16")))
    batch = [draw(st.integers(1, 2)) for _ in range(draw(st.integers(0, 2)))]
    gqa = len(batch) == 2 and draw(st.booleans())
    kv_heads = batch[-1] if batch else 1
    q_heads = kv_heads * (draw(st.integers(1, 3)) if gqa else 1)
    qb = [*batch[:-1], q_heads] if batch else []
    L, S, E, Ev = (draw(st.integers(1, 4)) for _ in range(4))
    q = draw(tensors((*qb, L, E), dtype))
    k = draw(tensors((*batch, S, E), dtype))
    v = draw(tensors((*batch, S, Ev), dtype))
    kind = draw(st.sampled_from(["none", "bool", "float", "causal"]))
    mask = None
    # Full masks, and masks broadcast over the queries (a padding mask: one row for all).
    mask_shapes = [(L, S), (1, S), (*qb, L, S), (*qb[:-1], *([1] if qb else []), 1, S)]
    if kind == "bool":
        mask = draw(tensors(draw(st.sampled_from(mask_shapes)), torch.bool))
        mask[..., 0] = True  # every query keeps a key: torch and ONNX differ on rows masked out entirely
    elif kind == "float":
        mask = draw(tensors(draw(st.sampled_from(mask_shapes)), dtype))
    scale = draw(st.sampled_from([None, 0.3]))
    return q, k, v, mask, dict(is_causal=kind == "causal", scale=scale, enable_gqa=gqa)


@given(case=attention_cases(), opset=st.sampled_from([18, 26]))
def test_scaled_dot_product_attention(case, opset):
    q, k, v, mask, options = case
    atol = rtol = ATOL.get(q.dtype)
    if q.dtype == torch.float64 and options["scale"] is not None:
        atol, rtol = 1e-6, 1e-5  # torch's CPU kernel rounds an explicit scale to float32
    result = assert_exports_like_eager(
        Attend(mask, **options),
        (q, k, v),
        opset=opset,
        atol=atol,
        rtol=rtol,
        expect_ops=["aten::scaled_dot_product_attention"],
    )
    used_attention = any(n.op_type == "Attention" for n in result.model.graph)
    assert used_attention == (opset >= 23 and q.dim() == 4 and q.dtype in (torch.float32, torch.float16))


def test_attention_dynamic_batch_and_sequence():
    q, k, v = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 6, 4), torch.randn(2, 3, 6, 4)
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq")
    dynamic = ({0: batch, 2: seq}, {0: batch}, {0: batch})
    other = [((torch.randn(3, 3, 2, 4), torch.randn(3, 3, 6, 4), torch.randn(3, 3, 6, 4)), {})]
    for opset in (18, 26):
        assert_exports_like_eager(
            Attend(None, is_causal=True), (q, k, v), dynamic_shapes=dynamic, other_inputs=other, opset=opset
        )


def test_attention_dropout_is_an_error():
    q = torch.randn(1, 2, 3, 4)
    with pytest.raises(UnsupportedArgumentError, match="dropout"):
        assert_exports_like_eager(Attend(None, dropout_p=0.5), (q, q, q))
