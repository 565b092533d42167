"""The sum a ``LayerNormalization`` reads as ``Sum``, not ``Add``: onnxruntime's slow fusion avoided.

onnxruntime (1.32, CPU provider, ``ORT_ENABLE_ALL``, its default) fuses ``Add`` followed by
``LayerNormalization`` into its contrib ``SkipLayerNormalization``, whose CPU kernel runs
4-10x slower than the two standard ops it replaces (``benchmarks/studies/skip_layer_norm.py``:
36 µs against 8 at 2x16x256, 769 against 98 at 2x128x768, one thread). Every post-norm
transformer layer (BERT, ``nn.TransformerEncoderLayer``) has two such pairs, a pre-norm one
its final norm. ``Sum`` of two inputs is the same operation (broadcasting included), and
the fusion matches ``Add`` only, so the graph keeps the fast kernels. Switch the pass off
(``optimize={"sum_before_layer_norm": False}``) where the fused kernel is the faster one.
"""

from __future__ import annotations

import onnx_ir as ir

from .graph import graphs, new_node, produced_by, replace_node

__all__ = ["sum_before_layer_norm"]


def sum_before_layer_norm(model: ir.Model) -> None:
    """Rewrite ``LayerNormalization(Add(a, b), ...)`` to ``LayerNormalization(Sum(a, b), ...)``."""
    for graph in graphs(model):
        for node in list(graph):
            if node.op_type != "LayerNormalization" or node.domain != "":
                continue
            add = produced_by(node.inputs[0], "Add")
            if add is None or any(value is None for value in add.inputs):
                continue
            replace_node(add, new_node("Sum", list(add.inputs), like=add.outputs[0]))
