"""``nn.MultiheadAttention`` (batch first) as one batch-first ``Attention``; numerics as eager."""

from __future__ import annotations

import collections

import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.export import Dim

from pt2onnx.testing import assert_exports_like_eager

DYNAMIC = {"x": {0: Dim("batch", max=64), 1: Dim("seq", max=256)}}


class SelfAttention(torch.nn.Module):
    def __init__(self, embed: int, heads: int, bias: bool, batch_first: bool = True) -> None:
        super().__init__()
        self.attention = torch.nn.MultiheadAttention(embed, heads, bias=bias, batch_first=batch_first)
        if bias:  # torch initializes the biases to zero: make them count
            torch.nn.init.normal_(self.attention.in_proj_bias)
            torch.nn.init.normal_(self.attention.out_proj.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attention(x, x, x, need_weights=False)[0]


def _ops(result) -> collections.Counter[str]:
    return collections.Counter(n.op_type for n in result.model.graph.all_nodes())


@given(st.sampled_from([1, 2, 4]), st.sampled_from([8, 16]), st.booleans(), st.integers(2, 3), st.integers(2, 6))
def test_multi_head_attention_is_one_batch_first_attention(heads, size, bias, batch, seq):
    torch.manual_seed(heads * size)
    model = SelfAttention(heads * size, heads, bias)
    x, other = torch.randn(batch, seq, heads * size), torch.randn(batch + 1, seq + 2, heads * size)
    result = assert_exports_like_eager(model, (x,), other_inputs=[((other,), {})], dynamic_shapes=DYNAMIC)
    ops = _ops(result)
    assert ops["Transpose"] == 0 and ops["Reshape"] == 0 and ops["Gemm"] == 0, ops
    assert ops["Split"] == 1 and ops["Attention"] == 1 and ops["MatMul"] == 2, ops
    attention = next(n for n in result.model.graph if n.op_type == "Attention")
    assert attention.attributes["q_num_heads"].value == heads


def test_a_transformer_encoder_layer_keeps_only_its_real_work():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    for block in model.layers:  # torch zeroes these biases, and a zero bias is dropped: make them count
        torch.nn.init.normal_(block.self_attn.out_proj.bias)
    x = torch.randn(2, 5, 32)
    result = assert_exports_like_eager(
        model, (x,), other_inputs=[((torch.randn(3, 7, 32),), {})], dynamic_shapes={"src": DYNAMIC["x"]}
    )
    ops = _ops(result)
    assert ops["Attention"] == 2 and ops["Transpose"] == 0, ops
    # Per layer: attention (MatMul, Add, Split, Attention, MatMul, Add), two residual Adds,
    # two LayerNorms, the feed-forward (MatMul, Add, Relu, MatMul, Add).
    assert sum(ops.values()) == 2 * 15, ops


def test_a_sequence_first_module_gains_a_transpose_at_each_end():
    torch.manual_seed(1)
    model = SelfAttention(16, 2, bias=True, batch_first=False)
    dynamic = {"x": {0: Dim("seq", max=256), 1: Dim("batch", max=64)}}
    result = assert_exports_like_eager(
        model, (torch.randn(5, 2, 16),), other_inputs=[((torch.randn(3, 4, 16),), {})], dynamic_shapes=dynamic
    )
    ops = _ops(result)
    assert ops["Transpose"] == 2 and ops["Attention"] == 1 and ops["Reshape"] == 0 and ops["Gemm"] == 0, ops


def test_switched_off_the_layout_stays_and_numerics_hold():
    model = SelfAttention(16, 2, bias=True)
    result = assert_exports_like_eager(
        model, (torch.randn(2, 4, 16),), dynamic_shapes=DYNAMIC, optimize={"fuse_packed_attention": False}
    )
    assert _ops(result)["Transpose"] > 0
