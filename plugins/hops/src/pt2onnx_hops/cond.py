"""``torch.cond`` -> ``If``: each branch is a subgraph reading the operands from the outer scope."""

from __future__ import annotations

from pt2onnx.plugin import lowering


def _outputs(op):
    meta = op.output_meta
    return len(meta) if isinstance(meta, (tuple, list)) else 1


@lowering("higher_order::cond")
def cond(op, pred, true_fn, false_fn, operands):
    if isinstance(pred, bool):
        # torch specialized the predicate (a static shape test): only one branch is live.
        return tuple(op.inline(true_fn if pred else false_fn, *operands))
    name = op.node.name
    then_branch = op.subgraph(lambda sub: sub.inline(true_fn, *operands), [], name=f"{name}.then")
    else_branch = op.subgraph(lambda sub: sub.inline(false_fn, *operands), [], name=f"{name}.else")
    count = _outputs(op)
    outs = op.If(pred, then_branch=then_branch, else_branch=else_branch, _outputs=count)
    return tuple(outs) if count > 1 else (outs,)
