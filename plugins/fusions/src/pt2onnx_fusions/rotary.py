"""Rotary position embedding, as transformers write it, into one ``RotaryEmbedding`` (opset 23).

``q * cos.unsqueeze(1) + rotate_half(q) * sin.unsqueeze(1)`` with
``rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2])`` translates to seven nodes per use
(Mul, Slice, Slice, Neg, Concat, Mul, Add). ``RotaryEmbedding`` (non-interleaved) takes
``x`` as ``(batch, heads, seq, d)`` and the half caches ``cos[..., :d/2]`` of shape
``(batch, seq, d/2)``: ``cos`` repeats its first half (``cat(freqs, freqs)``), which the
pattern relies on and the match proves only by structure, so the caches are checked to
come from that concatenation.
"""

from __future__ import annotations

import onnx_ir as ir

from .graph import Dim, dims, graphs, ints, new_node, produced_by, replace_value, same_dim, scalar

__all__ = ["fuse_rotary_embedding"]


def _operands(node: ir.Node) -> list[tuple[ir.Value, ir.Value]]:
    a, b = node.inputs
    assert a is not None and b is not None
    return [(a, b), (b, a)]


def _last_axis_slice(node: ir.Node | None, rank: int) -> tuple[int, int] | None:
    """``(start, end)`` of a ``Slice`` over the last axis with step 1, else ``None``."""
    if node is None or len(node.inputs) < 4:
        return None
    starts, ends, axes = ints(node.inputs[1]), ints(node.inputs[2]), ints(node.inputs[3])
    steps = ints(node.inputs[4]) if len(node.inputs) > 4 else [1]
    if starts is None or ends is None or axes not in ([-1], [rank - 1]) or steps != [1]:
        return None
    return starts[0], ends[0]


def _rotate_half_of(value: ir.Value, head: int) -> ir.Value | None:
    """``x`` if ``value`` is ``cat(-x[..., h:], x[..., :h])`` with ``h = head / 2``."""
    concat = produced_by(value, "Concat")
    if concat is None or len(concat.inputs) != 2 or concat.attributes.get_int("axis") not in (-1, 3):
        return None
    neg = produced_by(concat.inputs[0], "Neg")
    second = produced_by(neg.inputs[0], "Slice") if neg is not None else None
    first = produced_by(concat.inputs[1], "Slice")
    if second is None or first is None or second.inputs[0] is not first.inputs[0]:
        return None
    half = head // 2
    if _last_axis_slice(first, 4) != (0, half):
        return None
    tail = _last_axis_slice(second, 4)
    if tail is None or tail[0] != half or tail[1] < head:
        return None
    return first.inputs[0]


def _cache_of(value: ir.Value, x_dims: tuple[Dim, ...]) -> ir.Value | None:
    """``cache`` if ``value`` is ``cache.unsqueeze(1)``, ``cache`` being ``(batch or 1, seq, head)``
    and computed as ``Cos``/``Sin`` of ``cat(freqs, freqs)`` (maybe scaled), so its halves repeat."""
    unsqueeze = produced_by(value, "Unsqueeze")
    if unsqueeze is None or ints(unsqueeze.inputs[1]) != [1]:
        return None
    cache = unsqueeze.inputs[0]
    cache_dims = dims(cache)
    if cache_dims is None or len(cache_dims) != 3:
        return None
    batch, _, seq, head = x_dims
    if not (cache_dims[0] == 1 or same_dim(cache_dims[0], batch)) or not same_dim(cache_dims[1], seq):
        return None
    if cache_dims[2] != head or not _repeats_halves(cache):
        return None
    return cache


def _repeats_halves(cache: ir.Value | None) -> bool:
    """Whether ``cache`` is an elementwise function of ``Concat(f, f)`` along the last axis."""
    for _ in range(4):  # Cos/Sin, then at most a scaling Mul and a Cast in between
        node = cache.producer() if cache is not None else None
        if node is None:
            return False
        if node.op_type == "Concat":
            a, b = node.inputs[0], node.inputs[-1]
            return len(node.inputs) == 2 and a is b and node.attributes.get_int("axis") in (-1, 2)
        if node.op_type not in ("Cos", "Sin", "Cast", "Mul", "Identity"):
            return False
        if node.op_type == "Mul":
            others = [v for v in node.inputs if scalar(v) is None]
            if len(others) != 1:
                return False
            cache = others[0]
        else:
            cache = node.inputs[0]
    return False


