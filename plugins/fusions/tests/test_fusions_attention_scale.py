"""A query (or key) scaled by a constant before attention: the factor becomes ``Attention``'s
``scale`` and the ``Mul`` over the whole tensor goes (Whisper's, BART's and OPT's attention)."""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper

from pt2onnx.testing import assert_exports_like_eager
from pt2onnx_fusions.attention_scale import fold_attention_scale


class ScaledQuery(torch.nn.Module):
    """Whisper's attention: ``q_proj(x) * head_dim ** -0.5``, then attention with ``scale``."""

    def __init__(self, hidden=32, heads=4, key_factor=None, scale=1.0, return_key=False):
        super().__init__()
        self.heads, self.size = heads, hidden // heads
        self.scaling, self.key_factor, self.scale, self.return_key = self.size**-0.5, key_factor, scale, return_key
        self.q, self.k, self.v = (torch.nn.Linear(hidden, hidden) for _ in range(3))

    def _heads(self, t):
        b, s, _ = t.shape
        return t.view(b, s, self.heads, self.size).transpose(1, 2)

    def forward(self, x):
        q = self._heads(self.q(x) * self.scaling)
        key = self.k(x) if self.key_factor is None else self.k(x) * self.key_factor
        out = torch.nn.functional.scaled_dot_product_attention(
            q, self._heads(key), self._heads(self.v(x)), scale=self.scale
        )
        out = out.transpose(1, 2).reshape(x.shape)
        return (out, key) if self.return_key else out


def _x(batch=2, seq=6):
    torch.manual_seed(batch * 10 + seq)
    return (torch.randn(batch, seq, 32),)


def _attention(result):
    (node,) = [n for n in result.model.graph if n.op_type == "Attention"]
    return node


def _muls(result):
    return [n for n in result.model.graph if n.op_type == "Mul"]


@pytest.mark.parametrize("scale", [1.0, None], ids=["scale_1", "default_scale"])
def test_the_query_factor_becomes_the_attention_scale(scale):
    module = ScaledQuery(scale=scale).eval()
    result = assert_exports_like_eager(module, _x(), other_inputs=[(_x(3, 11), {})])
    sdpa_scale = scale if scale is not None else 1 / math.sqrt(module.size)
    assert _attention(result).attributes["scale"].value == pytest.approx(module.scaling * sdpa_scale, rel=1e-6)
    assert not _muls(result)
    assert {p.name: p.changed for p in result.report.passes}["fold_attention_scale"]


def test_a_key_factor_folds_too():
    module = ScaledQuery(key_factor=0.5).eval()
    result = assert_exports_like_eager(module, _x())
    assert _attention(result).attributes["scale"].value == pytest.approx(module.scaling * 0.5, rel=1e-6)
    assert not _muls(result)


def test_a_scaled_key_the_model_also_returns_keeps_its_mul():
    module = ScaledQuery(key_factor=0.5, return_key=True).eval()
    result = assert_exports_like_eager(module, _x())
    # The query's factor folds; the key's Mul stays, since the model returns the scaled key.
    assert _attention(result).attributes["scale"].value == pytest.approx(module.scaling, rel=1e-6)
    assert len(_muls(result)) == 1


def test_switched_off_the_mul_stays():
    module = ScaledQuery().eval()
    result = assert_exports_like_eager(module, _x(), optimize={"fold_attention_scale": False})
    assert _attention(result).attributes["scale"].value == 1.0
    assert len(_muls(result)) == 1


def test_a_key_joined_to_a_past_keeps_its_factor():
    """An ``Attention`` with a past key (and the present key it returns): the key's factor
    would scale the past keys too, so only the query's folds. Checked on the ONNX graph
    itself, as a plugin's rewrite could leave it (pt2onnx's own converters emit no past)."""
    graph = helper.make_graph(
        [
            helper.make_node("Mul", ["q", "c"], ["q_scaled"]),
            helper.make_node("Mul", ["k", "d"], ["k_scaled"]),
            helper.make_node(
                "Attention", ["q_scaled", "k_scaled", "v", "", "past_k", "past_v"], ["y", "present_k", "present_v"]
            ),
        ],
        "g",
        [
            helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 4, s, 8])
            for name, s in (("q", 3), ("k", 3), ("v", 3), ("past_k", 5), ("past_v", 5))
        ],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in ("y", "present_k", "present_v")],
        [helper.make_tensor("c", TensorProto.FLOAT, [], [0.25]), helper.make_tensor("d", TensorProto.FLOAT, [], [3.0])],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model = ir.from_proto(onnx.shape_inference.infer_shapes(proto))
    fold_attention_scale(model)
    folded = ir.to_proto(model)
    (attention,) = [n for n in folded.graph.node if n.op_type == "Attention"]
    assert [n.op_type for n in folded.graph.node].count("Mul") == 1
    (scale,) = [helper.get_attribute_value(a) for a in attention.attribute if a.name == "scale"]
    assert scale == pytest.approx(0.25 / math.sqrt(8), rel=1e-6)
    rng = np.random.default_rng(0)
    feeds = {
        i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim], np.float32)
        for i in graph.input
    }
    expected = ort.InferenceSession(proto.SerializeToString()).run(None, feeds)
    got = ort.InferenceSession(onnx.shape_inference.infer_shapes(folded).SerializeToString()).run(None, feeds)
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
