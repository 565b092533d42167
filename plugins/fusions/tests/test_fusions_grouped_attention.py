"""Grouped-query attention left in the 4-D form (a per-head norm between the head split and
the attention, as Qwen3 and Gemma3 have) takes the 3-D form OpenVINO compiles too
(OpenVINO itself: contrib/transformers/tests/test_transformers_openvino.py)."""

from __future__ import annotations

import torch

from pt2onnx.testing import assert_exports_like_eager


class NormedHeads(torch.nn.Module):
    """Qwen3's attention: an RMS norm over each head of the query and the key."""

    def __init__(self, hidden=32, heads=4, kv_heads=2):
        super().__init__()
        self.heads, self.kv_heads, self.size = heads, kv_heads, hidden // heads
        self.q = torch.nn.Linear(hidden, heads * self.size, bias=False)
        self.k = torch.nn.Linear(hidden, kv_heads * self.size, bias=False)
        self.v = torch.nn.Linear(hidden, kv_heads * self.size, bias=False)
        self.q_norm, self.k_norm = torch.nn.RMSNorm(self.size), torch.nn.RMSNorm(self.size)

    def forward(self, x, mask, past_key, past_value):
        b, s, _ = x.shape
        q = self.q_norm(self.q(x).view(b, s, self.heads, self.size)).transpose(1, 2)
        k = self.k_norm(self.k(x).view(b, s, self.kv_heads, self.size)).transpose(1, 2)
        v = self.v(x).view(b, s, self.kv_heads, self.size).transpose(1, 2)
        k, v = torch.cat([past_key, k], dim=2), torch.cat([past_value, v], dim=2)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        return out.transpose(1, 2).reshape(b, s, -1)


def _inputs(batch=2, seq=5, past=3):
    """Hidden states, a causal bool mask over past and new tokens, and a key/value cache."""
    torch.manual_seed(batch * 100 + seq * 10 + past)
    mask = torch.ones(seq, past + seq, dtype=torch.bool).tril(past).expand(batch, 1, seq, past + seq)
    cache = [torch.randn(batch, 2, past, 8) for _ in range(2)]
    return torch.randn(batch, seq, 32), mask.contiguous(), *cache


def _attention(result):
    return [n for n in result.model.graph if n.op_type == "Attention"]


def test_grouped_attention_in_4d_becomes_3d():
    result = assert_exports_like_eager(
        NormedHeads().eval(), _inputs(), expect_ops=["aten::scaled_dot_product_attention"]
    )
    (attention,) = _attention(result)
    assert attention.attributes["q_num_heads"].value == 4 and attention.attributes["kv_num_heads"].value == 2
    assert {p.name: p.changed for p in result.report.passes}["portable_grouped_attention"]


def test_switched_off_the_4d_form_stays():
    result = assert_exports_like_eager(NormedHeads().eval(), _inputs(), optimize={"portable_grouped_attention": False})
    (attention,) = _attention(result)
    assert "q_num_heads" not in attention.attributes
