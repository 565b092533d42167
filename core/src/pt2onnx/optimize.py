"""Optimize: a short list of named passes over the assembled model, each switchable.

The translation already emits a clean, typed graph, so these stay light. Each pass
records the nodes it removed and the time it took in the report.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import onnx_ir as ir
import onnx_ir.passes.common as common_passes
import onnxscript.optimizer
import onnxscript.rewriter

from .errors import OptimizationError

__all__ = ["PASSES", "PassEffect", "optimize", "select_passes"]


def _fold_constants(model: ir.Model) -> None:
    onnxscript.optimizer.fold_constants(model, onnx_shape_inference=False)


def _rewrite(model: ir.Model) -> None:
    onnxscript.rewriter.rewrite(model)


def _remove_unused(model: ir.Model) -> None:
    common_passes.RemoveUnusedNodesPass()(model)
    common_passes.RemoveUnusedFunctionsPass()(model)
    common_passes.RemoveUnusedOpsetsPass()(model)


#: The passes in the order they run: name -> function(model), mutating in place.
PASSES: dict[str, Callable[[ir.Model], object]] = {
    "constant_folding": _fold_constants,
    "identity_elimination": common_passes.IdentityEliminationPass(),
    "cse": common_passes.CommonSubexpressionEliminationPass(),
    "rewrite": _rewrite,
    "remove_unused": _remove_unused,
    "deduplicate_initializers": common_passes.DeduplicateHashedInitializersPass(),
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
