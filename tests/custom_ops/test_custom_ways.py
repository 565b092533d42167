"""The three ways to export a torch.library custom op, the error without a handler, and the opt-in opaque node."""

from __future__ import annotations

import sys
import warnings

import onnx
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import pt2onnx
from pt2onnx.errors import UnsupportedOpsError
from pt2onnx.plugin import converter, hookimpl
from pt2onnx.testing import assert_exports_like_eager, shapes, tensors
from pt2onnx.translate import UnknownCustomOpWarning

# -- the ops: one defined with torch.library.custom_op, one with Library.define + register_fake


@torch.library.custom_op("pt2onnx_test::scaled_relu", mutates_args=())
def scaled_relu(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.relu(x) * scale


@scaled_relu.register_fake
def _(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.empty_like(x)


_LIB = torch.library.Library("pt2onnx_test", "FRAGMENT")
_LIB.define("bias_gelu(Tensor x, Tensor bias) -> Tensor")


@torch.library.impl(_LIB, "bias_gelu", "CompositeExplicitAutograd")
def _bias_gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x + bias)


@torch.library.register_fake("pt2onnx_test::bias_gelu")
def _bias_gelu_fake(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class ScaledRelu(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.pt2onnx_test.scaled_relu(x, 1.5) + 1.0


class BiasGelu(torch.nn.Module):
    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return torch.ops.pt2onnx_test.bias_gelu(x, bias) * 2.0


# -- the three handlers, each a plugin object passed with plugins=[...]


class Expand:
    @hookimpl
    def pt2onnx_register_custom_ops(self, register):
        def scaled_relu(op, x, scale):
            return op.Mul(op.Relu(x), op.constant(scale, op.dtype_of(x)))

        register.expand("pt2onnx_test::scaled_relu", scaled_relu)


class CustomDomain:
    @hookimpl
    def pt2onnx_register_custom_ops(self, register):
        # onnxruntime's contrib op com.microsoft::BiasGelu(A, B) = gelu(A + B).
        register.custom_domain("pt2onnx_test::bias_gelu", domain="com.microsoft", op_type="BiasGelu", version=1)


class Decompose:
    @hookimpl
    def pt2onnx_register_custom_ops(self, register):
        register.decompose("pt2onnx_test::scaled_relu", lambda x, scale: torch.relu(x) * scale)


@converter("pt2onnx_test::scaled_relu")
def scaled_relu_expanded(op, x, scale):
    return op.Mul(op.Relu(x), op.constant(scale, op.dtype_of(x)))


class ExpandModule:
    @hookimpl
    def pt2onnx_register_custom_ops(self, register):
        # Every @converter of this module, each as an expand handler.
        assert register.module(sys.modules[__name__]) == 1


def _nodes(result: pt2onnx.ExportResult) -> list[tuple[str, str]]:
    return [(n.domain, n.op_type) for n in result.model_proto.graph.node]


@given(x=tensors(shapes(min_rank=1, max_rank=3), "float32"))
def test_expand_emits_standard_onnx_ops(x):
    result = assert_exports_like_eager(ScaledRelu(), (x,), plugins=[Expand()], expect_ops=["pt2onnx_test::scaled_relu"])
    assert ("", "Relu") in _nodes(result)
    assert {u.plugin for u in result.report.ops if u.op.startswith("pt2onnx_test::")} == {f"{__name__}.Expand"}


def test_module_registers_its_converters_as_expand_handlers():
    x = torch.randn(2, 3)
    result = assert_exports_like_eager(
        ScaledRelu(), (x,), plugins=[ExpandModule()], expect_ops=["pt2onnx_test::scaled_relu"]
    )
    assert ("", "Relu") in _nodes(result)
    # A custom-op handler, as register.expand's are: not a converter of the hook for aten ops.
    [handler] = [c for c in result.report.contributions if c.name.startswith("pt2onnx_test::")]
    assert (handler.kind, handler.plugin) == ("custom_op", f"{__name__}.ExpandModule")


@given(data=st.data(), shape=shapes(min_rank=1, max_rank=3))
def test_custom_domain_emits_one_typed_node(data, shape):
    # No infinities: torch's own gelu gives NaN or inf for +inf depending on the tensor's length.
    x = data.draw(tensors(shape, "float32", edge_values=("nan", "zero", "subnormal")))
    bias = data.draw(tensors(shape[-1:], "float32", edge_values=("nan", "zero", "subnormal")))
    # Static sizes: the typed output's dims are torch's numbers (symbolic ones: the next test).
    result = assert_exports_like_eager(
        BiasGelu(), (x, bias), plugins=[CustomDomain()], expect_ops=["pt2onnx_test::bias_gelu"], dynamic=False
    )
    model = result.model_proto
    node = next(n for n in model.graph.node if n.domain == "com.microsoft")
    assert node.op_type == "BiasGelu"
    assert {o.domain: o.version for o in model.opset_import}["com.microsoft"] == 1
    # Its output is typed and shaped from torch's metadata (no shape inference needed).
    typed = {v.name: v for v in model.graph.value_info}
    out = typed[node.output[0]].type.tensor_type
    assert out.elem_type == onnx.TensorProto.FLOAT
    assert [d.dim_value for d in out.shape.dim] == list(shape)


def test_custom_domain_keeps_symbolic_dims():
    batch = torch.export.Dim("batch")
    x, bias = torch.randn(3, 4), torch.randn(4)
    result = assert_exports_like_eager(
        BiasGelu(),
        (x, bias),
        plugins=[CustomDomain()],
        dynamic_shapes={"x": {0: batch}, "bias": None},
        other_inputs=[((torch.randn(7, 4), bias), {})],
    )
    node = next(n for n in result.model_proto.graph.node if n.domain == "com.microsoft")
    typed = {v.name: v for v in result.model_proto.graph.value_info}
    dims = typed[node.output[0]].type.tensor_type.shape.dim
    assert [d.dim_param or d.dim_value for d in dims] == ["batch", 4]


@torch.library.custom_op("pt2onnx_test::quick_gelu", mutates_args=())
def quick_gelu(x: torch.Tensor, alpha: float) -> torch.Tensor:
    return x * torch.sigmoid(alpha * x)


@quick_gelu.register_fake
def _(x: torch.Tensor, alpha: float) -> torch.Tensor:
    return torch.empty_like(x)


class QuickGeluDomain:
    @hookimpl
    def pt2onnx_register_custom_ops(self, register):
        # Non-tensor arguments become attributes through attributes=.
        register.custom_domain(
            "pt2onnx_test::quick_gelu",
            domain="com.microsoft",
            op_type="QuickGelu",
            attributes=lambda x, alpha: {"alpha": alpha},
        )


@given(x=tensors(shapes(min_rank=1, max_rank=3), "float32"), alpha=st.floats(0.5, 2.0))
def test_custom_domain_attributes(x, alpha):
    class Model(torch.nn.Module):
        def forward(self, x):
            return quick_gelu(x, alpha)

    result = assert_exports_like_eager(Model(), (x,), plugins=[QuickGeluDomain()], atol=1e-5, rtol=1e-4)
    [node] = [n for n in result.model_proto.graph.node if n.domain == "com.microsoft"]
    # ONNX float attributes are float32: compare with alpha's float32 value, not rounded
    # decimals (1.835935 rounds to 1.83594, its float32 1.8359349966 to 1.83593).
    assert [(a.name, a.f) for a in node.attribute] == [("alpha", float(torch.tensor(alpha, dtype=torch.float32)))]


_LIB.define("skip_layer_norm(Tensor x, Tensor skip, Tensor gamma, Tensor? beta, Tensor? bias, float eps) -> Tensor")


def _skip_layer_norm(x, skip, gamma, beta, bias, eps):
    total = x + skip if bias is None else x + skip + bias
    return torch.nn.functional.layer_norm(total, gamma.shape, gamma, beta, eps)


_LIB.impl("skip_layer_norm", _skip_layer_norm, "CompositeExplicitAutograd")
torch.library.register_fake("pt2onnx_test::skip_layer_norm", lambda x, *rest: torch.empty_like(x), lib=_LIB)


class SkipLayerNormDomain:
    @hookimpl
    def pt2onnx_register_custom_ops(self, register):
        register.custom_domain(
            "pt2onnx_test::skip_layer_norm",
            domain="com.microsoft",
            op_type="SkipLayerNormalization",
            attributes=lambda *args: {"epsilon": args[-1]},
        )


@settings(max_examples=4)
@given(data=st.data(), with_beta=st.booleans(), with_bias=st.booleans())
def test_custom_domain_keeps_optional_inputs_in_place(data, with_beta, with_bias):
    # Plain values: onnxruntime's SkipLayerNormalization kernel is not torch's layer_norm at
    # NaN, inf or huge magnitudes (its one-pass variance overflows); this test is about where
    # the optional inputs go.
    x, skip = (data.draw(tensors((2, 3, 8), "float32", low=-3, high=3, edge_values=False)) for _ in range(2))
    gamma, beta, bias = (data.draw(tensors((8,), "float32", low=-3, high=3, edge_values=False)) for _ in range(3))

    class Model(torch.nn.Module):
        def forward(self, x, skip, gamma, beta, bias):
            return torch.ops.pt2onnx_test.skip_layer_norm(
                x, skip, gamma, beta if with_beta else None, bias if with_bias else None, 1e-5
            )

    result = assert_exports_like_eager(Model(), (x, skip, gamma, beta, bias), plugins=[SkipLayerNormDomain()])
    [node] = [n for n in result.model_proto.graph.node if n.domain == "com.microsoft"]
    # An absent beta before a present bias is an empty input, so bias stays input 4.
    expected = 5 if with_bias else 4 if with_beta else 3
    assert len(node.input) == expected
    if with_bias and not with_beta:
        assert node.input[3] == ""


@settings(max_examples=3)  # each example re-traces the program
@given(x=tensors(shapes(min_rank=1, max_rank=3), "float32"))
def test_decompose_into_aten_ops(x):
    result = assert_exports_like_eager(ScaledRelu(), (x,), plugins=[Decompose()], expect_ops=["aten::relu"])
    assert result.report.retraced
    # The report names the custom op, decomposed by the handler's plugin, before its aten ops.
    custom = [(u.op, u.plugin, u.how) for u in result.report.ops if u.op.startswith("pt2onnx_test::")]
    assert custom == [("pt2onnx_test::scaled_relu.default", f"{__name__}.Decompose", "decomposed")]


def test_library_define_op_decomposes_too():
    _LIB.define("shifted_relu(Tensor x, Tensor shift) -> Tensor")
    _LIB.impl("shifted_relu", lambda x, shift: torch.relu(x - shift), "CompositeExplicitAutograd")
    torch.library.register_fake("pt2onnx_test::shifted_relu", lambda x, shift: torch.empty_like(x), lib=_LIB)

    class DecomposeShiftedRelu:
        @hookimpl
        def pt2onnx_register_custom_ops(self, register):
            register.decompose("pt2onnx_test::shifted_relu", lambda x, shift: torch.relu(x - shift))

    class Model(torch.nn.Module):
        def forward(self, x, shift):
            return torch.ops.pt2onnx_test.shifted_relu(x, shift)

    x, shift = torch.randn(2, 3), torch.randn(3)
    assert_exports_like_eager(Model(), (x, shift), plugins=[DecomposeShiftedRelu()], expect_ops=["aten::sub"])


def test_no_handler_is_a_clear_error():
    with pytest.raises(UnsupportedOpsError) as info:
        pt2onnx.export(ScaledRelu(), (torch.randn(2, 3),))
    message = str(info.value)
    assert "pt2onnx_test::scaled_relu" in message
    for way in ("register.expand", "register.custom_domain", "register.decompose", "unknown_custom_ops='emit'"):
        assert way in message


def test_emit_opaque_node_with_a_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = pt2onnx.export(ScaledRelu(), (torch.randn(2, 3),), unknown_custom_ops="emit")
    assert any(issubclass(w.category, UnknownCustomOpWarning) for w in caught)
    model = result.model_proto
    node = next(n for n in model.graph.node if n.domain == "pt2onnx_test")
    assert node.op_type == "scaled_relu"
    # The non-tensor argument becomes an attribute named as in the schema.
    assert [(a.name, a.f) for a in node.attribute] == [("scale", 1.5)]
    assert {o.domain: o.version for o in model.opset_import}["pt2onnx_test"] == 1
    onnx.checker.check_model(model)
