"""Attention with its head split, rotary embedding and repeated key/value heads, fused; numerics as eager.

The modules are written the way transformers writes Llama, BERT and GPT-2 attention
(``rotate_half``, ``repeat_kv``, ``view``/``transpose``, ``Conv1D``'s ``addmm``).
"""

from __future__ import annotations

import collections

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.export import Dim

import pt2onnx
from pt2onnx.testing import assert_exports_like_eager


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(hidden: torch.Tensor, n_rep: int) -> torch.Tensor:
    batch, heads, seq, size = hidden.shape
    if n_rep == 1:
        return hidden
    hidden = hidden[:, :, None, :, :].expand(batch, heads, n_rep, seq, size)
    return hidden.reshape(batch, heads * n_rep, seq, size)


class LlamaLikeAttention(torch.nn.Module):
    def __init__(self, hidden: int, heads: int, kv_heads: int, rotary: bool, causal: bool) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.size = heads, kv_heads, hidden // heads
        self.rotary, self.causal = rotary, causal
        self.q = torch.nn.Linear(hidden, heads * self.size, bias=False)
        self.k = torch.nn.Linear(hidden, kv_heads * self.size, bias=False)
        self.v = torch.nn.Linear(hidden, kv_heads * self.size, bias=False)
        self.o = torch.nn.Linear(heads * self.size, hidden, bias=False)
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, self.size, 2).float() / self.size)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        q = self.q(x).view(batch, seq, -1, self.size).transpose(1, 2)
        k = self.k(x).view(batch, seq, -1, self.size).transpose(1, 2)
        v = self.v(x).view(batch, seq, -1, self.size).transpose(1, 2)
        if self.rotary:
            positions = torch.arange(seq, device=x.device).unsqueeze(0).float()
            freqs = (self.inv_freq[None, :, None] @ positions[:, None, :]).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos().unsqueeze(1), emb.sin().unsqueeze(1)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
        n_rep = self.heads // self.kv_heads
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.o(y.transpose(1, 2).reshape(batch, seq, -1))


class Conv1D(torch.nn.Module):
    """GPT-2's linear layer: ``addmm`` on the rows flattened."""

    def __init__(self, nf: int, nx: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(nx, nf) * 0.1)
        self.bias = torch.nn.Parameter(torch.randn(nf) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return out.view((*x.size()[:-1], self.weight.size(-1)))


class GPT2LikeAttention(torch.nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads, self.size = heads, hidden // heads
        self.c_attn, self.c_proj = Conv1D(3 * hidden, hidden), Conv1D(hidden, hidden)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        q, k, v = self.c_attn(x).split(self.heads * self.size, dim=2)
        shape = (*x.shape[:-1], -1, self.size)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :])
        return self.c_proj(y.transpose(1, 2).reshape(*x.shape[:-1], -1))


class GPT2WithFullMask(torch.nn.Module):
    """The same attention with a ``(batch, seq, seq)`` mask: a row per query."""

    def __init__(self, inner: GPT2LikeAttention) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        inner = self.inner
        q, k, v = inner.c_attn(x).split(inner.heads * inner.size, dim=2)
        shape = (*x.shape[:-1], -1, inner.size)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None])
        return inner.c_proj(y.transpose(1, 2).reshape(*x.shape[:-1], -1))


def _op_types(result: pt2onnx.ExportResult) -> collections.Counter[str]:
    return collections.Counter(n.op_type for n in result.model.graph.all_nodes())


def _head_transposes(result: pt2onnx.ExportResult) -> int:
    """Transposes between ``(batch, seq, heads, d)`` and ``(batch, heads, seq, d)``."""
    return sum(
        1
        for n in result.model.graph.all_nodes()
        if n.op_type == "Transpose" and list(n.attributes.get_ints("perm", [])) == [0, 2, 1, 3]
    )


def _removed(result: pt2onnx.ExportResult, name: str) -> int:
    return next(p.removed for p in result.report.passes if p.name == name)


DYNAMIC = {"x": {0: Dim("batch", max=64), 1: Dim("seq", max=256)}}


@st.composite
def llama_cases(draw: st.DrawFn) -> tuple[LlamaLikeAttention, torch.Tensor, torch.Tensor]:
    kv_heads = draw(st.sampled_from([1, 2, 4]))
    heads = kv_heads * draw(st.sampled_from([1, 2]))
    size = draw(st.sampled_from([8, 16]))
    model = LlamaLikeAttention(heads * size, heads, kv_heads, rotary=draw(st.booleans()), causal=draw(st.booleans()))
    batch, seq = draw(st.integers(2, 3)), draw(st.integers(2, 6))
    return model, torch.randn(batch, seq, heads * size), torch.randn(batch + 1, seq + 2, heads * size)


