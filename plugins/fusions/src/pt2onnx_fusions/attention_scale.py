"""A constant factor on the query or key folded into ``Attention``'s ``scale`` (opset 23).

Whisper, BART, OPT and other encoder-decoders scale the query by ``head_dim ** -0.5``
before attention (``q_proj(x) * self.scaling``) and then attend with ``scale=1``: a ``Mul``
over the whole query on every layer. ``Attention`` scales ``Q @ K^T`` itself, and
``(c Q) K^T s = Q K^T (c s)`` (the mask, the soft cap and the softmax all come after the
scaling), so the factor becomes part of its ``scale``.
"""

from __future__ import annotations

import math

import onnx_ir as ir

from .graph import dims, graphs, only_used_by, produced_by, prune, scalar

__all__ = ["fold_attention_scale"]


def _default_scale(node: ir.Node) -> float | None:
    """``Attention``'s ``scale``: the attribute, else ``1 / sqrt(head size)`` where the query's shape gives it."""
    attr = node.attributes.get("scale")
    if attr is not None:
        return float(attr.value)
    query = dims(node.inputs[0])
    if query is None or not isinstance(query[-1], int):
        return None
    if len(query) == 4:
        size = query[-1]
    elif len(query) == 3 and (heads := node.attributes.get_int("q_num_heads", 0)):
        size = query[-1] // heads
    else:
        return None
    return 1.0 / math.sqrt(size)


def _scaled(value: ir.Value | None, attention: ir.Node) -> tuple[ir.Value, float] | None:
    """``(x, c)`` if ``value`` is ``x * c`` (either order), ``c`` a one-element constant, and
    ``attention`` its only reader."""
    mul = produced_by(value, "Mul")
    if mul is None or value is None or not only_used_by(value, attention):
        return None
    for x, c in ((mul.inputs[0], mul.inputs[1]), (mul.inputs[1], mul.inputs[0])):
        factor = scalar(c)
        if x is None or factor is None or dims(x) != dims(value):
            continue  # a factor that broadcasts x to a larger shape is not a plain scaling
        return x, factor
    return None


def fold_attention_scale(model: ir.Model) -> None:
    """Rewrite ``Attention(q * c, k * d, v, scale=s)`` to ``Attention(q, k, v, scale=c * d * s)``."""
    for graph in graphs(model):
        for node in list(graph):
            if node.op_type != "Attention" or node.domain != "" or len(node.inputs) < 3:
                continue
            if any(out.uses() or out.is_graph_output() for out in node.outputs[3:]):
                continue  # the raw ``Q @ K^T`` output is read: it would lose the factor
            scale = _default_scale(node)
            if scale is None:
                continue
            folded = False
            # The key's factor also scales the cache the node returns (present_key), and not
            # the past keys it is concatenated to: only a key with neither is folded.
            key_too = len(node.inputs) < 5 or node.inputs[4] is None
            key_too = key_too and not any(out.uses() or out.is_graph_output() for out in node.outputs[1:2])
            for index in (0, 1) if key_too else (0,):
                found = _scaled(node.inputs[index], node)
                if found is None:
                    continue
                scaled = node.inputs[index]
                node.replace_input_with(index, found[0])
                prune(scaled)
                scale *= found[1]
                folded = True
            if folded:
                node.attributes["scale"] = ir.AttrFloat32("scale", scale)
