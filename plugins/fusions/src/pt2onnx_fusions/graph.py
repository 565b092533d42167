"""Reading the ONNX graph a rewrite matches on: producers, constants, shapes, uses."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import onnx_ir as ir

__all__ = [
    "Dim",
    "dims",
    "graphs",
    "ints",
    "new_node",
    "only_used_by",
    "produced_by",
    "prune",
    "replace_node",
    "replace_value",
    "same_dim",
    "scalar",
]

#: One dimension of a shape: an int, or a named symbol (``None`` when unknown).
Dim = int | str | None


def graphs(model: ir.Model) -> Iterator[ir.Graph | ir.Function]:
    """The main graph, every subgraph in it, and every local function."""
    yield from model.graphs()
    yield from model.functions.values()


def produced_by(value: ir.Value | None, op_type: str) -> ir.Node | None:
    """The node producing ``value`` if it is a default-domain ``op_type``."""
    node = value.producer() if value is not None else None
    if node is None or node.op_type != op_type or node.domain not in ("", "ai.onnx"):
        return None
    return node


def only_used_by(value: ir.Value, node: ir.Node) -> bool:
    """Whether ``node`` is the only consumer of ``value`` (and the graph does not return it)."""
    return not value.is_graph_output() and all(use.node is node for use in value.uses())


def _constant(value: ir.Value | None) -> np.ndarray | None:
    if value is None:
        return None
    if value.const_value is not None:
        return value.const_value.numpy()
    node = produced_by(value, "Constant")
    if node is None:
        return None
    attr = node.attributes.get("value")
    if attr is not None and isinstance(attr.value, ir.TensorProtocol):
        return attr.value.numpy()
    for name in ("value_ints", "value_int", "value_floats", "value_float"):
        attr = node.attributes.get(name)
        if attr is not None:
            return np.asarray(attr.value)
    return None


def ints(value: ir.Value | None) -> list[int] | None:
    """The constant integer tensor ``value`` holds, flattened; ``None`` if it is not one."""
    array = _constant(value)
    if array is None or array.dtype.kind not in "iu":
        return None
    return [int(v) for v in array.reshape(-1)]


def scalar(value: ir.Value | None) -> float | None:
    """The constant one-element tensor ``value`` holds, as a float."""
    array = _constant(value)
    if array is None or array.size != 1:
        return None
    return float(array.reshape(()))


def dims(value: ir.Value | None) -> tuple[Dim, ...] | None:
    """The value's shape as ints and symbol names, ``None`` when its rank is unknown."""
    if value is None or value.shape is None:
        return None
    return tuple(d if isinstance(d, int) else d.value for d in value.shape)


def same_dim(a: Dim, b: Dim) -> bool:
    """Whether two dims are provably equal (the same int, or the same named symbol)."""
    return a is not None and a == b


def new_node(
    op_type: str,
    inputs: Sequence[ir.Value | None],
    attributes: dict[str, int | float | str | Sequence[int]] | None = None,
    *,
    like: ir.Value | None = None,
    name: str | None = None,
) -> ir.Node:
    """A default-domain node with one output, typed and shaped like ``like`` when given."""
    attrs = [ir.convenience.convert_attribute(k, v) for k, v in (attributes or {}).items()]
    node = ir.Node("", op_type, inputs, attributes=attrs, num_outputs=1, name=name)
    out = node.outputs[0]
    if like is not None:
        out.type, out.shape = like.type, like.shape
    if name is not None:
        out.name = name
    return node


def replace_value(old: ir.Value, new: ir.Value) -> None:
    """Every use of ``old`` now reads ``new``; then prune ``old``.

    A graph output keeps its name: ``new`` takes it over, unless ``new`` is a graph input
    or initializer (its name is the model's interface), which an ``Identity`` then outputs.
    """
    if old.is_graph_output():
        if new.is_graph_input() or new.is_initializer() or new.is_graph_output():
            identity = new_node("Identity", [new], like=old)
            producer = old.producer()
            assert producer is not None and producer.graph is not None
            producer.graph.insert_after(producer, identity)
            new = identity.outputs[0]
        name = old.name
        old.name = None
        new.name = name
    old.replace_all_uses_with(new, replace_graph_outputs=True)
    prune(old)


def prune(value: ir.Value | None) -> None:
    """Remove the producer of ``value`` if nothing uses its outputs any more, and so on upward.

    A rewrite that bypasses a chain of nodes prunes it, so the next rewrite's
    single-use checks see the graph as it now is.
    """
    node = value.producer() if value is not None else None
    if node is None or node.graph is None:
        return
    if any(out.uses() or out.is_graph_output() for out in node.outputs):
        return
    inputs = list(node.inputs)
    node.graph.remove(node, safe=True)
    for source in inputs:
        prune(source)


def replace_node(old: ir.Node, new: ir.Node) -> None:
    """Put ``new`` where the one-output node ``old`` was, computing its output, and prune what only ``old`` used.

    ``new``'s output takes over ``old``'s name, type and shape, also when it is a graph output.
    """
    assert old.graph is not None
    inputs = list(old.inputs)
    out, replacement = old.outputs[0], new.outputs[0]
    ir.convenience.replace_nodes_and_values(old.graph, old, [old], [new], [out], [replacement])
    for source in inputs:
        prune(source)
