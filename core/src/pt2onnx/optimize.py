"""Optimize: a short list of named passes over the assembled model, each switchable.

The translation already emits a clean, typed graph, so these stay light. Each pass
records the nodes it removed and the time it took in the report.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx_ir as ir
import onnx_ir.passes.common as common_passes
import onnxscript.optimizer
import onnxscript.rewriter

from .errors import OptimizationError
from .walk import all_nodes
from .weights import checkpoint_values_hidden, reads_checkpoint, transposed

__all__ = ["CLEANUP_PASSES", "FINISHING_PASSES", "PassEffect", "optimize", "select_passes"]


def _fold_weight_transposes(model: ir.Model) -> None:
    """``Transpose(weight)`` becomes an initializer computed only when the model is serialized.

    ``linear`` emits ``MatMul(x, Transpose(W))``. Folding that eagerly (as the constant
    folder does) holds a transposed copy of every weight in memory; a lazy tensor is
    transposed one at a time while saving and then dropped, so weights stay referenced.
    A weight read from a checkpoint is transposed as it is read.
    """
    graph = model.graph
    folded: dict[tuple[ir.Value, tuple[int, ...]], ir.Value] = {}
    for node in list(graph):
        source = node.inputs[0] if node.op_type == "Transpose" and node.domain == "" and node.inputs else None
        out = node.outputs[0]
        if source is None or not source.is_initializer() or source.const_value is None or out.is_graph_output():
            continue
        tensor = source.const_value
        perm = tuple(node.attributes.get_ints("perm", range(len(tensor.shape) - 1, -1, -1)))
        key = (source, perm)
        if key not in folded:
            dims = tensor.shape.numpy()
            shape = ir.Shape([dims[i] for i in perm])
            value = ir.Value(
                name=f"{source.name}.transposed", type=source.type, shape=shape, const_value=transposed(tensor, perm)
            )
            graph.register_initializer(value)
            folded[key] = value
        out.replace_all_uses_with(folded[key])
        graph.remove(node, safe=True)


def _fold_constants(model: ir.Model) -> None:
    onnxscript.optimizer.fold_constants(model, onnx_shape_inference=False)


def _rule_ops(rule: Any) -> set[str] | None:
    """The op types a rule's pattern holds (it can only match a model holding them all)."""
    try:
        return {node.op_identifier()[1] for node in rule._target_pattern}
    except (AttributeError, TypeError):
        return None  # a pattern with a variable op type: always try it


def _op_types(model: ir.Model) -> set[str]:
    return {n.op_type for n in all_nodes(model)}


#: Default rules left out, by measurement on the benchmark models: ``SlicesSplit`` matched
#: nothing and took most of the pass (0.6 s of it on a 125M-parameter Llama);
#: ``MaterializeReshapeShape`` added nodes (9 on a 12-layer ``nn.TransformerEncoder``).
_SKIPPED_RULES = frozenset({"SlicesSplit", "MaterializeReshapeShape"})
#: onnxscript's no-op rules (``x * 1``, ``x + 0``, ``x - 0``, ``x / 1``, inference Dropout)
#: match their constants within a tolerance (``x + c`` for any ``|c| < 1e-8``, ``x * c`` for
#: ``c`` within 1e-5 of 1), so they silently drop an ``eps`` of 1e-12 or torch's float64 RMS
#: norm default: left out (converters do not emit real no-ops; constant folding takes the rest).
_INEXACT_RULES = frozenset(id(rule) for rule in onnxscript.rewriter._no_op.rules.rules)  # no public accessor
#: onnxscript's reshape-around-MatMul rules fold ``bmm`` on flattened heads into a MatMul of a
#: 3-D and a 4-D operand, which OpenVINO 2026.4 does not compile in GroupViT's attention
#: ("ReduceDecomposition supports only Reduce by last dimension"): left out, the Reshapes stay.
_MIXED_RANK_RULES = frozenset(id(rule) for rule in onnxscript.rewriter._broadcast_to_matmul.rules.rules)


def _rewrite(model: ir.Model) -> None:
    """onnxscript's default rewrite rules, less those whose ops the model lacks.

    Each rule tries every node (~0.1 ms a node and rule), so skipping the rules that
    cannot match (conv, scatter, clip, ... on a transformer) saves about half the time.
    """
    present = _op_types(model)
    rules = []
    for rule in onnxscript.rewriter._DEFAULT_REWRITE_RULES:  # no public accessor in onnxscript 0.7
        ops = _rule_ops(rule)
        if getattr(rule, "name", None) in _SKIPPED_RULES or id(rule) in _INEXACT_RULES | _MIXED_RANK_RULES:
            continue
        if ops is None or ops <= present:
            rules.append(rule)
    onnxscript.rewriter.rewrite(model, pattern_rewrite_rules=rules)
    _IdentityElimination()(model)  # the rules leave ``Identity`` where they prove a node a no-op


