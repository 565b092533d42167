"""scaled_dot_product_attention against eager, in both forms: ONNX Attention at opset 24,
MatMul/Softmax below 23 and where onnxruntime has no Attention kernel (1.32: Attention-25)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from pt2onnx.errors import UnsupportedArgumentError
from pt2onnx.plugin import onnxruntime_has_kernel
from pt2onnx.testing import assert_exports_like_eager, dtypes, tensors

ATOL = {torch.float16: 2e-2, torch.bfloat16: 1e-1}


class Attend(torch.nn.Module):
    def __init__(self, mask, **options):
        super().__init__()
        self.mask = mask
        self.options = options

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, self.mask, **self.options)


def _values(dtype, infinities=True):
    """Draw keywords: NaN, inf, zeros and subnormals around values whose products and sums
    stay finite (where finite terms overflow, the order of the additions decides, and it
    differs between the libraries; float16 scores must fit float16 in onnxruntime's kernel).
    Without ``infinities``, no NaN either: see :func:`attention_cases`."""
    bound = 100 if dtype == torch.float16 else 1e3
    edges = ("nan", "inf", "zero", "subnormal") if infinities else ("zero", "subnormal")
    return {"low": -bound, "high": bound, "edge_values": edges}


def _attention_op(opset, rank, dtype):
    """Whether the export takes ONNX Attention: 4-D float32/float16 inputs, at an opset where
    onnxruntime has a kernel for it."""
    fits = rank == 4 and dtype in (torch.float32, torch.float16)
    return fits and opset >= 23 and onnxruntime_has_kernel("Attention", opset)


@st.composite
def attention_cases(draw):
    dtype = draw(dtypes(("float32", "float16", "float64", "bfloat16")))
    opset = draw(st.sampled_from([14, 24, 28]))
    batch = [draw(st.integers(1, 2)) for _ in range(draw(st.integers(0, 2)))]
    # onnxruntime's Attention gives NaN where a row's scores are -inf from infinite queries
    # or keys, or NaN from a NaN query (torch: zeros, its safe softmax); rows masked out by
    # the mask are zeros in both. The explicit form matches torch there.
    fused = _attention_op(opset, len(batch) + 2, dtype)
    gqa = len(batch) == 2 and draw(st.booleans())
    kv_heads = batch[-1] if batch else 1
    q_heads = kv_heads * (draw(st.integers(1, 3)) if gqa else 1)
    qb = [*batch[:-1], q_heads] if batch else []
    L, S, E, Ev = (draw(st.integers(1, 4)) for _ in range(4))
    # Which rows torch zeroes is its CPU kernel's choice, and that follows the inputs' layout:
    # contiguous ones take its flash kernel (a NaN key's row: zeros), a strided one its math
    # kernel (NaN; seed 444). The explicit form follows the flash kernel, so where queries
    # and keys may hold non-finite values all three inputs are contiguous.
    layout = {} if fused else {"contiguous": True}
    q = draw(tensors((*qb, L, E), dtype, **_values(dtype, infinities=not fused), **layout))
    k = draw(tensors((*batch, S, E), dtype, **_values(dtype, infinities=not fused), **layout))
    # Nor values in onnxruntime's Attention: an infinite one times a weight that is 1e-41 in
    # torch's float32 softmax and 0 in onnxruntime's float16 one is inf against NaN (seed 444).
    v = draw(tensors((*batch, S, Ev), dtype, **_values(dtype, infinities=not fused), **layout))
    kind = draw(st.sampled_from(["none", "bool", "float", "causal"]))
    mask = None
    # Full masks, and masks broadcast over the queries (a padding mask: one row for all).
    mask_shapes = [(L, S), (1, S), (*qb, L, S), (*qb[:-1], *([1] if qb else []), 1, S)]
    if kind == "bool":
        mask = draw(tensors(draw(st.sampled_from(mask_shapes)), torch.bool))
    elif kind == "float":
        mask = draw(tensors(draw(st.sampled_from(mask_shapes)), dtype, **_values(dtype)))
    scale = draw(st.sampled_from([None, 0.3]))
    return q, k, v, mask, dict(is_causal=kind == "causal", scale=scale, enable_gqa=gqa), opset


@given(case=attention_cases())
def test_scaled_dot_product_attention(case):
    q, k, v, mask, options, opset = case
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
    assert used_attention == _attention_op(opset, q.dim(), q.dtype)


def test_attention_dynamic_batch_and_sequence():
    q, k, v = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 6, 4), torch.randn(2, 3, 6, 4)
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq")
    dynamic = ({0: batch, 2: seq}, {0: batch}, {0: batch})
    other = [((torch.randn(3, 3, 2, 4), torch.randn(3, 3, 6, 4), torch.randn(3, 3, 6, 4)), {})]
    for opset in (18, 24):
        assert_exports_like_eager(
            Attend(None, is_causal=True), (q, k, v), dynamic_shapes=dynamic, other_inputs=other, opset=opset
        )


def test_attention_dropout_is_an_error():
    q = torch.randn(1, 2, 3, 4)
    with pytest.raises(UnsupportedArgumentError, match="dropout"):
        assert_exports_like_eager(Attend(None, dropout_p=0.5), (q, q, q))


def test_rows_masked_out_entirely_attend_to_nothing():
    # torch's safe softmax gives zeros where a query's keys are all masked out (not NaN).
    q, k, v = torch.randn(1, 1, 3, 4), torch.randn(1, 1, 2, 4), torch.randn(1, 1, 2, 4)
    ninf = float("-inf")
    for mask in (
        torch.tensor([[True, False], [False, False], [True, True]]),
        torch.tensor([[0, ninf], [ninf, ninf], [0, 1]]),
    ):
        for opset in (18, 24):
            assert_exports_like_eager(Attend(mask), (q, k, v), opset=opset)


@pytest.mark.parametrize("inputs", ["4-D", "3-D", "value size", "batch broadcast"])
@pytest.mark.parametrize("masking", ["none", "causal", "float"])
def test_rows_of_nan_scores_follow_the_kernel_torch_picks(inputs, masking):
    # A NaN query makes its row's scores NaN. torch's CPU flash kernel (4-D inputs of one batch
    # and head size, no attn_mask) gives zeros for such a row, its math kernel NaN.
    q = torch.tensor([[[[math.nan, 1.0], [1.0, 2.0], [0.5, -1.0]]]])
    k = torch.tensor([[[[-math.inf, 1.0], [1.0, 1.0], [2.0, 0.5]]]])
    v = torch.randn(1, 1, 3, 3 if inputs == "value size" else 2)
    if inputs == "3-D":
        q, k, v = q[0], k[0], v[0]
    if inputs == "batch broadcast":
        q = torch.cat([q, q.flip(2)])
    mask = torch.zeros(3, 3) if masking == "float" else None
    assert_exports_like_eager(Attend(mask, is_causal=masking == "causal"), (q, k, v), opset=18)


@pytest.mark.parametrize("rank", [3, 4])
@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_a_key_is_causal_masks_out_follows_the_kernel_torch_picks(rank, value):
    # torch's flash kernel overwrites the positions is_causal masks with -inf (a NaN or inf key
    # there changes nothing); its math kernel adds -inf (NaN for the row).
    q, k, v = torch.randn(1, 1, 2, 2), torch.randn(1, 1, 3, 2), torch.randn(1, 1, 3, 2)
    k[..., 2, 0] = value
    if rank == 3:
        q, k, v = q[0], k[0], v[0]
    assert_exports_like_eager(Attend(None, is_causal=True), (q, k, v), opset=18)
