"""Indexing a tensor with a grid of full ``arange``\\ s, as vmapped mask builders do, as an ``Unsqueeze``.

transformers' ``masking_utils`` evaluate a mask function on ``data[b_idx, s_idx]`` with
``b_idx = arange(B)[:, None, None, None]`` and ``s_idx = arange(S)[None, None, None, :]``
(or any such layout). That translates into a ``GatherND`` over the broadcast grid of
the indices; when each index is the whole ``arange`` of the axis it indexes, the gather
returns ``data`` itself with singleton axes inserted where no index varies.
"""

from __future__ import annotations

import onnx_ir as ir

from .graph import dims, graphs, ints, new_node, produced_by, replace_node, replace_value, same_dim, scalar

__all__ = ["simplify_index_grids"]


def _arange(index: ir.Value | None) -> tuple[ir.Value, int, int] | None:
    """``(arange, position, rank)`` when ``index`` is ``Range(0, n, 1)`` unsqueezed to ``rank`` dims, varying along ``position``."""
    unsqueezes = []
    while unsqueeze := produced_by(index, "Unsqueeze"):
        unsqueezes.append(ints(unsqueeze.inputs[1]) if len(unsqueeze.inputs) > 1 else None)
        index = unsqueeze.inputs[0]
    if (add := produced_by(index, "Add")) and scalar(add.inputs[1]) == 0:  # ``arange(n) + offset``, offset 0
        index = add.inputs[0]
    arange = produced_by(index, "Range")
    if arange is None or scalar(arange.inputs[0]) != 0 or scalar(arange.inputs[2]) != 1:
        return None
    position, rank = 0, 1
    for axes in reversed(unsqueezes):
        if axes is None:
            return None
        rank += len(axes)
        position = [i for i in range(rank) if i not in {a % rank for a in axes}][position]
    return arange.outputs[0], position, rank


def _grid_index(part: ir.Value) -> tuple[ir.Value, int, int] | None:
    """What ``_arange`` says of one part of the index grid: ``Unsqueeze(Expand(index, shape), -1)``."""
    last = produced_by(part, "Unsqueeze")
    if last is None or len(last.inputs) < 2 or ints(last.inputs[1]) != [-1]:
        return None
    index = last.inputs[0]
    if expand := produced_by(index, "Expand"):
        index = expand.inputs[0]  # broadcasting an arange along other axes keeps its values along its own
    return _arange(index)


def _unsqueeze_axes(node: ir.Node) -> list[int] | None:
    """The axes to unsqueeze ``data`` at to get what ``GatherND(data, grid)`` returns, if the grid is all full aranges."""
    data, grid = node.inputs[0], node.inputs[1]
    data_dims, out_dims = dims(data), dims(node.outputs[0])
    concat = produced_by(grid, "Concat")
    if node.attributes.get_int("batch_dims", 0) != 0 or data_dims is None or out_dims is None or concat is None:
        return None
    if concat.attributes.get_int("axis") != -1 or len(concat.inputs) > len(data_dims):
        return None
    # The grid's rank: GatherND returns the grid's shape followed by the dims no index covers.
    rank = len(out_dims) - (len(data_dims) - len(concat.inputs))
    positions = []
    for k, part in enumerate(concat.inputs):
        found = _grid_index(part) if part is not None else None
        if found is None or not same_dim((dims(found[0]) or (None,))[0], data_dims[k]):
            return None
        _, position, part_rank = found
        positions.append(rank - part_rank + position)  # broadcasting prepends axes
    if positions != sorted(set(positions)) or positions[0] < 0:
        return None
    axes = [i for i in range(rank) if i not in positions]
    expected = list(data_dims)
    for axis in axes:
        expected.insert(axis, 1)
    if len(expected) != len(out_dims) or not all(same_dim(a, b) for a, b in zip(expected, out_dims)):
        return None  # the grid broadcasts beyond the aranges
    return axes


def simplify_index_grids(model: ir.Model) -> None:
    """Rewrite each ``GatherND`` over a grid of full aranges into ``Unsqueeze`` of its data."""
    for graph in graphs(model):
        for node in list(graph):
            if node.graph is None or node.op_type != "GatherND" or node.domain != "":
                continue
            axes, data, out = _unsqueeze_axes(node), node.inputs[0], node.outputs[0]
            if axes is None or data is None:
                continue
            if axes:
                constant = new_node("Constant", [], {"value_ints": axes})
                graph.insert_before(node, constant)
                replace_node(node, new_node("Unsqueeze", [data, constant.outputs[0]]))
            else:  # the gather returns data as it is
                replace_value(out, data)
