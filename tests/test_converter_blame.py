"""A converter that emits a wrong shape stops the export, naming the plugin, the op, the FX node and the line.

Issue #28 ("Converter blame"): a converter emitting a node ONNX rejects for a 0-d input
(``ReduceSum`` over axis 0 of a scalar, ``Concat`` of scalars) exported an invalid model
whose failure came from onnxruntime naming only the ONNX node; a wrong size on a
dynamic dim was caught only by ``verify``. The checks and when each runs are in
docs/plugins.md ("What pt2onnx checks of a converter's output").
"""

from __future__ import annotations

import re

import onnx
import pytest
import torch
from torch.export import Dim

import pt2onnx
from pt2onnx.errors import ConversionError
from pt2onnx.plugin import hookimpl

BATCH, SEQ = Dim("batch"), Dim("seq")


class Plugin:
    """Converters given by op name."""

    def __init__(self, **converters):
        self.converters = converters

    @hookimpl
    def pt2onnx_register_converters(self, register):
        for op, fn in self.converters.items():
            register.converter(op, fn)


def _blames(error: ConversionError, converter: str, node: str, op: str, line: str) -> None:
    """The message names the converter, its plugin, the FX node, the aten op and the user's line."""
    message = str(error)
    assert message.startswith("[translate] converter ") and f".{converter} from plugin " in message, message
    assert re.search(r"from plugin '[\w.]*test_converter_blame\.Plugin'", message), message
    assert f"FX node: {node}\n" in message and f"op: {op}\n" in message, message
    assert "test_converter_blame.py:" in message and line in message, message
    assert "this is a bug in plugin" in message


# -- 0-d inputs: nodes ONNX rejects ----------------------------------------------------------


def sum_over_listed_dims(op, self, dim, keepdim=False, *, dtype=None):
    # Wrong for a 0-d tensor: torch takes dim 0 (or -1) of a scalar, ONNX has no axis there.
    return op.ReduceSum(self, op.constant(list(dim)), keepdims=int(keepdim))


def stack_as_concat(op, tensors, dim=0):
    # Wrong: stacking adds a dim, concatenating does not (and a 0-d tensor has no axis 0).
    return op.Concat(*tensors, axis=dim)


class SumOfScalar(torch.nn.Module):
    def forward(self, x):
        return x.sum(0) * 2  # the line of the sum


class StackOfScalars(torch.nn.Module):
    def forward(self, x, y):
        return torch.stack([x, y]) + 1  # the line of the stack


def test_a_reduction_over_axis_0_of_a_scalar_stops_the_export():
    with pytest.raises(ConversionError) as info:
        pt2onnx.export(
            SumOfScalar(), (torch.tensor(3.0),), plugins=[Plugin(**{"aten::sum.dim_IntList": sum_over_listed_dims})]
        )
    assert "emitted a ReduceSum node that ONNX rejects (inputs FLOAT[], INT64[1])" in str(info.value)
    assert "axis must be in [-rank, rank-1]" in str(info.value)
    _blames(info.value, "sum_over_listed_dims", "sum_1", "aten::sum.dim_IntList", "return x.sum(0) * 2")


def test_a_concat_of_scalars_stops_the_export():
    scalars = (torch.tensor(1.0), torch.tensor(2.0))
    with pytest.raises(ConversionError) as info:
        pt2onnx.export(StackOfScalars(), scalars, plugins=[Plugin(**{"aten::stack.default": stack_as_concat})])
    assert "emitted a Concat node that ONNX rejects (inputs FLOAT[], FLOAT[])" in str(info.value)
    _blames(info.value, "stack_as_concat", "stack", "aten::stack.default", "return torch.stack([x, y]) + 1")


def test_the_whole_model_check_blames_a_rejected_node_too(monkeypatch):
    # The same converter with the check after each converter off: ONNX's shape inference over
    # the translated model finds the node and maps it back to the converter that emitted it.
    monkeypatch.setattr("pt2onnx.translate._check_emitted", lambda *args: None)
    scalars = (torch.tensor(1.0), torch.tensor(2.0))
    with pytest.raises(ConversionError) as info:
        pt2onnx.export(StackOfScalars(), scalars, plugins=[Plugin(**{"aten::stack.default": stack_as_concat})])
    assert "emitted a Concat node (inputs FLOAT[], FLOAT[]) that ONNX shape inference rejects" in str(info.value)
    _blames(info.value, "stack_as_concat", "stack", "aten::stack.default", "return torch.stack([x, y]) + 1")


