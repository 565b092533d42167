"""The builder infers each node signature's output types once, and infers them right.

``pt2onnx.builder.Builder`` keeps what ONNX shape inference said per node signature (op,
attributes, input types and shapes, small constant inputs). A later node with the same
signature takes the kept types; one that differs in anything inference reads must not.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
from onnxscript import GraphBuilder

from pt2onnx.builder import Builder


def _graph_builder(cls: type[GraphBuilder]) -> tuple[GraphBuilder, ir.Value, ir.Value]:
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape(["batch", 6, 4]))
    y = ir.Value(name="y", type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape([3, None]))
    graph = ir.Graph(inputs=[x, y], outputs=[], nodes=[], opset_imports={"": 23})
    return cls(graph), x, y


def _emit(builder: GraphBuilder, x: ir.Value, y: ir.Value) -> list[ir.Value]:
    """Nodes whose signatures repeat, and nodes that differ from them only in what inference reads."""
    op = builder.op
    return [
        op.Reshape(x, op.Constant(value=ir.tensor(np.array([0, 6, 4], dtype=np.int64)))),
        op.Reshape(x, op.Constant(value=ir.tensor(np.array([0, 6, 4], dtype=np.int64)))),
        # The same op on the same input types: only the constant shape's values differ.
        op.Reshape(x, op.Constant(value=ir.tensor(np.array([0, 4, 6], dtype=np.int64)))),
        op.Transpose(x, perm=[2, 0, 1]),
        op.Transpose(x, perm=[2, 0, 1]),
        # Only the attribute differs.
        op.Transpose(x, perm=[1, 2, 0]),
        op.ReduceSum(x, keepdims=1),
        # Only the input's dtype differs.
        op.Cast(op.Transpose(y, perm=[1, 0]), to=ir.DataType.DOUBLE),
        op.Cast(op.Transpose(y, perm=[1, 0]), to=ir.DataType.DOUBLE),
        op.Cast(op.Transpose(y, perm=[1, 0]), to=ir.DataType.FLOAT16),
        op.Shape(op.Transpose(x, perm=[2, 0, 1])),
    ]


def _described(values: list[ir.Value]) -> list[tuple[object, object]]:
    return [(value.type, None if value.shape is None else [str(dim) for dim in value.shape]) for value in values]


def test_kept_inferences_match_onnx_inference_node_for_node():
    ours = _described(_emit(*_graph_builder(Builder)))
    onnxscripts = _described(_emit(*_graph_builder(GraphBuilder)))
    assert ours == onnxscripts
    # The signatures that differ only in what inference reads got their own inferences.
    assert ours[2][1] == ["batch", "4", "6"] and ours[0][1] == ["batch", "6", "4"]
    assert ours[5][1] == ["6", "4", "batch"] and ours[3][1] == ["4", "batch", "6"]
    assert ours[9][0] == ir.TensorType(ir.DataType.FLOAT16) and ours[7][0] == ir.TensorType(ir.DataType.DOUBLE)
    assert ours[10][1] == ["3"]


def test_values_taking_a_kept_inference_do_not_share_its_shape():
    builder, x, y = _graph_builder(Builder)
    first, second = _emit(builder, x, y)[:2]
    assert first.shape is not second.shape
    assert first.shape == second.shape
