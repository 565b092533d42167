"""simplify_index_grids: indexing with a grid of full aranges (vmapped mask builders) becomes an Unsqueeze."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from pt2onnx.testing import assert_exports_like_eager, tensors

_ALL = slice(None)

#: How the batch and sequence aranges are laid out in the grid: as transformers' masks
#: place the query (``[None, None, :, None]``) and key (``[None, None, None, :]``)
#: indices, a plain 2-d grid, and one the broadcast prepends an axis to.
LAYOUTS = {
    "query": ((_ALL, None, None, None), (None, None, _ALL, None)),
    "key": ((_ALL, None, None, None), (None, None, None, _ALL)),
    "plain": ((_ALL, None), (None, _ALL)),
    "prepended": ((_ALL, None, None), (None, _ALL)),
}


class GridIndex(torch.nn.Module):
    """``data[b_idx, s_idx]`` as ``transformers.masking_utils`` builds it for its mask functions."""

    def __init__(self, layout: str, offset: bool = False, full: bool = True, graph_output: bool = False) -> None:
        super().__init__()
        self.layout, self.offset, self.full, self.graph_output = LAYOUTS[layout], offset, full, graph_output

    def forward(self, data, mask):
        batch, seq = data.shape[0], data.shape[1]
        b_idx = torch.arange(batch)
        s_idx = torch.arange(seq if self.full else seq - 1)
        if self.offset:  # ``kv_idx = arange(kv_length) + kv_offset`` with offset 0
            s_idx = s_idx + 0
        b_layout, s_layout = self.layout
        picked = data[b_idx[b_layout], s_idx[s_layout]]
        return picked if self.graph_output else picked & mask


def _ops(result):
    return [node.op_type for node in result.model.graph]


def _removed(result, name="simplify_index_grids"):
    return {p.name: p.removed for p in result.report.passes}.get(name)


_DIMS = {"data": {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq")}, "mask": None}


def _inputs(data, batch, seq, width):
    shape = (batch, seq) if width is None else (batch, seq, width)
    mask_shape = (1,) if width is None else (1, width)
    return data.draw(tensors(shape, "bool")), data.draw(tensors(mask_shape, "bool"))


@given(
    data=st.data(),
    layout=st.sampled_from(sorted(LAYOUTS)),
    width=st.sampled_from([None, 3]),
    offset=st.booleans(),
    graph_output=st.booleans(),
    batch=st.integers(2, 3),
    seq=st.integers(2, 5),
)
def test_full_arange_grid_becomes_unsqueeze(data, layout, width, offset, graph_output, batch, seq):
    args = _inputs(data, batch, seq, width)
    other = _inputs(data, batch + 1, seq + 2, width)
    result = assert_exports_like_eager(
        GridIndex(layout, offset=offset, graph_output=graph_output),
        args,
        dynamic_shapes=_DIMS,
        other_inputs=[(other, {})],
    )
    ops = _ops(result)
    assert "GatherND" not in ops and "Range" not in ops, ops
    assert _removed(result) > 0


@given(data=st.data(), layout=st.sampled_from(sorted(LAYOUTS)), switched_off=st.booleans())
def test_partial_arange_or_switched_off_stays_a_gather(data, layout, switched_off):
    """An arange shorter than its axis is a real gather; switched off, nothing changes."""
    args, other = _inputs(data, 2, 4, None), _inputs(data, 3, 6, None)
    options = {"optimize": {"simplify_index_grids": False}} if switched_off else {}
    dims = {"data": {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq", min=3)}, "mask": None}
    result = assert_exports_like_eager(
        GridIndex(layout, full=switched_off), args, dynamic_shapes=dims, other_inputs=[(other, {})], **options
    )
    assert "GatherND" in _ops(result)
    assert _removed(result) == (None if switched_off else 0)
