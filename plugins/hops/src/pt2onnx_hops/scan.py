"""``scan`` -> ``Scan`` over axis 0 (torch moves ``dim`` to the front and flips for ``reverse``
outside the HOP); ``additional_inputs`` are read from the outer scope."""

from __future__ import annotations

import onnx_ir as ir

from pt2onnx.plugin import lowering


@lowering("higher_order::scan")
def scan(op, combine_fn, init, xs, additional_inputs):
    name = op.node.name
    placeholders = op.placeholders(combine_fn, f"{name}.body.")
    state_and_slices = placeholders[: len(init) + len(xs)]

    def body(sub, *values):
        return sub.inline(combine_fn, *values, *additional_inputs)

    graph = op.subgraph(body, state_and_slices, name=f"{name}.body")
    _state_first(graph, len(init))
    count = len(op.output_meta)
    outs = op.Scan(*init, *xs, body=graph, num_scan_inputs=len(xs), _outputs=count)
    return tuple(outs) if count > 1 else (outs,)


def _state_first(graph: ir.Graph, states: int) -> None:
    """Put the state first in each ``Add``/``Mul`` of the body that takes a slice, then a state.

    The same value (both ops commute, broadcasting included), in the order OpenVINO's CPU
    plugin computes right: in 2026.4 ``Mul(x_t, s)`` reads the state as the slice (Mamba's
    ``a * state`` gave logits 4.77 off). docs/runtime_issues.md.
    """
    state, slices = set(graph.inputs[:states]), set(graph.inputs[states:])
    for node in graph:
        if node.op_type in ("Add", "Mul") and node.domain == "" and len(node.inputs) == 2:
            first, second = node.inputs
            if first in slices and second in state:
                node.replace_input_with(0, second)
                node.replace_input_with(1, first)