class _IdentityElimination(common_passes.IdentityEliminationPass):
    """onnx-ir's pass, keeping the Identity nodes that make a graph output distinct.

    onnx-ir 1.1 also removes ``y = Identity(x)`` when ``y`` is a graph output and ``x`` is
    already one (``return y, y``) or comes from an enclosing graph (a subgraph returning an
    outer value), which leaves duplicate or dangling outputs.
    """

    def _try_eliminate_identity_node(self, node: ir.Node) -> bool:
        if node.op_type == "Identity" and node.domain == "" and node.outputs[0].is_graph_output():
            source = node.inputs[0]
            producer = source.producer() if source is not None else None
            if source is None or source.is_graph_output() or producer is None or producer.graph is not node.graph:
                return False
        return bool(super()._try_eliminate_identity_node(node))


def _same_dims(a: ir.Shape | None, b: ir.Shape | None) -> bool:
    """Whether two shapes are provably equal: same rank, each dim the same int or the same named symbol."""
    if a is None or b is None or len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, int) or isinstance(y, int):
            if x != y:
                return False
        elif x.value is None or x.value != y.value:
            return False
    return True


def _simplify_reshapes(model: ir.Model) -> None:
    """Drop every ``Reshape`` whose output shape is provably its input shape.

    torch's views often restate the shape a tensor already has (``view(b, h, s, d)`` on a
    ``(b, h, s, d)`` tensor); the shapes torch recorded prove it, symbolic dims included.
    """
    for node in list(all_nodes(model)):
        if node.op_type != "Reshape" or node.domain != "" or node.outputs[0].is_graph_output():
            continue
        source, out = node.inputs[0], node.outputs[0]
        if source is not None and _same_dims(source.shape, out.shape):
            out.replace_all_uses_with(source)
            assert node.graph is not None
            node.graph.remove(node, safe=True)