class _HalfCaches:
    """``cache[..., :d/2]``, broadcast to the batch, built once per cache and batch size."""

    def __init__(self, graph: ir.Graph | ir.Function) -> None:
        self._graph = graph
        self._made: dict[tuple[ir.Value, Dim], ir.Value] = {}
        self._batch_sizes: dict[Dim, ir.Value] = {}

    def get(self, cache: ir.Value, x: ir.Value, before: ir.Node) -> ir.Value:
        x_dims, cache_dims = dims(x), dims(cache)
        assert x_dims is not None and cache_dims is not None and isinstance(x_dims[3], int)
        batch, half = x_dims[0], x_dims[3] // 2
        if (cache, batch) not in self._made:
            bounds = [new_node("Constant", [], {"value_ints": [v]}) for v in (0, half, -1)]
            sliced = new_node("Slice", [cache, *(n.outputs[0] for n in bounds)])
            sliced.outputs[0].type = cache.type
            sliced.outputs[0].shape = ir.Shape([cache_dims[0], cache_dims[1], half])
            self._graph.insert_before(before, [*bounds, sliced])
            result = sliced.outputs[0]
            if not same_dim(cache_dims[0], batch):
                # One row serves the whole batch: broadcast it (RotaryEmbedding does not).
                ones = new_node("Constant", [], {"value_ints": [1, 1]})
                target = new_node("Concat", [self._batch_size(x, before), ones.outputs[0]], {"axis": 0})
                expanded = new_node("Expand", [result, target.outputs[0]])
                expanded.outputs[0].type = cache.type
                expanded.outputs[0].shape = ir.Shape([batch, cache_dims[1], half])
                self._graph.insert_before(before, [ones, target, expanded])
                result = expanded.outputs[0]
            self._made[cache, batch] = result
        return self._made[cache, batch]

    def _batch_size(self, x: ir.Value, before: ir.Node) -> ir.Value:
        """``[batch]``, read off a graph input with that dim where there is one, so that no
        node of the pattern being fused gains a use."""
        batch = dims(x)[0]  # type: ignore[index]
        if batch not in self._batch_sizes:
            source, axis = x, 0
            for graph_input in self._graph.inputs:
                input_dims = dims(graph_input) or ()
                if any(same_dim(d, batch) for d in input_dims):
                    source, axis = graph_input, next(i for i, d in enumerate(input_dims) if same_dim(d, batch))
                    break
            shape = new_node("Shape", [source], {"start": axis, "end": axis + 1})
            self._graph.insert_before(before, shape)
            self._batch_sizes[batch] = shape.outputs[0]
        return self._batch_sizes[batch]


def _rotary_parts(add: ir.Node) -> tuple[ir.Value, ir.Value, ir.Value] | None:
    """``(x, cos, sin)`` if ``add`` is ``x * cos.unsqueeze(1) + rotate_half(x) * sin.unsqueeze(1)``."""
    for left, right in _operands(add):
        plain, rotated = produced_by(left, "Mul"), produced_by(right, "Mul")
        if plain is None or rotated is None:
            continue
        for x, c in _operands(plain):
            x_dims = dims(x)
            if x_dims is None or len(x_dims) != 4 or not isinstance(x_dims[3], int) or x_dims[3] % 2:
                continue
            for r, s in _operands(rotated):
                if _rotate_half_of(r, x_dims[3]) is not x:
                    continue
                cos, sin = _cache_of(c, x_dims), _cache_of(s, x_dims)
                if cos is not None and sin is not None and cos.dtype == x.dtype == sin.dtype:
                    return x, cos, sin
    return None


def fuse_rotary_embedding(model: ir.Model) -> None:
    """Rewrite each rotary embedding of a ``(batch, heads, seq, head_dim)`` tensor into ``RotaryEmbedding``."""
    for graph in graphs(model):
        caches = _HalfCaches(graph)
        for add in list(graph):
            if add.op_type != "Add" or add.domain != "":
                continue
            parts = _rotary_parts(add)
            if parts is None:
                continue
            x, cos, sin = parts
            out = add.outputs[0]
            fused = new_node(
                "RotaryEmbedding", [x, caches.get(cos, x, add), caches.get(sin, x, add)], {"interleaved": 0}, like=out
            )
            graph.insert_before(add, fused)
            replace_value(out, fused.outputs[0])
