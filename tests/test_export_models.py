"""The core pipeline on an MLP and a CNN: numerics in onnxruntime, naming, typing, checker."""

from __future__ import annotations

import inspect

import onnx
import pytest
import torch

import pt2onnx
from small_models import MLP, trained_cnn

BATCH = torch.export.Dim("batch")


@pytest.mark.parametrize(
    "make, shape",
    [(lambda: MLP().eval(), (3, 8)), (trained_cnn, (2, 3, 8, 8))],
    ids=["mlp", "cnn"],
)
def test_static_export_matches_eager(make, shape):
    torch.manual_seed(1)
    model, x = make(), torch.randn(shape)
    result = pt2onnx.export(model, (x,))
    check = result.verify(x)
    assert check.ok, str(check)
    assert check.max_abs <= 1e-5
    onnx.checker.check_model(result.model_proto, full_check=True)


@pytest.mark.parametrize(
    "make, shape",
    [(lambda: MLP().eval(), (3, 8)), (trained_cnn, (2, 3, 8, 8))],
    ids=["mlp", "cnn"],
)
def test_dynamic_batch_verified_at_two_sizes(make, shape):
    torch.manual_seed(2)
    model = make()
    name = next(iter(inspect.signature(model.forward).parameters))
    result = pt2onnx.export(model, (torch.randn(shape),), dynamic_shapes={name: {0: BATCH}})
    for batch in (1, 7):
        x = torch.randn((batch, *shape[1:]))
        check = result.verify(x)
        assert check.ok and check.max_abs <= 1e-5, str(check)
        assert result.run(x).shape[0] == batch


def test_inputs_outputs_and_initializers_are_named_after_the_model():
    model = trained_cnn()
    # Unoptimized: the rewriter folds batch norm into the convolution.
    result = pt2onnx.export(model, (torch.randn(2, 3, 8, 8),), dynamic_shapes={"image": {0: BATCH}}, optimize=False)
    graph = result.model.graph
    assert [v.name for v in graph.inputs] == ["image"]
    assert [v.name for v in graph.outputs] == ["output"]
    assert str(graph.inputs[0].shape[0]) == "batch"
    assert str(graph.outputs[0].shape[0]) == "batch"
    names = set(graph.initializers)
    assert {"conv.weight", "conv.bias", "bn.running_mean", "bn.running_var", "fc.weight", "fc.bias"} <= names


def test_every_value_is_typed_without_shape_inference():
    result = pt2onnx.export(MLP().eval(), (torch.randn(3, 8),), optimize=False)
    for node in result.model.graph:
        for value in node.outputs:
            assert value.dtype is not None, f"{node.op_type} output {value.name} has no dtype"
            assert value.shape is not None, f"{node.op_type} output {value.name} has no shape"


def test_structured_outputs_are_named_and_returned_in_structure():
    class TwoHeads(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = torch.nn.Linear(4, 4)

        def forward(self, x):
            h = self.body(x)
            return {"logits": h * 2.0, "extra": (h + 1.0, torch.relu(h))}

    x = torch.randn(2, 4)
    result = pt2onnx.export(TwoHeads().eval(), (x,))
    assert [v.name for v in result.model.graph.outputs] == ["logits", "extra.0", "extra.1"]
    out = result.run(x)
    assert set(out) == {"logits", "extra"} and isinstance(out["extra"], tuple)
    assert result.verify(x).ok


def test_nodes_carry_provenance_metadata():
    result = pt2onnx.export(trained_cnn(), (torch.randn(2, 3, 8, 8),), optimize=False)
    conv = next(n for n in result.model.graph if n.op_type == "Conv")
    props = conv.metadata_props
    assert props["pt2onnx.op"] == "aten::conv2d.default"
    assert props["pt2onnx.module"] == "conv"
    assert props["pt2onnx.module_class"].endswith("Conv2d")
    assert "tests/small_models.py" in props["pt2onnx.source"] and "self.conv(image)" in props["pt2onnx.source"]


def test_report_says_who_converted_what_and_times_phases():
    result = pt2onnx.export(MLP().eval(), (torch.randn(3, 8),))
    report = result.report
    assert report.provider("aten::linear.default") == "aten"
    assert not report.retraced
    for phase in ("plugins", "capture", "decompose", "translate", "optimize"):
        assert phase in report.timings
    assert "aten::linear.default" in str(report)


def test_callable_and_exported_program_are_accepted():
    def f(x, y):
        return torch.relu(x) * y

    x, y = torch.randn(3), torch.randn(3)
    assert pt2onnx.export(f, (x, y)).verify(x, y).ok
    program = torch.export.export(MLP().eval(), (torch.randn(2, 8),))
    result = pt2onnx.export(program)
    assert result.report.capture == "given ExportedProgram"
    assert result.verify(torch.randn(2, 8)).ok


class _TakesKeywords(torch.nn.Module):
    def forward(self, x, scale=None, **extra):
        return x * extra["bias"].sum(0) + (0 if scale is None else scale)


@pytest.mark.parametrize(
    "dynamic_shapes",
    [
        "auto",
        {"x": {0: BATCH}, "extra": {"bias": {0: torch.export.Dim("rows")}}},  # torch's documented form
        {"x": {0: BATCH}, "bias": {0: torch.export.Dim("rows")}},
    ],
    ids=["auto", "nested", "flat"],
)
def test_keywords_caught_by_var_keyword_take_dynamic_shapes(dynamic_shapes):
    # torch.export 2.13 alone fails on any of these ("Must provide a tree_name"): transformers
    # 5.24 takes past_key_values this way.
    model = _TakesKeywords()
    result = pt2onnx.export(
        model, (), {"x": torch.randn(2, 3), "bias": torch.randn(4, 3)}, dynamic_shapes=dynamic_shapes
    )
    assert result.input_names == ["x", "bias"]
    shapes = [[str(d) for d in v.shape] for v in result.model.graph.inputs]
    assert shapes == (
        [["x_dim0", "x_dim1"], ["bias_dim0", "x_dim1"]] if dynamic_shapes == "auto" else [["batch", "3"], ["rows", "3"]]
    )
    check = result.verify(x=torch.randn(5, 3), bias=torch.randn(7, 3))
    assert check.ok, check
    assert "forward" not in vars(model)  # the capture's flat signature is gone again