# -- dynamic dims: sizes torch knows ----------------------------------------------------------


def sum_over_the_first_dim(op, self, dim, keepdim=False, *, dtype=None):
    return op.ReduceSum(self, op.constant([0]), keepdims=int(keepdim))  # whatever dim torch asked for


def view_in_reverse(op, self, size):
    return op.Reshape(self, op.shape_tensor(list(reversed(size))))  # sizes in the wrong order


class RowSums(torch.nn.Module):
    def forward(self, x):
        return x.sum(1) + 1  # the line of the row sums


class Split(torch.nn.Module):
    def forward(self, x):
        return x.view(x.shape[0], 2, 3) * 2  # the line of the view


def test_an_input_dim_where_torch_has_a_static_size_stops_the_export():
    # The converter's own node says its output has the size of seq; torch says 3 rows.
    with pytest.raises(ConversionError) as info:
        pt2onnx.export(
            RowSums(),
            (torch.randn(3, 5),),
            dynamic_shapes=({1: SEQ},),
            plugins=[Plugin(**{"aten::sum.dim_IntList": sum_over_the_first_dim})],
        )
    assert "returned shape [seq] where torch says shape [3]" in str(info.value)
    _blames(info.value, "sum_over_the_first_dim", "sum_1", "aten::sum.dim_IntList", "return x.sum(1) + 1")


class AdaptivePoolBackward(torch.nn.Module):
    def forward(self, grad, x):
        return torch.ops.aten._adaptive_avg_pool2d_backward(grad, x)


def test_an_input_dim_where_torch_has_another_inputs_is_no_claim():
    # torch keeps grad_output's and self's dims apart (no guard makes them one); the
    # backward's kernel requires them equal, so the converter's [grad_output dims] is right.
    grad, x = torch.randn(2, 3, 1, 1), torch.randn(2, 3, 4, 4)
    result = pt2onnx.export(AdaptivePoolBackward(), (grad, x), dynamic_shapes="auto")
    assert result.verify(grad, x).ok


def test_a_shape_computed_at_run_time_is_checked_against_torchs():
    # Reshape to a shape tensor built from a dynamic size: only inference over the whole
    # model, propagating the shape's values, knows the converter's output is [3, 2, batch].
    with pytest.raises(ConversionError) as info:
        pt2onnx.export(
            Split(),
            (torch.randn(4, 6),),
            dynamic_shapes=({0: BATCH},),
            plugins=[Plugin(**{"aten::view.default": view_in_reverse})],
        )
    message = str(info.value)
    assert "returned shape [3, 2, ?] where torch says shape [batch, 2, 3]" in message
    assert "(found by ONNX shape inference over the whole model)" in message
    _blames(info.value, "view_in_reverse", "view", "aten::view.default", "return x.view(x.shape[0], 2, 3) * 2")


# -- what the right converters export ---------------------------------------------------------


def test_right_converters_on_scalars_and_dynamic_dims_export_a_model_onnx_accepts():
    scalars = (torch.tensor(1.0), torch.tensor(2.0))
    stacked = pt2onnx.export(StackOfScalars(), scalars)
    summed = pt2onnx.export(SumOfScalar(), (torch.tensor(3.0),))
    rows = pt2onnx.export(RowSums(), (torch.randn(3, 5),), dynamic_shapes=({0: BATCH, 1: SEQ},))
    split = pt2onnx.export(Split(), (torch.randn(4, 6),), dynamic_shapes=({0: BATCH},))
    for result in (stacked, summed, rows, split):
        onnx.checker.check_model(result.model_proto, full_check=True)
        # onnxscript's note of a node its inference rejected is not carried into the model.
        assert not any("pkg.onnxscript.shape_inference_error" in n.metadata_props for n in result.model.graph)
    assert stacked.verify(*scalars).ok and rows.verify(torch.randn(4, 7)).ok and split.verify(torch.randn(5, 6)).ok
