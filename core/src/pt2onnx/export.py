"""``pt2onnx.export``: the whole pipeline, one phase after the other.

plugins -> weights (open the checkpoint, convert to ``dtype``) -> capture (prepared by plugins)
-> decompose -> translate -> assemble (names, initializers with their values' source, edge
dtypes) -> optimize -> (save), with Python's garbage collector paused (:mod:`.collector`)
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import torch
from torch.export import ExportedProgram

from .assemble import assemble, separate_outputs_from_subgraphs
from .capture import as_module, capture
from .collector import collector_paused
from .decompose import Decomposed, decompose
from .errors import OptionError, UnsupportedOpsError
from .interface.calling import check_example_inputs, check_outputs, normalize_args
from .interface.guards import SizeGuards
from .interface.names import dim_names, io_names
from .interface.shapes import AUTO, static_dims
from .interface.symbolic import DimNames
from .module_functions import ModuleSelection, outline_modules
from .opset import check_opset
from .optimize import PassEffect, count_nodes, select_passes
from .optimize import optimize as run_passes
from .plugin_manager import load_plugins
from .prepare import prepare_capture, register_pytrees
from .progress import Progress
from .project import project_root
from .provenance import SourcePaths, apply_source_paths, check_source_paths
from .registration import Registration
from .registry import Entry, Registry, build_registry
from .report import Contribution, NonfiniteDeviation, OpUsage, Report, TensorInfo, function_id, report_format
from .result import ExportResult
from .save import prepare_location
from .torch_warnings import torch_internal_warnings_silenced
from .translate import NONFINITE_MODES, GraphTranslator, TranslatedGraph, check_shapes
from .weights import WeightPlan, Weights

__all__ = ["export"]


def _op_usage(registry: Registry, translated: TranslatedGraph, decomposed: Mapping[str, Any]) -> list[OpUsage]:
    layers = {name: str(info.layer) for name, info in registry.plugin_set.plugins.items()}
    rows = []
    for (op, plugin), count in sorted(translated.usage.items()):
        entry = translated.entries.get(op)
        # What this plugin shadows: the registrations after its own in the order they are tried.
        below = _shadowed_by(entry, plugin) if entry else ()
        shadowed = tuple(f"{s.plugin} [{s.layer}]" for s in below)
        declined_by = tuple(sorted(translated.declined.get((op, plugin), ())))
        rows.append(OpUsage(op, count, plugin, layers.get(plugin, "-"), shadowed, declined_by=declined_by))
    for op, (count, entry) in sorted(decomposed.items()):
        shadowed = tuple(f"{s.plugin} [{s.layer}]" for s in entry.shadowed)
        rows.append(OpUsage(op, count, entry.winner.plugin, str(entry.winner.layer), shadowed, "decomposed"))
    return rows


def _shadowed_by(entry: Entry, plugin: str) -> tuple[Registration, ...]:
    ranked = entry.in_turn
    at = next((i for i, r in enumerate(ranked) if r.plugin == plugin), len(ranked))
    return ranked[at + 1 :]


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


def _check_nonfinite(mode: object) -> Literal["onnx", "torch"]:
    """``mode`` if it is a valid ``nonfinite`` value, else an :class:`OptionError`."""
    if mode not in NONFINITE_MODES:
        raise OptionError(
            f"nonfinite={mode!r} is not one of {', '.join(map(repr, NONFINITE_MODES))}",
            hint="'onnx' (default: the ONNX ops' own results on NaN and ±inf where torch's would cost run "
            "time; the report lists those ops) or 'torch' (torch's results on every input)",
        )
    return mode  # type: ignore[return-value]


@collector_paused()
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
    nonfinite: Literal["onnx", "torch"] = "onnx",
    report: str | os.PathLike[str] | None = None,
    weights: Weights | None = None,
    dtype: torch.dtype | None = None,
    keep_io_dtype: bool = True,
    max_shard_bytes: int | None = None,
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
        opset: target ONNX opset; default: :func:`pt2onnx.opset.default_opset`, the newest
            the installed onnxruntime runs with its own kernels.
        plugins: the highest plugin layer: modules, module names or plugin objects.
        disable: plugin names to block (as ``-p no:NAME`` on the command line).
        optimize: ``True``/``False``, a list of pass names, or ``{name: bool}``.
        f: if given, save the model there (atomically). Its missing parent folders are
            made before the export starts, and a location that cannot be written (a file
            where a folder is needed, no permission) raises :class:`~pt2onnx.errors.SaveError`
            then, before capture, so no export's work is lost to it. (``result.save(path)``
            makes no folders: it fails at once, with the result still in hand.)
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
        nonfinite: ``"onnx"``: every op matches torch on finite inputs, but where torch's
            results on NaN or ±inf would cost run time on every input (today: max
            pooling's, an ``If`` and a pass over the whole input per layer), the op gives
            the ONNX op's own; the report lists those ops and the inputs on which they
            differ (``report.nonfinite_deviations``). ``"torch"``: torch's results on
            every input.
        report: if given, write the export report there; the suffix picks the format
            (``.md``, ``.html``, ``.json``). ``save()`` and ``verify()`` on the result
            rewrite it, so it ends up holding their sizes and differences too.
        weights: where the weights' values are, for a model built on the meta device
            (``with torch.device("meta"): ...``, which capture needs no more than): a
            safetensors file, a folder of shards with its ``model.safetensors.index.json``,
            or a mapping of qualified names to tensors. It is matched to the model now (one
            :class:`~pt2onnx.errors.WeightsError` lists every missing, extra, mis-shaped or
            mis-typed tensor) and read one tensor at a time when the model is saved.
            Without it, a meta-device model exports but cannot be saved or run.
        dtype: convert the floating weights and the computation to this dtype
            (``torch.float16``, ``torch.bfloat16``): the model is captured as
            ``model.to(dtype)`` computes (on a meta-device copy; the model is left as it
            is) and its weights are converted one at a time as they are written.
        keep_io_dtype: with ``dtype``, keep the floating inputs in the example inputs'
            dtype and the outputs in the weights' original dtype (``Cast`` nodes at the
            graph's edges); ``False``: they are in ``dtype``.
        max_shard_bytes: with ``f``, split the external data into files of at most this size.
        quiet: no progress display (shown on stderr only when it is a terminal).

    Returns:
        An :class:`ExportResult` with ``.model``, ``.model_proto``, ``.save()``, ``.run()``,
        ``.verify()`` and ``.report``.
    """
    if report is not None:
        report_format(report)  # an unknown suffix fails now, not after the export
    if f is not None:
        prepare_location(f)  # its folders made, or a SaveError now, not after the export
    progress = Progress.for_terminal(quiet)
    export_report = Report()
    export_report.opset = target_opset = check_opset(opset)
    args, kwargs = normalize_args(args), dict(kwargs or {})
    others = [(normalize_args(a), dict(k or {})) for a, k in other_inputs]
    source_paths = check_source_paths(source_paths)
    export_report.nonfinite = nonfinite = _check_nonfinite(nonfinite)

    with export_report.phase("plugins"), progress.phase("plugins"):
        plugin_set = load_plugins(plugins, disable=disable)
        registry = build_registry(plugin_set, target_opset)
        export_report.passes_off = registry.rewrites_off_reasons()
        passes = select_passes(optimize, registry.rewrite_functions(), off=export_report.passes_off)
        registry.check_rewrites(name for name, _ in passes)
        pytrees = register_pytrees(registry)
    export_report.plugins = list(plugin_set.plugins.values())
    export_report.broken_plugins = list(plugin_set.broken)

    if f is None and max_shard_bytes is not None:
        raise OptionError(
            "max_shard_bytes= is an option of saving, and export() saves only with f=",
            hint="pass f='model.onnx' too, or give them to result.save(...)",
        )
    eager = None if isinstance(model, ExportedProgram) else as_module(model)
    check_example_inputs(args, kwargs)
    example = args, kwargs
    with export_report.phase("weights"):
        plan = WeightPlan.make(eager, weights, dtype)
        to_capture = plan.model
        args, kwargs = plan.inputs(args, kwargs)
        others = [plan.inputs(a, k) for a, k in others]

    with export_report.phase("capture"), progress.phase("capture"), torch_internal_warnings_silenced():
        preparation = prepare_capture(registry, pytrees, to_capture, args, kwargs, dynamic_shapes, others)
        shapes = preparation.dynamic_shapes
        captured = capture(
            to_capture or model,
            args,
            kwargs,
            dynamic_shapes=shapes,
            strict=strict,
            fallback=fallback,
            around=preparation.around,
            refine=dynamic_shapes == AUTO,
            narrow=dynamic_shapes == AUTO,
        )
        check_outputs(captured.program)
        prepared = preparation.applied(captured.program)
    export_report.capture, export_report.capture_fallback = captured.strategy, captured.fallback_reason
    export_report.shapes_refined = list(captured.refined)
    export_report.preparations = [
        f"{e.winner.kind} {e.winner.op} ({e.winner.plugin} [{e.winner.layer}])" for e in prepared
    ]
    if dynamic_shapes == AUTO and to_capture is not None:
        export_report.static_dims = static_dims(captured.program, args, kwargs, captured.narrowed)

    with export_report.phase("decompose"), progress.phase("decompose"), torch_internal_warnings_silenced():
        decomposed = decompose(captured.program, registry, force=decompose_all)
    program = decomposed.program
    export_report.retraced, export_report.decompose_reason = decomposed.retraced, decomposed.reason

    nodes = sum(node.op == "call_function" for node in program.graph.nodes)
    with export_report.phase("translate"), progress.phase("translate", nodes) as advance:
        signature = inspect.signature(eager.forward) if eager is not None else None
        dims = DimNames(dim_names(program, signature, args, kwargs, shapes))
        translator = GraphTranslator(
            registry, dims, target_opset, unknown_custom_ops=unknown_custom_ops, nonfinite=nonfinite
        )
        graph_module = program.graph_module
        if modules_as_functions:
            graph_module = outline_modules(graph_module, modules_as_functions)
        try:
            translated = translator.translate_program(graph_module, on_node=advance)
        except UnsupportedOpsError as e:
            raise decomposed.explain(e) from None
        guards = SizeGuards.of(captured.program, dims.names)
        export_report.guarded_sizes = guards.accepted()

    with export_report.phase("assemble"), progress.phase("assemble"):
        names = io_names(program, signature, preparation.templates())
        onnx_model, layout = assemble(program, translated, target_opset, names)
        plan.finish(onnx_model, program, example, keep_io_dtype=keep_io_dtype)
        check_shapes(onnx_model, translated)
    export_report.ops = _op_usage(registry, translated, decomposed.applied)
    export_report.nonfinite_deviations = [
        NonfiniteDeviation(op, count, plugin, deviation)
        for (op, plugin, deviation), count in translated.nonfinite_deviations.items()
    ]
    export_report.size_guards = translated.size_guards
    export_report.nodes_translated = count_nodes(onnx_model)

    with export_report.phase("optimize"), progress.phase("optimize"):
        export_report.passes = run_passes(onnx_model, passes)
        separate_outputs_from_subgraphs(onnx_model)
    export_report.nodes_final = count_nodes(onnx_model)
    export_report.contributions = _contributions(translated, decomposed, registry, export_report.passes, prepared)
    apply_source_paths(onnx_model, source_paths, project_root())
    export_report.inputs = [TensorInfo.of(v) for v in onnx_model.graph.inputs]
    export_report.outputs = [TensorInfo.of(v) for v in onnx_model.graph.outputs]
    export_report.weights_bytes = sum(
        v.const_value.nbytes for v in onnx_model.graph.initializers.values() if v.const_value is not None
    )

    result = ExportResult(
        onnx_model,
        program,
        layout,
        export_report,
        eager,
        dtype,
        progress=progress,
        report_file=report,
        quiet=quiet,
        guards=guards,
    )
    if f is not None:
        result.save(f, max_shard_bytes=max_shard_bytes, quiet=quiet)
    return result
