"""The fused converters against eager PyTorch, through onnxruntime (pack passed with plugins=)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import pt2onnx
import pt2onnx_ort
import pt2onnx_ort.attention
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
    # Sizes from 2: torch specializes a size of 1, and the second input takes other sizes.
    batch=st.integers(2, 3),
    heads=st.integers(1, 3),
    seq=st.integers(2, 5),
    kv_seq=st.integers(2, 5),
    size=st.sampled_from([2, 4, 8]),
    mask=st.sampled_from([None, "bool", "float"]),
    scale=st.sampled_from([None, 0.3]),
)
def test_sdpa_as_multi_head_attention(data, batch, heads, seq, kv_seq, size, mask, scale):
    def inputs(batch, seq, kv_seq, draw):
        q = draw((batch, heads, seq, size), "float32")
        k, v = (draw((batch, heads, kv_seq, size), "float32") for _ in range(2))
        if mask == "bool":
            m = draw((seq, kv_seq), "bool")
            m[:, 0] = True  # a row with no key to attend is NaN in torch
            return (q, k, v, m)
        return (q, k, v) if mask is None else (q, k, v, draw((batch, 1, seq, kv_seq), "float32"))

    # Finite, moderate values: at NaN, inf or huge scores onnxruntime's MultiHeadAttention
    # kernel is not torch's safe softmax (documented in the pack's README); the builtin
    # converter matches torch there (plugins/aten/tests/test_aten_attention.py).
    def draw(shape, dtype):
        return data.draw(tensors(shape, dtype, low=-3, high=3, edge_values=False))

    args = inputs(batch, seq, kv_seq, draw)
    other = inputs(batch + 1, seq + 2, kv_seq + 1, draw)
    # Batch and lengths dynamic; MultiHeadAttention's head count is an attribute, so static.
    auto = torch.export.Dim.AUTO
    qkv = {0: auto, 2: auto}
    masks = {None: (), "bool": ({0: auto, 1: auto},), "float": ({0: auto, 2: auto, 3: auto},)}[mask]
    result = assert_exports_like_eager(
        Attention(scale=scale),
        args,
        plugins=[pt2onnx_ort.attention],
        expect_ops=["aten::scaled_dot_product_attention"],
        dynamic_shapes=(qkv, qkv, qkv, *masks),
        other_inputs=[(other, {})],
    )
    assert _ops(result) == ["MultiHeadAttention"]


@pytest.mark.parametrize("mask", ["bool", "float"])
def test_sdpa_as_multi_head_attention_at_opset_14(mask):
    # The mask's bias is expanded to the query and key lengths read from their shapes, which
    # Shape(start=, end=) would do only from opset 15.
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 2, 3, 4), torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 4)
    m = torch.rand(3, 5) > 0.3 if mask == "bool" else torch.randn(2, 1, 3, 5)
    if mask == "bool":
        m[:, 0] = True  # a row with no key to attend is NaN in torch
    other = (torch.randn(3, 2, 4, 4), torch.randn(3, 2, 6, 4), torch.randn(3, 2, 6, 4))
    other_mask = torch.ones(4, 6, dtype=torch.bool) if mask == "bool" else torch.randn(3, 1, 4, 6)
    result = assert_exports_like_eager(
        Attention(),
        (q, k, v, m),
        plugins=[pt2onnx_ort.attention],
        other_inputs=[((*other, other_mask), {})],
        opset=14,
        expect_ops={"aten::scaled_dot_product_attention": "pt2onnx_ort.attention"},
    )
    assert result.model.opset_imports[""] == 14 and _ops(result) == ["MultiHeadAttention"]


@settings(max_examples=3)
@given(data=st.data(), seq=st.integers(2, 6))
def test_causal_sdpa_with_dynamic_batch_and_sequence(data, seq):
    q, k, v = (data.draw(tensors((2, 2, seq, 4), "float32", low=-3, high=3, edge_values=False)) for _ in range(3))
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


# No infinities or dtype extremes: torch's own gelu gives two answers there, by tensor length
# (see plugins/aten/tests/test_aten_activations.py::test_gelu).
_GELU_EDGES = ("nan", "zero", "subnormal")


@given(x=tensors(dtype=dtypes(["float32", "float16", "bfloat16"]), edge_values=_GELU_EDGES), tanh=st.booleans())
def test_gelu_below_opset_20(x, tanh):
    approximate = "tanh" if tanh else "none"
    result = assert_exports_like_eager(
        torch.nn.GELU(approximate), (x,), plugins=[pt2onnx_ort], expect_ops=["aten::gelu"], opset=18
    )
    fused = tanh and x.dim()
    assert _ops(result) == (["FastGelu"] if fused else [])
    [usage] = result.report.ops
    assert (usage.plugin, usage.declined_by) == (("pt2onnx_ort", ()) if fused else ("aten", ("pt2onnx_ort",)))


@settings(max_examples=4)
@given(x=tensors(dtype="float64", edge_values=_GELU_EDGES))
def test_gelu_tanh_float64_is_left_to_the_builtin_converter(x):
    result = assert_exports_like_eager(torch.nn.GELU("tanh"), (x,), plugins=[pt2onnx_ort], opset=18)
    assert _ops(result) == [] and result.report.provider("aten::gelu.default") == "aten"


def test_from_opset_20_gelu_is_the_builtin_one_gelu_node():
    x = torch.randn(2, 8)
    result = pt2onnx.export(torch.nn.GELU("tanh"), (x,), plugins=[pt2onnx_ort], opset=20)
    assert [n.op_type for n in result.model.graph] == ["Gelu"]
    assert result.report.provider("aten::gelu.default") == "aten"
    assert result.verify(x).ok


@pytest.mark.parametrize("case", ["float64", "grouped key/value heads", "causal, unequal lengths"])
def test_attention_declines_what_multi_head_attention_cannot_take(case):
    torch.manual_seed(0)
    q, k = torch.randn(1, 4, 3, 8), torch.randn(1, 4, 5, 8)
    model, args = Attention(), (q, k, k.clone())
    if case == "float64":
        args = tuple(t.double() for t in args)
    elif case == "grouped key/value heads":
        model, args = GroupedAttention(), (q, k[:, :2], k[:, 2:])
    else:
        model = Attention(is_causal=True)
    result = pt2onnx.export(model, args, plugins=[pt2onnx_ort.attention], opset=18)
    assert _ops(result) == []
    [usage] = [u for u in result.report.ops if u.op == "aten::scaled_dot_product_attention.default"]
    assert (usage.plugin, usage.declined_by) == ("aten", ("pt2onnx_ort.attention",))
    assert result.verify(*args).ok


class GroupedAttention(torch.nn.Module):
    def forward(self, q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def test_entry_point_plugin_leaves_attention_opt_in():
    registry = session_registry(plugins=[pt2onnx_ort], disable=["ort"], opset=18)
    assert registry.lookup(torch.ops.aten.gelu.default).winner.plugin == "pt2onnx_ort"
    sdpa = registry.lookup(torch.ops.aten.scaled_dot_product_attention.default)
    assert sdpa is None or sdpa.winner.plugin != "pt2onnx_ort"


def test_multi_head_attention_is_not_torch_at_a_nan_query():
    # One of the reasons MultiHeadAttention is opt-in (README): torch's CPU attention gives a
    # query holding a NaN a finite row, as the builtin export does; MultiHeadAttention a NaN row.
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
    q[0, 0, 1, 2] = float("nan")
    eager = Attention()(q, k, v)
    fused = pt2onnx.export(Attention(), (q, k, v), plugins=[pt2onnx_ort.attention], opset=18)
    builtin = pt2onnx.export(Attention(), (q, k, v), opset=18)
    assert _ops(fused) == ["MultiHeadAttention"] and not eager.isnan().any()
    assert builtin.verify(q, k, v).ok
    [out] = fused.session().run(None, {i.name: t.numpy() for i, t in zip(fused.session().get_inputs(), (q, k, v))})
    assert torch.from_numpy(out).isnan().nonzero()[:, 2].unique().tolist() == [1]
