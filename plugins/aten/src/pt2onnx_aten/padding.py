"""Padding: constant_pad_nd, reflection_pad*, replication_pad*, and pad.default.

torch lists pads from the last dim backwards, (begin, end) per dim; ONNX ``Pad`` wants
every begin, then every end, from the first dim. Negative pads crop, in both.
"""

from __future__ import annotations

from pt2onnx.plugin import converter

from ._dims import scalar_of, to_dtype, widen


def _pad(op, x, pad, mode, value=None):
    rank = op.rank_of(x)
    pairs = len(pad) // 2
    begins = [0] * (rank - pairs) + [pad[2 * (rank - 1 - d)] for d in range(rank - pairs, rank)]
    ends = [0] * (rank - pairs) + [pad[2 * (rank - 1 - d) + 1] for d in range(rank - pairs, rank)]
    data = widen(op, x, "Pad")
    if mode == "constant":
        out = op.Pad(data, op.shape_tensor(begins + ends), scalar_of(op, value or 0, data.dtype), mode=mode)
    else:
        out = op.Pad(data, op.shape_tensor(begins + ends), mode=mode)
    return to_dtype(op, out, x.dtype)


@converter("aten::constant_pad_nd.default")
def constant_pad_nd(op, self, pad, value=0):
    return _pad(op, self, pad, "constant", value)


@converter("aten::reflection_pad1d.default", "aten::reflection_pad2d.default", "aten::reflection_pad3d.default")
def reflection_pad(op, self, padding):
    return _pad(op, self, padding, "reflect")


@converter("aten::replication_pad1d.default", "aten::replication_pad2d.default", "aten::replication_pad3d.default")
def replication_pad(op, self, padding):
    return _pad(op, self, padding, "edge")


_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


@converter("aten::pad.default")
def pad(op, self, pad, mode="constant", value=None):
    if mode not in _MODES:
        raise op.unsupported("mode", mode, f"ONNX Pad has no such mode (torch modes: {', '.join(_MODES)})")
    if mode == "circular" and op.opset < 19:
        raise op.unsupported("mode", mode, f"ONNX Pad wraps around only from opset 19 (target: {op.opset})")
    return _pad(op, self, pad, _MODES[mode], value)
