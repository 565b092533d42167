"""The fused converters against eager PyTorch, through onnxruntime (pack passed with plugins=)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import pt2onnx
import pt2onnx_ort
import pt2onnx_ort.attention
from pt2onnx.errors import UnsupportedArgumentError
from pt2onnx.registry import session_registry
from pt2onnx.testing import assert_exports_like_eager, dtypes, tensors


def _ops(result, domain="com.microsoft"):
    return [n.op_type for n in result.model_proto.graph.node if n.domain == domain]


class Attention(torch.nn.Module):
    def __init__(self, is_causal=False, scale=None):
        super().__init__()
        self.is_causal, self.scale = is_causal, scale

    def forward(self, q, k, v, mask=None):
        return torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=self.is_causal, scale=self.scale
        )


@given(
    data=st.data(),
    batch=st.integers(1, 2),
    heads=st.integers(1, 3),
    seq=st.integers(1, 5),
    kv_seq=st.integers(1, 5),
    size=st.sampled_from([2, 4, 8]),
    mask=st.sampled_from([None, "bool", "float"]),
    scale=st.sampled_from([None, 0.3]),
)
def test_sdpa_as_multi_head_attention(data, batch, heads, seq, kv_seq, size, mask, scale):
    q = data.draw(tensors((batch, heads, seq, size), "float32"))
    k = data.draw(tensors((batch, heads, kv_seq, size), "float32"))
    v = data.draw(tensors((batch, heads, kv_seq, size), "float32"))
    args = (q, k, v)
    if mask == "bool":
        m = data.draw(tensors((seq, kv_seq), "bool"))
        m[:, 0] = True  # a row with no key to attend is NaN in torch
        args = (*args, m)
    elif mask == "float":
        args = (*args, data.draw(tensors((batch, 1, seq, kv_seq), "float32")))
    result = assert_exports_like_eager(
        Attention(scale=scale), args, plugins=[pt2onnx_ort.attention], expect_ops=["aten::scaled_dot_product_attention"]
    )
    assert _ops(result) == ["MultiHeadAttention"]


@settings(max_examples=3)
@given(data=st.data(), seq=st.integers(2, 6))
def test_causal_sdpa_with_dynamic_batch_and_sequence(data, seq):
    q, k, v = (data.draw(tensors((2, 2, seq, 4), "float32")) for _ in range(3))
    other = tuple(torch.randn(3, 2, 7, 4) for _ in range(3))
    dims = {0: torch.export.Dim("batch"), 2: torch.export.Dim("seq")}
    result = assert_exports_like_eager(
        Attention(is_causal=True),
        (q, k, v),
        plugins=[pt2onnx_ort.attention],
        dynamic_shapes={"q": dims, "k": dims, "v": dims},
        other_inputs=[(other, {})],
    )
    assert _ops(result) == ["MultiHeadAttention"]


@given(x=tensors(dtype=dtypes(["float32", "float16", "bfloat16"])), tanh=st.booleans())
def test_gelu(x, tanh):
    approximate = "tanh" if tanh else "none"
    result = assert_exports_like_eager(
        torch.nn.GELU(approximate), (x,), plugins=[pt2onnx_ort], expect_ops=["aten::gelu"]
    )
    assert _ops(result) == (["FastGelu"] if tanh and x.dim() else [])


@settings(max_examples=4)
@given(x=tensors(dtype="float64"))
def test_gelu_tanh_float64_is_the_formula(x):
    result = assert_exports_like_eager(torch.nn.GELU("tanh"), (x,), plugins=[pt2onnx_ort])
    assert _ops(result) == []


def test_unsupported_attention_says_how_to_fall_back():
    q = torch.randn(1, 2, 3, 4, dtype=torch.float64)
    with pytest.raises(UnsupportedArgumentError, match=r"pt2onnx_ort\.attention"):
        pt2onnx.export(Attention(), (q, q, q), plugins=[pt2onnx_ort.attention])


def test_entry_point_plugin_leaves_attention_opt_in():
    registry = session_registry(plugins=[pt2onnx_ort], disable=["ort"])
    assert registry.lookup(torch.ops.aten.gelu.default).winner.plugin == "pt2onnx_ort"
    sdpa = registry.lookup(torch.ops.aten.scaled_dot_product_attention.default)
    assert sdpa is None or sdpa.winner.plugin != "pt2onnx_ort"
