"""``nn.MultiheadAttention``'s sequence-first computation as one batch-first ``Attention`` (opset 23).

torch's ``multi_head_attention_forward`` works on ``(seq, batch, embed)`` (with
``batch_first=True`` the module transposes to that and back), projects q, k and v with
one packed matrix, splits the result (unflatten, unsqueeze, transpose, squeeze,
select), folds the heads into the batch
(``view(seq, batch * heads, d)``, transpose, ``view(batch, heads, seq, d)``), and undoes
the layout after attention around the output projection (permute, reshape, Gemm,
reshape): some thirty nodes that only move data. As a whole it is: project the
batch-first input, split it in three, attend with ``q_num_heads``, project back (with a
``Transpose`` at each end for a sequence-first module).
"""

from __future__ import annotations

import functools
from typing import TypeGuard

import numpy as np
import onnx_ir as ir

from .attention import mask_spans_queries
from .graph import dims, graphs, ints, new_node, only_used_by, produced_by, replace_value, same_dim

__all__ = ["fuse_packed_attention"]


def _perm(node: ir.Node | None, perm: list[int]) -> TypeGuard[ir.Node]:
    return node is not None and list(node.attributes.get_ints("perm", [])) == perm


def _single_consumer(value: ir.Value, op_type: str) -> ir.Node | None:
    uses = list(value.uses())
    if len(uses) != 1 or value.is_graph_output() or uses[0].node.op_type != op_type or uses[0].node.domain != "":
        return None
    return uses[0].node


def _heads_folded(value: ir.Value | None, attention: ir.Node) -> tuple[ir.Value, int] | None:
    """``(g, heads)`` if ``value`` is ``g.view(s, b * heads, d).transpose(0, 1).view(b, heads, s, d)``, ``g`` being ``(s, b, e)``.

    With one head the first view is a no-op, already gone.
    """
    unfold = produced_by(value, "Reshape")
    transpose = produced_by(unfold.inputs[0], "Transpose") if unfold is not None else None
    if value is None or transpose is None or not _perm(transpose, [1, 0, 2]) or not only_used_by(value, attention):
        return None
    folded = transpose.inputs[0]
    fold = produced_by(folded, "Reshape")
    g = fold.inputs[0] if fold is not None else folded
    out, folded_dims, g_dims = dims(value), dims(folded), dims(g)
    if out is None or folded_dims is None or g_dims is None or (len(out), len(folded_dims), len(g_dims)) != (4, 3, 3):
        return None
    batch, heads, seq, size = out
    if fold is None and heads != 1:
        return None
    if not (isinstance(heads, int) and isinstance(size, int) and g_dims[2] == heads * size and folded_dims[2] == size):
        return None
    if not (same_dim(g_dims[0], seq) and same_dim(folded_dims[0], seq) and same_dim(g_dims[1], batch)):
        return None
    assert g is not None
    return g, heads