@given(llama_cases())
def test_llama_attention_runs_as_one_attention_on_unsplit_heads(case):
    model, x, other = case
    result = assert_exports_like_eager(model, (x,), other_inputs=[((other,), {})], dynamic_shapes=DYNAMIC)
    ops = _op_types(result)
    assert ops["Attention"] == 1 and _head_transposes(result) == 0, ops
    attention = next(n for n in result.model.graph if n.op_type == "Attention")
    assert attention.attributes["q_num_heads"].value == model.heads
    assert attention.attributes["kv_num_heads"].value == model.kv_heads
    assert ops["RotaryEmbedding"] == (2 if model.rotary else 0), ops
    assert ops["Expand"] <= (2 if model.rotary else 0), ops  # only the caches' batch broadcast
    assert _removed(result, "fuse_attention_heads") > 0


@given(st.sampled_from([1, 2, 4]), st.integers(2, 5))
def test_gpt2_attention_loses_its_reshapes_and_gemms(heads, seq):
    torch.manual_seed(heads)
    model = GPT2LikeAttention(8 * heads, heads)
    x, mask = torch.randn(2, seq, 8 * heads), torch.rand(2, seq) > 0.3
    mask[:, 0] = True
    other = (torch.randn(3, seq + 1, 8 * heads), torch.ones(3, seq + 1, dtype=torch.bool))
    dynamic = {"x": {0: Dim("batch"), 1: Dim("seq")}, "mask": {0: Dim("batch"), 1: Dim("seq")}}
    result = assert_exports_like_eager(model, (x, mask), other_inputs=[(other, {})], dynamic_shapes=dynamic)
    ops = _op_types(result)
    # A (batch, 1, 1, seq) mask broadcasts over the queries: onnxruntime takes that only in 4-D
    # form, so the heads stay split, and only the input projection's Gemm is unflattened.
    assert _head_transposes(result) == 4 and ops["Gemm"] == 1 and _removed(result, "unflatten_gemm") > 0, ops
    full = torch.ones(seq, seq, dtype=torch.bool).tril()[None].expand(2, seq, seq)
    dynamic["mask"] = {0: Dim("batch"), 1: Dim("seq"), 2: Dim("seq")}
    result = assert_exports_like_eager(GPT2WithFullMask(model), (x, full), dynamic_shapes=dynamic)
    ops = _op_types(result)
    assert ops["Gemm"] == 0 and _head_transposes(result) == 0 and ops["Reshape"] == 0, ops
    assert _removed(result, "fuse_attention_heads") > 0


def test_each_fusion_can_be_switched_off_and_the_model_stays_correct():
    model = LlamaLikeAttention(32, 4, 2, rotary=True, causal=True)
    x = torch.randn(2, 5, 32)
    names = ["fuse_rotary_embedding", "fuse_repeated_kv", "fuse_attention_heads"]
    result = assert_exports_like_eager(model, (x,), dynamic_shapes=DYNAMIC, optimize=dict.fromkeys(names, False))
    ops = _op_types(result)
    assert ops["RotaryEmbedding"] == 0 and _head_transposes(result) > 0, ops
    assert not set(names) & {p.name for p in result.report.passes}


@pytest.mark.parametrize("opset", [14, 22])
def test_below_opset_23_nothing_is_fused(opset):
    model = LlamaLikeAttention(32, 4, 2, rotary=True, causal=False)
    result = assert_exports_like_eager(model, (torch.randn(2, 5, 32),), dynamic_shapes=DYNAMIC, opset=opset)
    ops = _op_types(result)
    assert ops["RotaryEmbedding"] == 0 and ops["Attention"] == 0, ops
    assert {"fuse_rotary_embedding", "fuse_attention_heads"} <= set(result.report.passes_off)


class ReturnsItsKeys(LlamaLikeAttention):
    """The rotated keys are an output too (as a KV cache's ``present`` is): they must stay split."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        batch, seq, _ = x.shape
        q = self.q(x).view(batch, seq, -1, self.size).transpose(1, 2)
        k = self.k(x).view(batch, seq, -1, self.size).transpose(1, 2)
        v = self.v(x).view(batch, seq, -1, self.size).transpose(1, 2)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return self.o(y.transpose(1, 2).reshape(batch, seq, -1)), k


def test_a_split_value_used_elsewhere_keeps_the_4d_attention():
    model = ReturnsItsKeys(32, 4, 4, rotary=False, causal=False)
    result = assert_exports_like_eager(model, (torch.randn(2, 5, 32),), dynamic_shapes=DYNAMIC)
    attention = next(n for n in result.model.graph if n.op_type == "Attention")
    assert "q_num_heads" not in attention.attributes
