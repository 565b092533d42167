"""``Gemm`` on flattened leading dims back to one ``MatMul`` (+ ``Add``) on the unflattened tensor.

``addmm(bias, x.view(-1, k), w).view(b, s, m)`` (GPT-2's ``Conv1D``, and ``linear``
on 3-D inputs after a re-trace) translates to Reshape, Gemm, Reshape. ``MatMul`` takes
any number of leading dims itself, so two of the three nodes are only bookkeeping.
"""

from __future__ import annotations

import onnx_ir as ir

from .graph import dims, graphs, new_node, only_used_by, produced_by, replace_value, same_dim

__all__ = ["unflatten_gemm"]


def _flattened(gemm: ir.Node) -> ir.Value | None:
    """``x`` if ``gemm``'s first input is ``x`` with its leading dims merged into one, used only there."""
    reshape = produced_by(gemm.inputs[0], "Reshape")
    if reshape is None or not only_used_by(reshape.outputs[0], gemm):
        return None
    x = reshape.inputs[0]
    x_dims, flat = dims(x), dims(reshape.outputs[0])
    if x_dims is None or flat is None or len(x_dims) < 2 or len(flat) != 2:
        return None
    return x if same_dim(flat[1], x_dims[-1]) else None


def unflatten_gemm(model: ir.Model) -> None:
    """Rewrite ``Reshape(Gemm(Reshape(x, (-1, k)), w, c), (*lead, m))`` to ``MatMul(x, w) + c``."""
    for graph in graphs(model):
        for gemm in list(graph):
            if gemm.op_type != "Gemm" or gemm.domain != "":
                continue
            a = gemm.attributes
            if a.get_int("transA", 0) or a.get_int("transB", 0):
                continue  # a transposed weight would need a Transpose node at run time
            if a.get_float("alpha", 1.0) != 1.0 or a.get_float("beta", 1.0) != 1.0:
                continue
            uses = list(gemm.outputs[0].uses())
            unflatten = uses[0].node if len(uses) == 1 else None
            if unflatten is None or unflatten.op_type != "Reshape" or gemm.outputs[0].is_graph_output():
                continue
            x = _flattened(gemm)
            out = unflatten.outputs[0]
            x_dims, out_dims = dims(x), dims(out)
            if x is None or x_dims is None or out_dims is None or len(out_dims) != len(x_dims):
                continue
            if not all(same_dim(p, q) for p, q in zip(x_dims[:-1], out_dims[:-1])):
                continue
            weight, bias = gemm.inputs[1], gemm.inputs[2] if len(gemm.inputs) > 2 else None
            bias_dims = dims(bias)
            if bias is not None and (bias_dims is None or len(bias_dims) != 1):
                continue  # a 2-D C broadcasts over the flattened rows: keep the Gemm
            product = new_node("MatMul", [x, weight], like=out)
            nodes = [product]
            if bias is not None:
                nodes.append(new_node("Add", [product.outputs[0], bias], like=out))
            graph.insert_before(unflatten, nodes)
            replace_value(out, nodes[-1].outputs[0])
