"""Grouped-query ``Attention`` in the form every major runtime compiles.

ONNX ``Attention`` (opset 23) takes grouped key/value heads in two equivalent forms:
4-D ``(batch, heads, seq, head_dim)`` inputs, or 3-D ``(batch, seq, heads * head_dim)``
inputs with ``q_num_heads``/``kv_num_heads``. onnxruntime runs both; OpenVINO (2026.4)
compiles the 3-D form only once the query has more heads than the key and the dims are
dynamic (its 4-D shape inference gives the output the key's head count; Qwen3 and
Gemma3 exported with ``dynamic_shapes="auto"`` did not compile). ``fuse_attention_heads``
already gives the 3-D form where the model splits heads just for attention (Llama); this
pass rewrites the grouped ``Attention`` nodes left in 4-D (a per-head norm between the
split and the attention, as Qwen3 and Gemma3 have) into the 3-D form, with the
transposes and reshapes around it.
"""

from __future__ import annotations

import onnx_ir as ir

from .attention import mask_spans_queries
from .graph import dims, graphs, new_node, produced_by, replace_value

__all__ = ["portable_grouped_attention"]

_TO_SEQ_FIRST = [0, 2, 1, 3]  # (batch, heads, seq, d) <-> (batch, seq, heads, d)


def _grouped_4d(node: ir.Node) -> tuple[int, int, int] | None:
    """``(q heads, kv heads, value head size)`` of a 4-D ``Attention`` with fewer key/value than query heads."""
    if node.op_type != "Attention" or node.domain != "" or len(node.inputs) not in (3, 4):
        return None
    if "q_num_heads" in node.attributes or any(o.uses() or o.is_graph_output() for o in node.outputs[1:]):
        return None
    shapes = [dims(v) for v in node.inputs[:3]]
    if any(s is None or len(s) != 4 for s in shapes):
        return None
    (_, hq, _, e), (_, hkv, _, ek), (_, hv, _, ev) = shapes  # type: ignore[misc]
    if not all(isinstance(d, int) for d in (hq, hkv, hv, e, ek, ev)) or hq == hkv or hkv != hv:
        return None
    return hq, hkv, ev  # type: ignore[return-value]


def _seq_first(graph: ir.Graph | ir.Function, node: ir.Node, x: ir.Value | None) -> ir.Value:
    """``x`` as ``(batch, seq, heads, d)``: the input of the model's own head transpose where
    there is one (the two transposes cancel), else a new transpose."""
    transpose = produced_by(x, "Transpose")
    if transpose is not None and transpose.attributes.get_ints("perm") == _TO_SEQ_FIRST:
        source = transpose.inputs[0]
        assert source is not None
        return source
    seq_first = new_node("Transpose", [x], {"perm": _TO_SEQ_FIRST})
    graph.insert_before(node, seq_first)
    return seq_first.outputs[0]


def _merged_heads(y: ir.Value, width: int) -> ir.Value | None:
    """The ``(batch, seq, heads * d)`` value the model makes of ``y`` by a transpose and a
    reshape (``out.transpose(1, 2).reshape(b, s, -1)``), when those are all that use it."""
    uses = list(y.uses())
    if y.is_graph_output() or len(uses) != 1:
        return None
    transpose = uses[0].node
    if transpose.op_type != "Transpose" or transpose.attributes.get_ints("perm") != _TO_SEQ_FIRST:
        return None
    seq_first = transpose.outputs[0]
    uses = list(seq_first.uses())
    if seq_first.is_graph_output() or len(uses) != 1:
        return None
    reshape = uses[0].node
    merged = reshape.outputs[0] if reshape.op_type == "Reshape" else None
    shape = dims(merged)
    if merged is None or shape is None or len(shape) != 3 or shape[2] != width:
        return None
    return merged


def portable_grouped_attention(model: ir.Model) -> None:
    """Give each grouped 4-D ``Attention`` its 3-D form (see the module's docstring)."""
    for graph in graphs(model):
        for node in list(graph):
            heads = _grouped_4d(node)
            if heads is None or not mask_spans_queries(node):
                continue
            hq, hkv, ev = heads
            merged = new_node("Constant", [], {"value_ints": [0, 0, -1]})
            graph.insert_before(node, merged)
            flat = []
            for x in node.inputs[:3]:
                packed = new_node("Reshape", [_seq_first(graph, node, x), merged.outputs[0]])
                graph.insert_before(node, packed)
                flat.append(packed.outputs[0])
            attributes = {name: a.value for name, a in node.attributes.items()}
            attributes |= {"q_num_heads": hq, "kv_num_heads": hkv}
            attention = new_node("Attention", [*flat, *node.inputs[3:]], attributes)
            y, result = node.outputs[0], attention.outputs[0]
            result.type = y.type
            result.shape = ir.Shape([y.shape[0], y.shape[2], hq * ev])  # type: ignore[index]
            graph.insert_before(node, attention)
            merged_by_model = _merged_heads(y, hq * ev)
            if merged_by_model is not None:
                # The model merges the heads itself (transpose, reshape): the 3-D output is that.
                replace_value(merged_by_model, result)
                continue
            split = new_node("Constant", [], {"value_ints": [0, 0, hq, ev]})
            unpacked = new_node("Reshape", [result, split.outputs[0]])
            heads_first = new_node("Transpose", [unpacked.outputs[0]], {"perm": _TO_SEQ_FIRST}, like=y)
            for n in (split, unpacked, heads_first):
                graph.insert_before(node, n)
            replace_value(y, heads_first.outputs[0])  # prunes the 4-D node