def _packed_projection(parts: list[ir.Value]) -> tuple[ir.Value, ir.Value, ir.Value | None, bool] | None:
    """``(x, weight, bias, batch_first)`` if ``parts`` are q, k, v selected from ``x @ weight + bias``
    split in three, ``x`` being ``(seq, batch, e)``, or ``(batch, seq, e)`` transposed to that."""
    selects = [produced_by(p, "Gather") for p in parts]
    if any(s is None or s.attributes.get_int("axis", 0) != 0 for s in selects):
        return None
    packed = selects[0].inputs[0]  # type: ignore[union-attr]
    if [ints(s.inputs[1]) for s in selects] != [[0], [1], [2]] or any(s.inputs[0] is not packed for s in selects):  # type: ignore[union-attr]
        return None
    squeeze = produced_by(packed, "Squeeze")
    transpose = produced_by(squeeze.inputs[0], "Transpose") if squeeze is not None else None
    unsqueeze = produced_by(transpose.inputs[0], "Unsqueeze") if _perm(transpose, [3, 1, 2, 0, 4]) else None
    unflatten = produced_by(unsqueeze.inputs[0], "Reshape") if unsqueeze is not None else None
    if squeeze is None or unflatten is None or ints(squeeze.inputs[1]) != [3] or ints(unsqueeze.inputs[1]) != [0]:  # type: ignore[union-attr]
        return None
    projected = unflatten.inputs[0]
    split, flat = dims(unflatten.outputs[0]), dims(projected)
    if split is None or flat is None or len(split) != 4 or split[2] != 3 or flat[-1] != 3 * split[3]:  # type: ignore[operator]
        return None
    bias = None
    add = produced_by(projected, "Add")
    if add is not None:
        projected, bias = add.inputs
        bias_dims = dims(bias)
        if bias_dims is None or len(bias_dims) != 1:
            return None
    matmul = produced_by(projected, "MatMul")
    if matmul is None or len(dims(matmul.inputs[1]) or ()) != 2 or len(dims(matmul.inputs[0]) or ()) != 3:
        return None
    x, weight = matmul.inputs
    assert x is not None and weight is not None
    transpose = produced_by(x, "Transpose")
    if _perm(transpose, [1, 0, 2]) and transpose is not None and transpose.inputs[0] is not None:
        return transpose.inputs[0], weight, bias, True
    return x, weight, bias, False


def _output_projection(attention: ir.Node) -> tuple[ir.Value, ir.Node, bool] | None:
    """``(result, gemm, batch_first)`` if the output goes ``permute(2, 0, 1, 3)``, flatten, ``Gemm``,
    unflatten to ``(seq, batch, e)`` and, batch first, ``transpose(0, 1)``, each step used only by the next."""
    permute = _single_consumer(attention.outputs[0], "Transpose")
    flatten = _single_consumer(permute.outputs[0], "Reshape") if _perm(permute, [2, 0, 1, 3]) else None
    gemm = _single_consumer(flatten.outputs[0], "Gemm") if flatten is not None else None
    unflatten = _single_consumer(gemm.outputs[0], "Reshape") if gemm is not None else None
    if unflatten is None or gemm is None or gemm.attributes.get_int("transA", 0) != 0:
        return None
    transpose = _single_consumer(unflatten.outputs[0], "Transpose")
    batch_first = _perm(transpose, [1, 0, 2])
    if gemm.attributes.get_float("alpha", 1.0) != 1.0 or gemm.attributes.get_float("beta", 1.0) != 1.0:
        return None
    bias = gemm.inputs[2] if len(gemm.inputs) > 2 else None
    if bias is not None and len(dims(bias) or ()) != 1:
        return None
    result = transpose.outputs[0] if batch_first else unflatten.outputs[0]  # type: ignore[union-attr]
    y, out = dims(attention.outputs[0]), dims(result)
    if y is None or out is None or len(out) != 3:
        return None
    batch, seq = (out[0], out[1]) if batch_first else (out[1], out[0])
    if not (same_dim(batch, y[0]) and same_dim(seq, y[2])):
        return None
    return result, gemm, batch_first


def _transpose(tensor: ir.TensorProtocol) -> ir.TensorProtocol:
    return ir.Tensor(np.ascontiguousarray(tensor.numpy().T), dtype=tensor.dtype)


def _transposed_weight(
    graph: ir.Graph | ir.Function, weight: ir.Value, made: dict[ir.Value, ir.Value]
) -> ir.Value | None:
    """``weight.T`` as an initializer computed when the model is saved, if ``weight`` is one."""
    if weight not in made:
        tensor = weight.const_value
        if not isinstance(graph, ir.Graph) or not weight.is_initializer() or tensor is None:
            return None
        shape = ir.Shape(list(reversed(tensor.shape.numpy())))
        lazy = ir.LazyTensor(functools.partial(_transpose, tensor), dtype=tensor.dtype, shape=shape)
        value = ir.Value(name=f"{weight.name}.transposed", type=weight.type, shape=shape, const_value=lazy)
        graph.register_initializer(value)
        made[weight] = value
    return made[weight]


