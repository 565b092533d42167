"""``scan`` -> ``Scan`` over axis 0 (torch moves ``dim`` to the front and flips for ``reverse``
outside the HOP); ``additional_inputs`` are read from the outer scope."""

from __future__ import annotations

from pt2onnx.plugin import lowering


@lowering("higher_order::scan")
def scan(op, combine_fn, init, xs, additional_inputs):
    name = op.node.name
    placeholders = op.placeholders(combine_fn, f"{name}.body.")
    state_and_slices = placeholders[: len(init) + len(xs)]

    def body(sub, *values):
        return sub.inline(combine_fn, *values, *additional_inputs)

    graph = op.subgraph(body, state_and_slices, name=f"{name}.body")
    count = len(op.output_meta)
    outs = op.Scan(*init, *xs, body=graph, num_scan_inputs=len(xs), _outputs=count)
    return tuple(outs) if count > 1 else (outs,)
