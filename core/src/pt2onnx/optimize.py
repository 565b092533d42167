"""Optimize: a short list of named passes over the assembled model, each switchable.

The translation already emits a clean, typed graph, so these stay light. Each pass
records the nodes it removed and the time it took in the report.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx_ir as ir
import onnx_ir.passes.common as common_passes
import onnxscript.optimizer
import onnxscript.rewriter
from onnx_ir.tensor_adapters import TorchTensor

from .errors import OptimizationError

__all__ = ["PASSES", "PassEffect", "optimize", "select_passes"]


def _transposed(tensor: ir.TensorProtocol, perm: tuple[int, ...]) -> ir.TensorProtocol:
    if isinstance(tensor, TorchTensor):  # torch's blocked copy is several times faster than numpy's
        return TorchTensor(tensor.raw.permute(perm).contiguous())
    return ir.Tensor(np.ascontiguousarray(tensor.numpy().transpose(perm)), dtype=tensor.dtype)


def _fold_weight_transposes(model: ir.Model) -> None:
    """``Transpose(weight)`` becomes an initializer computed only when the model is serialized.

    ``linear`` emits ``MatMul(x, Transpose(W))``. Folding that eagerly (as the constant
    folder does) holds a transposed copy of every weight in memory; a lazy tensor is
    transposed one at a time while saving and then dropped, so weights stay referenced.
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
            lazy = ir.LazyTensor(functools.partial(_transposed, tensor, perm), dtype=tensor.dtype, shape=shape)
            value = ir.Value(name=f"{source.name}.transposed", type=source.type, shape=shape, const_value=lazy)
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
    types = {n.op_type for n in model.graph.all_nodes()}
    for function in model.functions.values():
        types.update(n.op_type for n in function.all_nodes())
    return types


def _rewrite(model: ir.Model) -> None:
    """onnxscript's default rewrite rules, less those whose ops the model lacks.

    Each rule tries every node (~0.1 ms a node and rule), so skipping the rules that
    cannot match (conv, scatter, clip, ... on a transformer) saves about half the time.
    """
    present = _op_types(model)
    rules = []
    for rule in onnxscript.rewriter._DEFAULT_REWRITE_RULES:  # no public accessor in onnxscript 0.7
        ops = _rule_ops(rule)
        if ops is None or ops <= present:
            rules.append(rule)
    onnxscript.rewriter.rewrite(model, pattern_rewrite_rules=rules)


def _scalar(value: ir.Value | None) -> float | None:
    tensor = value.const_value if value is not None else None
    if tensor is None or tensor.size != 1:
        return None
    return float(tensor.numpy().reshape(()))


def _rms_norm_pattern(op: Any, x: ir.Value, two: ir.Value, axes: ir.Value, eps: ir.Value, weight: ir.Value) -> Any:
    # What ``weight * (x * rsqrt(mean(x ** 2, -1, keepdim=True) + eps))`` translates to.
    inverse = op.Reciprocal(op.Sqrt(op.Add(op.ReduceMean(op.Pow(x, two), axes, keepdims=1), eps)))
    return op.Mul(weight, op.Mul(x, inverse))


def _is_rms_norm(
    context: Any, x: ir.Value, two: ir.Value, axes: ir.Value, eps: ir.Value, weight: ir.Value, **_: Any
) -> bool:
    rank = x.shape.rank() if x.shape is not None else None
    axis = axes.const_value.numpy().reshape(-1).tolist() if axes.const_value is not None else None
    return (
        rank is not None
        and axis in ([-1], [rank - 1])
        and _scalar(two) == 2.0
        and _scalar(eps) is not None
        and weight.shape is not None
        and weight.shape.rank() == 1
        and x.dtype in (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE)
    )


def _rms_norm(op: Any, x: ir.Value, two: ir.Value, axes: ir.Value, eps: ir.Value, weight: ir.Value, **_: Any) -> Any:
    return op.RMSNormalization(x, weight, axis=-1, epsilon=_scalar(eps))


_RMS_NORM = onnxscript.rewriter.RewriteRuleSet(
    [onnxscript.rewriter.RewriteRule(_rms_norm_pattern, _rms_norm, _is_rms_norm, name="RMSNormalization")],
    commute=True,
)


def _fuse_rms_norm(model: ir.Model) -> None:
    """The RMS norm transformers write by hand (Llama, T5, ...) as one ``RMSNormalization`` (opset 23)."""
    if model.opset_imports.get("", 0) >= 23:
        onnxscript.rewriter.rewrite(model, pattern_rewrite_rules=_RMS_NORM)


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


def _remove_unused(model: ir.Model) -> None:
    common_passes.RemoveUnusedNodesPass()(model)
    common_passes.RemoveUnusedFunctionsPass()(model)
    common_passes.RemoveUnusedOpsetsPass()(model)


#: The passes in the order they run: name -> function(model), mutating in place.
PASSES: dict[str, Callable[[ir.Model], object]] = {
    "fold_weight_transposes": _fold_weight_transposes,
    "constant_folding": _fold_constants,
    "identity_elimination": _IdentityElimination(),
    "cse": common_passes.CommonSubexpressionEliminationPass(),
    "fuse_rms_norm": _fuse_rms_norm,
    "rewrite": _rewrite,
    "remove_unused": _remove_unused,
    "deduplicate_initializers": _deduplicate_initializers,
}


@dataclass(frozen=True)
class PassEffect:
    """What one pass did: nodes before and after (functions included) and seconds spent."""

    name: str
    nodes_before: int
    nodes_after: int
    seconds: float

    @property
    def removed(self) -> int:
        return self.nodes_before - self.nodes_after


def count_nodes(model: ir.Model) -> int:
    """Every node of the model: main graph, subgraphs and local functions."""
    total = sum(1 for _ in model.graph.all_nodes())
    return total + sum(sum(1 for _ in f.all_nodes()) for f in model.functions.values())


def select_passes(optimize: bool | Iterable[str] | Mapping[str, bool]) -> list[str]:
    """The pass names to run for the ``optimize=`` argument of :func:`pt2onnx.export`.

    ``True``: all; ``False``: none; a list of names: those; a mapping ``{name: bool}``:
    all, with those switched as given.
    """
    if optimize is True:
        return list(PASSES)
    if optimize is False:
        return []
    if isinstance(optimize, Mapping):
        chosen = {name: True for name in PASSES} | dict(optimize)
    else:
        chosen = dict.fromkeys(optimize, True)
    unknown = sorted(set(chosen) - set(PASSES))
    if unknown:
        raise ValueError(f"unknown optimization pass(es) {unknown}; known: {list(PASSES)}")
    return [name for name in PASSES if chosen.get(name)]


def optimize(model: ir.Model, passes: Iterable[str]) -> list[PassEffect]:
    """Run ``passes`` over ``model`` in place; returns what each did."""
    effects = []
    for name in passes:
        before = count_nodes(model)
        start = time.perf_counter()
        try:
            PASSES[name](model)
        except Exception as e:
            raise OptimizationError(
                f"pass {name!r} failed: {type(e).__name__}: {e}",
                hint=f"export with optimize={{'{name}': False}} and report the model that triggers it",
            ) from e
        effects.append(PassEffect(name, before, count_nodes(model), time.perf_counter() - start))
    return effects