def _batch_first(
    attention: ir.Node,
    x: ir.Value,
    weight: ir.Value,
    bias: ir.Value | None,
    heads: int,
    embed: int,
    out_weight: ir.Value,
    out_bias: ir.Value | None,
    layout: tuple[bool, bool],
) -> list[ir.Node]:
    """``(x @ weight + bias)``, split in three, attended, ``@ out_weight + out_bias``: the nodes, typed.

    ``layout`` says whether ``x`` and the result are batch first; where not, a ``Transpose``
    takes ``x`` to batch first and one takes the result back.
    """
    y = attention.outputs[0].shape
    assert y is not None
    batch, seq, value_type = y[0], y[2], attention.outputs[0].type

    def typed(node: ir.Node, last: int | ir.SymbolicDim, batch_first: bool = True) -> ir.Node:
        for out in node.outputs:
            out.type, out.shape = value_type, ir.Shape([batch, seq, last] if batch_first else [seq, batch, last])
        return node

    nodes = []
    if not layout[0]:
        nodes.append(typed(new_node("Transpose", [x], {"perm": [1, 0, 2]}), x.shape[-1]))  # type: ignore[index]
        x = nodes[-1].outputs[0]
    nodes.append(typed(new_node("MatMul", [x, weight]), 3 * embed))
    if bias is not None:
        nodes.append(typed(new_node("Add", [nodes[-1].outputs[0], bias]), 3 * embed))
    sizes = new_node("Constant", [], {"value_ints": [embed] * 3})
    split = ir.Node("", "Split", [nodes[-1].outputs[0], sizes.outputs[0]], [ir.AttrInt64("axis", -1)], num_outputs=3)
    attributes = {k: a.value for k, a in attention.attributes.items()} | {"q_num_heads": heads, "kv_num_heads": heads}
    fused = new_node("Attention", list(split.outputs), attributes)
    nodes += [sizes, typed(split, embed), typed(fused, embed)]
    nodes.append(typed(new_node("MatMul", [fused.outputs[0], out_weight]), embed))
    if out_bias is not None:
        nodes.append(typed(new_node("Add", [nodes[-1].outputs[0], out_bias]), embed))
    if not layout[1]:
        nodes.append(typed(new_node("Transpose", [nodes[-1].outputs[0]], {"perm": [1, 0, 2]}), embed, False))
    return nodes


def fuse_packed_attention(model: ir.Model) -> None:
    """Rewrite each sequence-first ``nn.MultiheadAttention`` block into batch-first ``MatMul``, ``Split``, ``Attention``."""
    transposed: dict[ir.Value, ir.Value] = {}
    for graph in graphs(model):
        for node in [n for n in graph if n.op_type == "Attention" and n.domain == ""]:
            if len(node.inputs) not in (3, 4) or any(o.uses() or o.is_graph_output() for o in node.outputs[1:]):
                continue
            if not mask_spans_queries(node):  # the mask keeps its (batch, heads, q, k) layout
                continue
            folded = [_heads_folded(v, node) for v in node.inputs[:3]]
            if any(f is None for f in folded) or len({f[1] for f in folded if f is not None}) != 1:
                continue
            projection = _packed_projection([f[0] for f in folded if f is not None])
            output = _output_projection(node)
            if projection is None or output is None:
                continue
            x, weight, bias, batch_first_in = projection
            result, gemm, batch_first_out = output
            out_weight = gemm.inputs[1]
            assert out_weight is not None
            if gemm.attributes.get_int("transB", 0):
                out_weight = _transposed_weight(graph, out_weight, transposed)
                if out_weight is None:
                    continue
            heads, embed = folded[0][1], dims(folded[0][0])[2]  # type: ignore[index]
            assert isinstance(embed, int)
            out_bias = gemm.inputs[2] if len(gemm.inputs) > 2 else None
            layout = (batch_first_in, batch_first_out)
            nodes = _batch_first(node, x, weight, bias, heads, embed, out_weight, out_bias, layout)
            graph.insert_before(node, nodes)
            replace_value(result, nodes[-1].outputs[0])
