"""Attention's surroundings folded into ``Attention`` itself (opset 23).

``scaled_dot_product_attention`` translates to one ``Attention`` node on
``(batch, heads, seq, head_dim)`` tensors. Around it, transformers split the projections
into heads (``view`` + ``transpose``), repeat the key/value heads for grouped-query
attention (``repeat_kv``: unsqueeze, expand, reshape) and merge the heads back (transpose
+ reshape). ``Attention`` does all of that itself: it takes grouped key/value heads
directly, and takes ``(batch, seq, hidden)`` inputs with ``q_num_heads``/``kv_num_heads``,
returning ``(batch, seq, hidden)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx_ir as ir

from .graph import dims, graphs, ints, new_node, only_used_by, produced_by, prune, replace_value, same_dim

__all__ = ["fuse_attention_heads", "fuse_repeated_kv", "mask_spans_queries"]

_TO_HEADS = [0, 2, 1, 3]  # (batch, seq, heads, d) <-> (batch, heads, seq, d)


def _attention_nodes(model: ir.Model) -> list[tuple[ir.Graph | ir.Function, ir.Node]]:
    return [(g, n) for g in graphs(model) for n in g if n.op_type == "Attention" and n.domain == ""]


def _unrepeated(value: ir.Value | None) -> tuple[ir.Value, int] | None:
    """``(x, n)`` if ``value`` is ``repeat_kv(x, n)``: ``x[:, :, None].expand(b, h, n, s, d).reshape(b, h * n, s, d)``."""
    reshape = produced_by(value, "Reshape")
    expand = produced_by(reshape.inputs[0], "Expand") if reshape is not None else None
    unsqueeze = produced_by(expand.inputs[0], "Unsqueeze") if expand is not None else None
    if unsqueeze is None or ints(unsqueeze.inputs[1]) != [2]:
        return None
    x = unsqueeze.inputs[0]
    x_dims, out_dims, expanded = dims(x), dims(value), dims(expand.outputs[0])  # type: ignore[union-attr]
    if x_dims is None or out_dims is None or expanded is None or len(x_dims) != 4 or len(out_dims) != 4:
        return None
    heads, repeated = x_dims[1], out_dims[1]
    if not isinstance(heads, int) or not isinstance(repeated, int) or heads == 0 or repeated % heads:
        return None
    n = repeated // heads
    same = all(same_dim(x_dims[i], out_dims[i]) for i in (0, 2, 3))
    if not same or expanded != (x_dims[0], heads, n, x_dims[2], x_dims[3]):
        return None
    assert x is not None
    return x, n


def fuse_repeated_kv(model: ir.Model) -> None:
    """Feed ``Attention`` the grouped key/value heads instead of their ``repeat_kv`` copies."""
    for _, node in _attention_nodes(model):
        if len(node.inputs) < 3:
            continue
        key, value = _unrepeated(node.inputs[1]), _unrepeated(node.inputs[2])
        if key is None or value is None or key[1] != value[1]:
            continue
        repeated_key, repeated_value = node.inputs[1], node.inputs[2]
        node.replace_input_with(1, key[0])
        node.replace_input_with(2, value[0])
        prune(repeated_key)
        prune(repeated_value)


def _split_heads(value: ir.Value | None, user: ir.Node) -> tuple[ir.Value, int] | None:
    """``(x, heads)`` if ``value``, used only by ``user``, is ``x.view(b, s, heads, d).transpose(1, 2)``."""
    transpose = produced_by(value, "Transpose")
    if transpose is None or list(transpose.attributes.get_ints("perm", [])) != _TO_HEADS:
        return None
    reshape = produced_by(transpose.inputs[0], "Reshape")
    if reshape is None or not only_used_by(value, user) or not only_used_by(reshape.outputs[0], transpose):  # type: ignore[arg-type]
        return None
    x = reshape.inputs[0]
    x_dims, split = dims(x), dims(reshape.outputs[0])
    if x_dims is None or split is None or len(x_dims) != 3 or len(split) != 4:
        return None
    heads, size = split[2], split[3]
    if not (isinstance(heads, int) and isinstance(size, int) and x_dims[2] == heads * size):
        return None
    if not (same_dim(x_dims[0], split[0]) and same_dim(x_dims[1], split[1])):
        return None
    assert x is not None
    return x, heads


@dataclass(frozen=True)
class _Unsplit:
    """An attention input before its split into heads."""

    x: ir.Value  # (batch, seq, hidden)
    heads: int
    rotary: ir.Node | None  # a (batch, heads, seq, d) RotaryEmbedding between the split and the attention


def _unsplit(value: ir.Value | None, attention: ir.Node) -> _Unsplit | None:
    rotary = produced_by(value, "RotaryEmbedding")
    if rotary is None or "num_heads" in rotary.attributes:
        split = _split_heads(value, attention)
        return _Unsplit(*split, None) if split is not None else None
    if value is None or not only_used_by(value, attention):
        return None
    split = _split_heads(rotary.inputs[0], rotary)
    return _Unsplit(*split, rotary) if split is not None else None


def _materialize(unsplit: _Unsplit, graph: ir.Graph | ir.Function, before: ir.Node) -> ir.Value:
    """The attention's new input: ``x``, or the rotary embedding moved onto ``x``
    (``RotaryEmbedding`` takes ``(batch, seq, hidden)`` with ``num_heads`` too)."""
    if unsplit.rotary is None:
        return unsplit.x
    attributes = {k: a.value for k, a in unsplit.rotary.attributes.items()} | {"num_heads": unsplit.heads}
    node = new_node("RotaryEmbedding", [unsplit.x, *unsplit.rotary.inputs[1:]], attributes, like=unsplit.x)
    graph.insert_before(before, node)
    return node.outputs[0]


def _merging_reshape(attention: ir.Node) -> ir.Node | None:
    """The ``Reshape`` that the heads of ``attention``'s output are merged by, if only that uses them.

    It takes ``y.transpose(1, 2)``, ``(batch, seq, heads, d)``, to ``(batch, seq, heads * d)``
    or to any shape a row-major reshape of that reaches, such as ``(batch * seq, heads * d)``.
    """
    y = attention.outputs[0]
    uses = list(y.uses())
    transpose = uses[0].node if len(uses) == 1 and not y.is_graph_output() else None
    if transpose is None or transpose.op_type != "Transpose" or transpose.outputs[0].is_graph_output():
        return None
    if list(transpose.attributes.get_ints("perm", [])) != _TO_HEADS:
        return None
    uses = list(transpose.outputs[0].uses())
    reshape = uses[0].node if len(uses) == 1 else None
    if reshape is None or reshape.op_type != "Reshape":
        return None
    target = ints(reshape.inputs[1])
    y_dims = dims(y)
    if y_dims is None or len(y_dims) != 4 or not all(isinstance(d, int) for d in y_dims[1::2]):
        return None
    if target is not None and 0 not in target:
        return reshape  # a constant shape: it means the same for the merged tensor
    merged = dims(reshape.outputs[0])
    if merged is None or len(merged) != 3 or merged[2] != y_dims[1] * y_dims[3]:  # type: ignore[operator]
        return None
    return reshape if same_dim(merged[0], y_dims[0]) and same_dim(merged[1], y_dims[2]) else None


def mask_spans_queries(attention: ir.Node) -> bool:
    """Whether the mask, if any, has a row per query.

    onnxruntime (1.31) rejects a mask that broadcasts over the queries (``(b, 1, 1, t)``)
    once ``Attention`` takes 3-D inputs, though the ONNX spec allows it.
    """
    mask = attention.inputs[3] if len(attention.inputs) > 3 else None
    if mask is None:
        return True
    mask_dims, q_dims = dims(mask), dims(attention.inputs[0])
    return mask_dims is not None and q_dims is not None and len(mask_dims) >= 2 and same_dim(mask_dims[-2], q_dims[2])


def fuse_attention_heads(model: ir.Model) -> None:
    """Run ``Attention`` on ``(batch, seq, hidden)`` tensors where its inputs are split into heads only for it."""
    for graph, node in _attention_nodes(model):
        if len(node.inputs) not in (3, 4) or any(o.uses() or o.is_graph_output() for o in node.outputs[1:]):
            continue
        reshape = _merging_reshape(node)
        if reshape is None:
            continue
        unsplit = [_unsplit(value, node) for value in node.inputs[:3]]
        if any(u is None for u in unsplit) or not mask_spans_queries(node):
            continue
        q, k, v = (_materialize(u, graph, node) for u in unsplit if u is not None)
        attributes = {name: a.value for name, a in node.attributes.items()}
        attributes |= {"q_num_heads": unsplit[0].heads, "kv_num_heads": unsplit[1].heads}  # type: ignore[union-attr]
        y, merged = node.outputs[0], reshape.outputs[0]
        fused = new_node("Attention", [q, k, v, *node.inputs[3:]], attributes)
        fused.outputs[0].type = y.type
        fused.outputs[0].shape = ir.Shape([y.shape[0], y.shape[2], y.shape[1] * y.shape[3]])  # type: ignore[index]
        graph.insert_before(node, fused)
        result = fused.outputs[0]
        if dims(merged) != dims(result):
            again = new_node("Reshape", [result, reshape.inputs[1]], {"allowzero": 0}, like=merged)
            graph.insert_before(node, again)
            result = again.outputs[0]
        replace_value(merged, result)
