"""``pt2onnx.export``: the whole pipeline, one phase after the other.

plugins -> capture (prepared by plugins) -> decompose -> translate -> assemble -> optimize -> (save)
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import torch
from torch.export import ExportedProgram

from .assemble import assemble
from .capture import as_module, capture
from .decompose import Decomposed, decompose
from .dynamic import AUTO, input_dim_names, static_dims
from .errors import UnsupportedOpsError
from .module_functions import ModuleSelection, outline_modules
from .opset import check_opset
from .optimize import PassEffect, count_nodes, select_passes
from .optimize import optimize as run_passes
from .plugin_manager import load_plugins
from .prepare import prepare_capture
from .progress import Progress
from .project import project_root
from .provenance import SourcePaths, apply_source_paths, check_source_paths
from .registry import Entry, Registry, build_registry
from .report import Contribution, OpUsage, Report, TensorInfo, function_id, report_format
from .result import ExportResult
from .signature import check_example_inputs, check_outputs, check_weights, dim_names, normalize_args
from .symbolic import DimNames
from .torch_warnings import torch_internal_warnings_silenced
from .translate import GraphTranslator, TranslatedGraph

__all__ = ["export"]


def _op_usage(registry: Registry, translated: TranslatedGraph, decomposed: Mapping[str, Any]) -> list[OpUsage]:
    layers = {name: str(info.layer) for name, info in registry.plugin_set.plugins.items()}
    rows = []
    for (op, plugin), count in sorted(translated.usage.items()):
        entry = translated.entries.get(op)
        shadowed = tuple(f"{s.plugin} [{s.layer}]" for s in entry.shadowed) if entry else ()
        rows.append(OpUsage(op, count, plugin, layers.get(plugin, "-"), shadowed))
    for op, (count, entry) in sorted(decomposed.items()):
        shadowed = tuple(f"{s.plugin} [{s.layer}]" for s in entry.shadowed)
        rows.append(OpUsage(op, count, entry.winner.plugin, str(entry.winner.layer), shadowed, "decomposed"))
    return rows


def _contributions(
    translated: TranslatedGraph,
    decomposed: Decomposed,
    registry: Registry,
    passes: Sequence[PassEffect],
    prepared: Sequence[Entry],
) -> list[Contribution]:
    """The registrations that did work: prepared capture, converted nodes, decomposed ops, changed the graph."""
    changed = {p.name for p in passes if p.changed}
    winners = [e.winner for e in prepared]
    winners += [e.winner for e in translated.entries.values()]
    winners += [e.winner for _, e in decomposed.applied.values()]
    winners += [e.winner for name, e in registry.rewrites.items() if name in changed]
    unique = {(r.kind, r.op, r.plugin): r for r in winners}
    return [Contribution(r.kind, r.op, r.plugin, str(r.layer), function_id(r.fn)) for r in unique.values()]


def export(
    model: torch.nn.Module | ExportedProgram | Any,
    args: Any = (),
    kwargs: dict[str, Any] | None = None,
    *,
    dynamic_shapes: Any = None,
    other_inputs: Sequence[tuple[tuple[Any, ...], dict[str, Any]]] = (),
    strict: bool = False,
    opset: int | None = None,
    plugins: Sequence[Any] | None = None,
    disable: Iterable[str] = (),
    optimize: bool | Iterable[str] | Mapping[str, bool] = True,
    f: str | os.PathLike[str] | None = None,
    fallback: bool = True,
    decompose_all: bool = False,
    unknown_custom_ops: Literal["error", "emit"] = "error",
    modules_as_functions: ModuleSelection = False,
    source_paths: SourcePaths = "relative",
    report: str | os.PathLike[str] | None = None,
    quiet: bool = False,
) -> ExportResult:
    """Export a PyTorch model to ONNX.

    Args:
        model: an ``nn.Module``, a callable, or an already captured ``ExportedProgram``.
        args: example positional inputs, as the model is called (a bare tensor means
            ``(tensor,)``, None means no argument).
        kwargs: example keyword inputs, as the model is called.
        dynamic_shapes: as for ``torch.export.export`` (``Dim`` names name the ONNX dims), or
            ``"auto"``: every dim of every tensor input dynamic where the model allows it
            (``report.static_dims`` says which stayed static and why).
        other_inputs: further examples as ``(args, kwargs)`` pairs; without ``dynamic_shapes``,
            exactly the dims that differ between the examples are dynamic.
        strict: capture with TorchDynamo (``True``) or by tracing Python (``False``).
        opset: target ONNX opset; default: the newest the installed onnxruntime runs.
        plugins: the highest plugin layer: modules, module names or plugin objects.
        disable: plugin names to block (as ``-p no:NAME`` on the command line).
        optimize: ``True``/``False``, a list of pass names, or ``{name: bool}``.
        f: if given, save the model there (atomically).
        fallback: retry capture in the other ``strict`` mode if the asked one fails.
        decompose_all: re-trace with the decomposition table even when not needed.
        unknown_custom_ops: ``"emit"`` exports a custom op without handler as one opaque
            node in a domain named after its namespace (with a warning) instead of failing.
        modules_as_functions: ``True`` or a list of ``nn.Module`` classes: keep the calls of
            those modules as ONNX local functions (one per class and configuration).
        source_paths: how the user's source files appear in the model's provenance metadata
            (``pt2onnx.source``): ``"relative"`` to the project root (the directory of the
            nearest pyproject.toml, else the working directory), ``"full"``, or ``"none"``
            (no source lines). Error messages always show full paths.
        report: if given, write the export report there; the suffix picks the format
            (``.md``, ``.html``, ``.json``). ``save()`` and ``verify()`` on the result
            rewrite it, so it ends up holding their sizes and differences too.
        quiet: no progress display (shown on stderr only when it is a terminal).

    Returns:
        An :class:`ExportResult` with ``.model``, ``.model_proto``, ``.save()``, ``.run()``,
        ``.verify()`` and ``.report``.
    """
    if report is not None:
        report_format(report)  # an unknown suffix fails now, not after the export
    progress = Progress.for_terminal(quiet)
    export_report = Report()
    export_report.opset = target_opset = check_opset(opset)
    args, kwargs = normalize_args(args), dict(kwargs or {})
    others = [(normalize_args(a), dict(k or {})) for a, k in other_inputs]
    source_paths = check_source_paths(source_paths)

    with export_report.phase("plugins"), progress.phase("plugins"):
        plugin_set = load_plugins(plugins, disable=disable)
        registry = build_registry(plugin_set)
        passes = select_passes(optimize, registry.rewrite_functions())
        registry.check_rewrites(name for name, _ in passes)
    export_report.plugins = list(plugin_set.plugins.values())
    export_report.broken_plugins = list(plugin_set.broken)

    with export_report.phase("capture"), progress.phase("capture"), torch_internal_warnings_silenced():
        eager = None if isinstance(model, ExportedProgram) else as_module(model)
        check_example_inputs(args, kwargs)
        if eager is not None:
            check_weights(eager)
        preparation = prepare_capture(registry, eager, args, kwargs, dynamic_shapes, others)
        shapes = preparation.dynamic_shapes
        captured = capture(
            eager or model,
            args,
            kwargs,
            dynamic_shapes=shapes,
            strict=strict,
            fallback=fallback,
            around=preparation.around,
        )
        check_outputs(captured.program)
        prepared = preparation.applied(captured.program)
    export_report.capture, report.capture_fallback = captured.strategy, captured.fallback_reason
    export_report.preparations = [f"{e.winner.kind} {e.winner.op} ({e.winner.plugin} [{e.winner.layer}])" for e in prepared]
    if dynamic_shapes == AUTO and eager is not None:
        export_report.static_dims = static_dims(captured.program, args, kwargs)

    with export_report.phase("decompose"), progress.phase("decompose"), torch_internal_warnings_silenced():
        decomposed = decompose(captured.program, registry, force=decompose_all)
    program = decomposed.program
    export_report.retraced, export_report.decompose_reason = decomposed.retraced, decomposed.reason

    nodes = sum(node.op == "call_function" for node in program.graph.nodes)
    with export_report.phase("translate"), progress.phase("translate", nodes) as advance:
        signature = inspect.signature(eager.forward) if eager is not None else None
        names = {**input_dim_names(program), **dim_names(program, signature, args, kwargs, shapes)}
        translator = GraphTranslator(registry, DimNames(names), target_opset, unknown_custom_ops=unknown_custom_ops)
        graph_module = program.graph_module
        if modules_as_functions:
            graph_module = outline_modules(graph_module, modules_as_functions)
        try:
            translated = translator.translate_program(graph_module, on_node=advance)
        except UnsupportedOpsError as e:
            raise decomposed.explain(e) from None

    with export_report.phase("assemble"), progress.phase("assemble"):
        onnx_model, layout = assemble(program, translated, target_opset, preparation.io_names(program, signature))
    export_report.ops = _op_usage(registry, translated, decomposed.applied)
    export_report.nodes_translated = count_nodes(onnx_model)

    with export_report.phase("optimize"), progress.phase("optimize"):
        export_report.passes = run_passes(onnx_model, passes)
    export_report.nodes_final = count_nodes(onnx_model)
    export_report.contributions = _contributions(translated, decomposed, registry, export_report.passes, prepared)
    apply_source_paths(onnx_model, source_paths, project_root())
    export_report.inputs = [TensorInfo.of(v) for v in onnx_model.graph.inputs]
    export_report.outputs = [TensorInfo.of(v) for v in onnx_model.graph.outputs]
    export_report.weights_bytes = sum(
        v.const_value.nbytes for v in onnx_model.graph.initializers.values() if v.const_value is not None
    )

    result = ExportResult(onnx_model, program, layout, export_report, eager, progress=progress, report_file=report)
    if f is not None:
        result.save(f)
    return result
