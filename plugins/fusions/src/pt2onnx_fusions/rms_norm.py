"""The RMS norm transformers write by hand (Llama, T5, ...) as one ``RMSNormalization`` (opset 23).

``weight * (x * rsqrt(mean(x ** 2, -1, keepdim=True) + eps))`` translates to
``Mul(weight, Mul(x, Reciprocal(Sqrt(Add(ReduceMean(Mul(x, x)), eps)))))`` (``Pow(x, 2)``
where another converter wrote the square), each product and the sum with its operands in
either order. Matched from each ``ReduceMean`` outward, not by trying a pattern at every
node: on a 125M-parameter Llama that took 56 ms of the export with onnxscript's rewriter.
"""

from __future__ import annotations

import onnx_ir as ir

from .graph import graphs, ints, new_node, produced_by, replace_node, scalar

__all__ = ["fuse_rms_norm"]


def _sole_consumer(value: ir.Value, op_type: str) -> ir.Node | None:
    """The one default-domain ``op_type`` node reading ``value``, if nothing else does."""
    uses = value.uses()
    if value.is_graph_output() or len(uses) != 1:
        return None
    (use,) = uses
    node = use.node
    return node if node.op_type == op_type and node.domain in ("", "ai.onnx") else None


def _other(node: ir.Node, value: ir.Value) -> ir.Value | None:
    """The operand of the binary ``node`` that is not ``value`` (the second when both are)."""
    a, b = node.inputs
    return b if a is value else a if b is value else None


def _squared(value: ir.Value | None) -> ir.Value | None:
    """``x`` when ``value`` is ``x * x`` or ``x ** 2``."""
    if (mul := produced_by(value, "Mul")) is not None and mul.inputs[0] is mul.inputs[1]:
        return mul.inputs[0]
    if (power := produced_by(value, "Pow")) is not None and scalar(power.inputs[1]) == 2.0:
        return power.inputs[0]
    return None


def _last_axis_mean(node: ir.Node, x: ir.Value) -> bool:
    rank = x.shape.rank() if x.shape is not None else None
    a = node.attributes
    return (
        rank is not None
        and len(node.inputs) == 2
        and ints(node.inputs[1]) in ([-1], [rank - 1])
        and a.get_int("keepdims", 1) == 1
        and a.get_int("noop_with_empty_axes", 0) == 0
    )


def _rms_norm(mean: ir.Node) -> tuple[ir.Node, ir.Value, ir.Value, float] | None:
    """``(last Mul, x, weight, eps)`` when ``mean`` starts a hand-written RMS norm."""
    square = mean.inputs[0]
    x = _squared(square)
    # float32 only: onnxruntime has no bfloat16 RMSNormalization kernel, float16 squares
    # overflow above 256 in torch but not in the fused op's float32 statistics, and
    # float64 would lose precision in them.
    if (
        x is None
        or square is None
        or x.dtype != ir.DataType.FLOAT
        or len(square.uses()) != 1
        or not _last_axis_mean(mean, x)
    ):
        return None
    add = _sole_consumer(mean.outputs[0], "Add")
    eps = scalar(_other(add, mean.outputs[0])) if add is not None else None
    sqrt = _sole_consumer(add.outputs[0], "Sqrt") if add is not None and eps is not None else None
    inverse = _sole_consumer(sqrt.outputs[0], "Reciprocal") if sqrt is not None else None
    scaled = _sole_consumer(inverse.outputs[0], "Mul") if inverse is not None else None
    if scaled is None or _other(scaled, inverse.outputs[0]) is not x:  # type: ignore[union-attr]
        return None
    last = _sole_consumer(scaled.outputs[0], "Mul")
    weight = _other(last, scaled.outputs[0]) if last is not None else None
    if weight is None or weight.shape is None or weight.shape.rank() != 1:
        return None
    return last, x, weight, eps  # type: ignore[return-value]


def fuse_rms_norm(model: ir.Model) -> None:
    """Rewrite each hand-written RMS norm into ``RMSNormalization``."""
    for graph in graphs(model):
        for mean in [n for n in graph if n.op_type == "ReduceMean" and n.domain in ("", "ai.onnx")]:
            found = _rms_norm(mean)
            if found is None:
                continue
            last, x, weight, eps = found
            fused = new_node("RMSNormalization", [x, weight], {"axis": -1, "epsilon": eps}, like=last.outputs[0])
            replace_node(last, fused)