def _sample(value: ir.Value) -> bytes:
    """A few hundred elements spread over the tensor: equal tensors have equal samples."""
    assert value.const_value is not None
    array = value.const_value.numpy()
    # A strided view, never a reshape: folded weights are often transposed views, which reshape copies.
    return array[tuple(slice(None, None, max(1, n // 8)) for n in array.shape)].tobytes()


def _deduplicate_initializers(model: ir.Model) -> None:
    """Merge initializers with equal dtype, shape and content (every graph on its own).

    onnx-ir's hashed pass hashes every weight (seconds and a transient copy on a 100M+
    parameter model); here only tensors sharing dtype and shape are sampled, and only
    equal samples are compared in full.
    """
    for graph in model.graphs():
        groups: dict[tuple[Any, ...], list[ir.Value]] = {}
        for value in graph.initializers.values():
            if value.const_value is None or value.is_graph_input() or value.is_graph_output():
                continue
            if isinstance(value.const_value, ir.LazyTensor):
                continue  # sampling would compute it; it is as unique as the weight it transposes
            groups.setdefault((value.const_value.dtype, tuple(value.const_value.shape)), []).append(value)
        for candidates in groups.values():
            if len(candidates) < 2:
                continue
            kept: dict[bytes, list[ir.Value]] = {}
            for value in candidates:
                same = kept.setdefault(_sample(value), [])
                assert value.const_value is not None
                array = value.const_value.numpy()
                twin = next((k for k in same if np.array_equal(k.const_value.numpy(), array)), None)  # type: ignore[union-attr]
                if twin is None:
                    same.append(value)
                    continue
                value.replace_all_uses_with(twin)
                graph.initializers.pop(value.name)  # type: ignore[arg-type]


def _lift_constants(model: ir.Model) -> None:
    """``Constant`` nodes become initializers, as weights are: one form for every constant."""
    common_passes.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0)(model)


def _remove_unused(model: ir.Model) -> None:
    common_passes.RemoveUnusedNodesPass()(model)
    common_passes.RemoveUnusedFunctionsPass()(model)
    common_passes.RemoveUnusedOpsetsPass()(model)


#: Core passes run before the plugins' rewrites: they bring the graph into the canonical
#: form the rewrites' patterns expect.
CLEANUP_PASSES: dict[str, Callable[[ir.Model], object]] = {
    "fold_weight_transposes": _fold_weight_transposes,
    "constant_folding": _fold_constants,
    "identity_elimination": _IdentityElimination(),
    "simplify_reshapes": _simplify_reshapes,
    "cse": common_passes.CommonSubexpressionEliminationPass(),
    "rewrite": _rewrite,
}

#: Core passes run after the plugins' rewrites: they drop what the rewrites bypassed.
FINISHING_PASSES: dict[str, Callable[[ir.Model], object]] = {
    "remove_unused": _remove_unused,
    "lift_constants": _lift_constants,
    "deduplicate_initializers": _deduplicate_initializers,
}


@dataclass(frozen=True)
class PassEffect:
    """What one pass did: nodes before and after (functions included), whether it changed
    the graph at all (a rewrite may replace nodes one for one), and seconds spent."""

    name: str
    nodes_before: int
    nodes_after: int
    seconds: float
    changed: bool = False

    @property
    def removed(self) -> int:
        return self.nodes_before - self.nodes_after


def _survey(model: ir.Model) -> tuple[int, int]:
    """The node count and a fingerprint that changes when a node is added, removed or rewired
    (ids: cheap, and only compared within one pass), from one walk of the model."""
    nodes = [(id(n), n.op_type, len(n.attributes), *map(id, n.inputs)) for n in all_nodes(model)]
    return len(nodes), hash((*nodes, *model.graph.initializers))


def count_nodes(model: ir.Model) -> int:
    """Every node of the model: main graph, subgraphs and local functions."""
    return sum(1 for _ in all_nodes(model))


def select_passes(
    optimize: bool | Iterable[str] | Mapping[str, bool],
    rewrites: Mapping[str, Callable[[ir.Model], object]] | None = None,
    *,
    off: Iterable[str] = (),
) -> list[tuple[str, Callable[[ir.Model], object]]]:
    """The passes to run, in order, for the ``optimize=`` argument of :func:`pt2onnx.export`.

    The plugins' ``rewrites`` run between the core's clean-up and finishing passes.
    ``True``: all; ``False``: none; a list of names: those; a mapping ``{name: bool}``:
    all, with those switched as given. ``off`` names rewrites registered only for other
    opsets: ``optimize=`` may name them, and they never run.
    """
    rewrites = dict(rewrites or {})
    off = set(off)
    clashing = sorted(set(rewrites) & (set(CLEANUP_PASSES) | set(FINISHING_PASSES)))
    if clashing:
        raise ValueError(f"plugin rewrite(s) {clashing} take the name of a core pass; rename them")
    table = {**CLEANUP_PASSES, **rewrites, **FINISHING_PASSES}
    if optimize is True:
        chosen = dict.fromkeys(table, True)
    elif optimize is False:
        chosen = {}
    elif isinstance(optimize, Mapping):
        chosen = dict.fromkeys(table, True) | dict(optimize)
    else:
        chosen = dict.fromkeys(optimize, True)
    unknown = sorted(set(chosen) - set(table) - off)
    if unknown:
        raise ValueError(f"unknown optimization pass(es) {unknown}; known: {list(table)}")
    return [(name, fn) for name, fn in table.items() if chosen.get(name)]


#: Passes that handle initializers read from a checkpoint without reading them.
_CHECKPOINT_AWARE_PASSES = frozenset({"fold_weight_transposes"})


def optimize(model: ir.Model, passes: Iterable[tuple[str, Callable[[ir.Model], object]]]) -> list[PassEffect]:
    """Run ``passes`` (name, function) over ``model`` in place; returns what each did."""
    effects = []
    # Passes never read weights in, so a model exported with its values has none to hide.
    from_checkpoint = reads_checkpoint(model)
    nodes, fingerprint = _survey(model)
    for name, run in passes:
        start = time.perf_counter()
        try:
            if name in _CHECKPOINT_AWARE_PASSES or not from_checkpoint:
                run(model)
            else:
                with checkpoint_values_hidden(model):
                    run(model)
        except Exception as e:
            raise OptimizationError(
                f"pass {name!r} failed: {type(e).__name__}: {e}",
                hint=f"export with optimize={{'{name}': False}} and report the model that triggers it",
            ) from e
        seconds = time.perf_counter() - start
        after, changed = _survey(model)
        effects.append(PassEffect(name, nodes, after, seconds, changed != fingerprint))
        nodes, fingerprint = after, changed
    return effects
