"""fuse_rms_norm: the RMS norm transformers write by hand becomes one RMSNormalization, numerics unchanged."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto, helper

import pt2onnx
from pt2onnx.testing import assert_exports_like_eager, tensors
from pt2onnx_fusions.rms_norm import fuse_rms_norm

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


class _Spelled(torch.nn.Module):
    """An RMS norm spelled one of the ways models write it (operand orders, ``x * x``, kept intermediates)."""

    def __init__(self, form: str) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(8) + 0.5)
        self.form = form

    def forward(self, x):
        square = x * x if self.form == "x*x" else x.pow(2)
        mean = square.mean(-1, keepdim=True)
        inverse = torch.rsqrt(1e-6 + mean if self.form == "eps+mean" else mean + 1e-6)
        h = inverse * x if self.form == "inverse*x" else x * inverse
        out = h * self.weight if self.form == "h*weight" else self.weight * h
        if self.form == "h kept":
            return out, h
        if self.form == "mean kept":
            return out + mean
        return out + x  # x is used again: a residual does not stop the fusion


@pytest.mark.parametrize(
    ("form", "fused"),
    [
        ("pow", True),
        ("x*x", True),
        ("eps+mean", True),
        ("inverse*x", True),
        ("h*weight", True),
        ("h kept", False),
        ("mean kept", False),
    ],
)
def test_each_spelling_is_fused_unless_an_intermediate_is_used_elsewhere(form, fused):
    x = torch.randn(2, 3, 8)
    result = assert_exports_like_eager(_Spelled(form), (x,), dynamic_shapes=_DIMS)
    ops = [n.op_type for n in result.model.graph]
    assert ops.count("RMSNormalization") == int(fused), ops
    if fused:
        assert not {"ReduceMean", "Sqrt", "Reciprocal"} & set(ops), ops


def test_a_pow_square_written_by_another_converter_is_fused_with_the_same_numerics():
    def const(name, array):
        return helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(array, name))

    nodes = [
        const("two", np.array(2.0, np.float32)),
        const("axes", np.array([-1], np.int64)),
        const("eps", np.array(1e-5, np.float32)),
        const("w", (np.arange(8, dtype=np.float32) + 1) / 8),
        helper.make_node("Pow", ["x", "two"], ["sq"]),
        helper.make_node("ReduceMean", ["sq", "axes"], ["mean"], keepdims=1),
        helper.make_node("Add", ["eps", "mean"], ["var"]),
        helper.make_node("Sqrt", ["var"], ["std"]),
        helper.make_node("Reciprocal", ["std"], ["inv"]),
        helper.make_node("Mul", ["inv", "x"], ["h"]),
        helper.make_node("Mul", ["h", "w"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "rms",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model = ir.from_proto(onnx.shape_inference.infer_shapes(proto))
    fuse_rms_norm(model)
    assert [n.op_type for n in model.graph if n.op_type != "Constant"] == ["RMSNormalization"]
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    before = ort.InferenceSession(proto.SerializeToString()).run(None, {"x": x})[0]
    after = ort.InferenceSession(ir.to_proto(model).SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(after, before, rtol=1e-6, atol=1e-6)
