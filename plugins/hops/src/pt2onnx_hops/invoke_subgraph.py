"""``invoke_subgraph`` -> an ONNX local function (one per subgraph identifier), called once per use."""

from __future__ import annotations

from pt2onnx.plugin import lowering


@lowering("higher_order::invoke_subgraph")
def invoke_subgraph(op, subgraph, identifier, *operands):
    function = op.function(subgraph, name=_function_name(identifier or op.node.name))
    count = len(op.output_meta) if isinstance(op.output_meta, (tuple, list)) else 1
    outs = op.call(function, *operands, _outputs=count)
    return tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)


def _function_name(identifier):
    return "".join(c if c.isalnum() or c == "_" else "_" for c in str(identifier))
