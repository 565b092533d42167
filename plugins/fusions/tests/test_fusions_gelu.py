"""fuse_gelu_tanh: the tanh GELU transformers write by hand becomes one Gelu, numerics unchanged."""

from __future__ import annotations

import math

import torch
from hypothesis import given
from hypothesis import strategies as st

from pt2onnx.testing import assert_exports_like_eager, tensors

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)

#: The ways transformers and users spell the tanh GELU of ``x``.
SPELLINGS = {
    # transformers' NewGELUActivation (GPT-2's gelu_new)
    "new_gelu": lambda x: 0.5 * x * (1.0 + torch.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * torch.pow(x, 3.0)))),
    "scale_last": lambda x: x * (1.0 + torch.tanh((x + x * x * x * 0.044715) * _SQRT_2_OVER_PI)) * 0.5,
    "half_outside": lambda x: 0.5 * (x * (torch.tanh(_SQRT_2_OVER_PI * (0.044715 * x**3 + x)) + 1.0)),
    # transformers' FastGELUActivation
    "fast_gelu": lambda x: 0.5 * x * (1.0 + torch.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x))),
}


class MLP(torch.nn.Module):
    """A GPT-2 style MLP: linear, hand-written tanh GELU, linear."""

    def __init__(self, spelling: str, width: int = 8, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.gelu = SPELLINGS[spelling]
        self.fc = torch.nn.Linear(width, 2 * width, dtype=dtype)
        self.proj = torch.nn.Linear(2 * width, width, dtype=dtype)

    def forward(self, x):
        return self.proj(self.gelu(self.fc(x)))


class Activation(torch.nn.Module):
    def __init__(self, spelling: str, scale: float | None = None) -> None:
        super().__init__()
        self.gelu, self.scale = SPELLINGS[spelling], scale

    def forward(self, x):
        return self.gelu(x if self.scale is None else x * self.scale)


def _ops(result):
    return [node.op_type for node in result.model.graph]


def _removed(result, name="fuse_gelu_tanh"):
    return {p.name: p.removed for p in result.report.passes}.get(name)


_DIMS = {"x": {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq")}}

# No dtype extremes: the hand-written formula overflows where |x| > finfo.max / 2 (0.5 * (x *
# 2) is inf) and the fused Gelu does not, and the linear layers' sums of extremes overflow in
# an order that differs between the libraries. NaN, inf, zeros and subnormals are drawn.
_EDGES = ("nan", "inf", "zero", "subnormal")


@given(
    data=st.data(),
    spelling=st.sampled_from(sorted(SPELLINGS)),
    dtype=st.sampled_from(["float32", "float16", "float64"]),
    batch=st.integers(2, 3),
    seq=st.integers(2, 5),
)
def test_hand_written_tanh_gelu_becomes_one_gelu(data, spelling, dtype, batch, seq):
    x = data.draw(tensors((batch, seq, 8), dtype, low=-4, high=4, edge_values=_EDGES))
    other = data.draw(tensors((batch + 1, seq + 2, 8), dtype, low=-4, high=4, edge_values=_EDGES))
    torch.manual_seed(0)
    module = MLP(spelling, dtype=getattr(torch, dtype))
    result = assert_exports_like_eager(module, (x,), dynamic_shapes=_DIMS, other_inputs=[((other,), {})])
    ops = _ops(result)
    if dtype == "float64":  # onnxruntime's double Gelu is less accurate than the formula
        assert "Gelu" not in ops and _removed(result) == 0
    else:
        assert ops.count("Gelu") == 1 and "Tanh" not in ops and "Pow" not in ops, ops
        assert _removed(result) >= 6


@given(
    x=tensors(st.sampled_from([(5,), (2, 3), (2, 3, 4)]), "float32", low=-2, high=2, edge_values=_EDGES),
    spelling=st.sampled_from(sorted(SPELLINGS)),
    scale=st.sampled_from([None, 2.0]),
)
def test_gelu_as_the_graph_output(x, spelling, scale):
    """The GELU of a graph input or of a product (which must not be opened as part of the pattern)."""
    result = assert_exports_like_eager(Activation(spelling, scale), (x,))
    assert _ops(result) == (["Gelu"] if scale is None else ["Mul", "Gelu"])
    assert result.model.graph.outputs[0].name == result.model_proto.graph.output[0].name


@given(data=st.data(), opset=st.sampled_from([14, 19]), switched_off=st.booleans())
def test_unfused_below_opset_20_or_when_switched_off(data, opset, switched_off):
    x = data.draw(tensors((2, 3, 8), "float32", low=-4, high=4, edge_values=_EDGES))
    other = data.draw(tensors((3, 6, 8), "float32", low=-4, high=4, edge_values=_EDGES))
    options = {"optimize": {"fuse_gelu_tanh": False}} if switched_off else {"opset": opset}
    result = assert_exports_like_eager(
        MLP("new_gelu"), (x,), dynamic_shapes=_DIMS, other_inputs=[((other,), {})], **options
    )
    ops = _ops(result)
    assert "Gelu" not in ops and "Tanh" in ops
    assert _removed(result) is None  # the pass did not run
    if not switched_off:
        assert result.report.passes_off["fuse_gelu_tanh"] == f"registered for opsets 20+, the target is {opset}"


def test_other_constants_are_not_a_gelu():
    """A formula of the same shape with another constant is left as it is."""
    x = torch.randn(2, 3, 8)
    not_gelu = Activation("new_gelu")
    not_gelu.gelu = lambda x: 0.5 * x * (1.0 + torch.tanh(_SQRT_2_OVER_PI * (x + 0.045 * torch.pow(x, 3.0))))
    result = assert_exports_like_eager(not_gelu, (x,))
    assert "Gelu" not in _ops(result) and _removed(result) == 0
