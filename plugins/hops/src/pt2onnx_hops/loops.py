"""``while_loop`` -> ``Loop``: the condition is evaluated once before and at the end of every iteration."""

from __future__ import annotations

import onnx_ir as ir

from pt2onnx.plugin import lowering


@lowering("higher_order::while_loop")
def while_loop(op, cond_fn, body_fn, carried_inputs, additional_inputs):
    carried = [_as_value(op, v) for v in carried_inputs]
    (first,) = op.inline(cond_fn, *carried, *additional_inputs)
    name = op.node.name
    body_inputs = [
        op.value(f"{name}.iteration", ir.DataType.INT64, []),
        op.value(f"{name}.cond_in", ir.DataType.BOOL, []),
        *op.placeholders(body_fn, f"{name}.body.")[: len(carried)],
    ]

    def body(sub, _iteration, _cond_in, *state):
        new_state = [_as_value(sub, v) for v in sub.inline(body_fn, *state, *additional_inputs)]
        (again,) = sub.inline(cond_fn, *new_state, *additional_inputs)
        return [_as_value(sub, again), *new_state]

    graph = op.subgraph(body, body_inputs, name=f"{name}.body")
    outs = op.Loop(None, _as_value(op, first), *carried, body=graph, _outputs=len(carried))
    return tuple(outs) if len(carried) > 1 else (outs,)


def _as_value(op, v):
    # Carried Python scalars (specialized SymInts/SymBools) become typed constants.
    if isinstance(v, ir.Value):
        return v
    return op.constant(v, ir.DataType.BOOL if isinstance(v, bool) else ir.DataType.INT64)
