"""``map`` (``map_impl``) -> ``Scan`` without state: the body runs on each slice of ``xs`` along
axis 0 and its outputs are stacked; the extra arguments are read from the outer scope."""

from __future__ import annotations

from pt2onnx.plugin import lowering


@lowering("higher_order::map_impl")
def map_impl(op, body_fn, xs, args):
    name = op.node.name
    slices = op.placeholders(body_fn, f"{name}.body.")[: len(xs)]
    graph = op.subgraph(lambda sub, *values: sub.inline(body_fn, *values, *args), slices, name=f"{name}.body")
    count = len(op.output_meta)
    outs = op.Scan(*xs, body=graph, num_scan_inputs=len(xs), _outputs=count)
    return tuple(outs) if count > 1 else (outs,)
