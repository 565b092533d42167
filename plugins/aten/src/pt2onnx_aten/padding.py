"""Padding: constant_pad_nd, reflection_pad*, replication_pad*, and pad.default.

torch lists pads from the last dim backwards, (begin, end) per dim; ONNX ``Pad`` wants
every begin, then every end, from the first dim. Negative pads crop, in both.
"""

from __future__ import annotations

from pt2onnx.plugin import converter

from ._dims import INT64_MAX, ints, scalar_of, size, to_dtype, widen


def _replicate_by_gather(op, x, begins, ends):
    """Replication padding with a crop: ``out[j] = x[clamp(j - begin, 0, n - 1)]`` along each
    padded dim, torch's kernel's own indexing. Where the crop leaves nothing (width 4
    padded by (-4, 5)) torch still replicates the last element, and onnxruntime's edge
    ``Pad`` fails at run time ("zero effective input extent")."""
    zero, one = ints(op, [0]), ints(op, [1])
    for axis, (begin, end) in enumerate(zip(begins, ends)):
        if begin == 0 and end == 0:
            continue
        n = size(op, x, axis)
        length = op.Squeeze(op.Add(n, ints(op, [begin + end])), zero)
        positions = op.Sub(op.Range(op.constant(0), length, op.constant(1)), op.constant(begin))
        index = op.Min(op.Max(positions, op.constant(0)), op.Squeeze(op.Sub(n, one), zero))
        x = op.Gather(x, index, axis=axis)
    return op.Identity(x)


def _pad(op, x, pad, mode, value=None):
    rank = op.rank_of(x)
    pairs = len(pad) // 2
    begins = [0] * (rank - pairs) + [pad[2 * (rank - 1 - d)] for d in range(rank - pairs, rank)]
    ends = [0] * (rank - pairs) + [pad[2 * (rank - 1 - d) + 1] for d in range(rank - pairs, rank)]
    if mode == "edge" and min(begins + ends) < 0:
        return _replicate_by_gather(op, x, begins, ends)
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


def _circular(op, x, pad):
    """torch's circular padding as Slice and Concat, per padded dim: negative pads crop
    first, then each side wraps around from the cropped tensor. (ONNX ``Pad`` has
    ``wrap`` only from opset 19, and onnxruntime 1.32 fails on it for an empty input.)"""
    rank = op.rank_of(x)
    for i in range(len(pad) // 2):
        axis = ints(op, [rank - 1 - i])
        begin, end = pad[2 * i], pad[2 * i + 1]
        if begin < 0 or end < 0:
            x = op.Slice(x, ints(op, [max(-begin, 0)]), ints(op, [-max(-end, 0) or INT64_MAX]), axis)
        parts = [x]
        if begin > 0:
            parts.insert(0, op.Slice(x, ints(op, [-begin]), ints(op, [INT64_MAX]), axis))
        if end > 0:
            parts.append(op.Slice(x, ints(op, [0]), ints(op, [end]), axis))
        if len(parts) > 1:
            x = op.Concat(*parts, axis=rank - 1 - i)
    return op.Identity(x)


_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge"}


@converter("aten::pad.default")
def pad(op, self, pad, mode="constant", value=None):
    if mode == "circular":
        return _circular(op, self, pad)
    if mode not in _MODES:
        raise op.unsupported("mode", mode, f"ONNX Pad has no such mode (torch modes: {', '.join(_MODES)}, circular)")
    return _pad(op, self, pad, _MODES[mode], value)
