"""``pt2onnx.export``: the whole pipeline, one phase after the other.

plugins -> capture -> decompose -> translate -> assemble -> optimize -> (save)
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
from .decompose import decompose
from .module_functions import ModuleSelection, outline_modules
from .opset import check_opset
from .optimize import count_nodes, select_passes
from .optimize import optimize as run_passes
from .plugin_manager import load_plugins
from .progress import Progress
from .registry import Registry, build_registry
from .report import OpUsage, Report, TensorInfo, report_format
from .result import ExportResult
from .signature import dim_names
from .symbolic import DimNames
from .torch_warnings import torch_internal_warnings_silenced
from .translate import GraphTranslator, TranslatedGraph

__all__ = ["export"]


def _op_usage(registry: Registry, translated: TranslatedGraph) -> list[OpUsage]:
    layers = {name: str(info.layer) for name, info in registry.plugin_set.plugins.items()}
    rows = []
    for (op, plugin), count in sorted(translated.usage.items()):
        entry = translated.entries.get(op)
        shadowed = tuple(f"{s.plugin} [{s.layer}]" for s in entry.shadowed) if entry else ()
        rows.append(OpUsage(op, count, plugin, layers.get(plugin, "-"), shadowed))
    return rows


def export(
    model: torch.nn.Module | ExportedProgram | Any,
    args: tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
    *,
    dynamic_shapes: Any = None,
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
    report: str | os.PathLike[str] | None = None,
    quiet: bool = False,
) -> ExportResult:
    """Export a PyTorch model to ONNX.

    Args:
        model: an ``nn.Module``, a callable, or an already captured ``ExportedProgram``.
        args: example positional inputs, as the model is called.
        kwargs: example keyword inputs, as the model is called.
        dynamic_shapes: as for ``torch.export.export`` (``Dim`` names name the ONNX dims).
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

    with export_report.phase("plugins"), progress.phase("plugins"):
        plugin_set = load_plugins(plugins, disable=disable)
        registry = build_registry(plugin_set)
        passes = select_passes(optimize, {name: e.winner.fn for name, e in registry.rewrites.items() if e.winner.fn})
    export_report.plugins = list(plugin_set.plugins.values())
    export_report.broken_plugins = list(plugin_set.broken)

    with export_report.phase("capture"), progress.phase("capture"), torch_internal_warnings_silenced():
        captured = capture(model, tuple(args), kwargs, dynamic_shapes=dynamic_shapes, strict=strict, fallback=fallback)
    export_report.capture, export_report.capture_fallback = captured.strategy, captured.fallback_reason

    with export_report.phase("decompose"), progress.phase("decompose"), torch_internal_warnings_silenced():
        decomposed = decompose(captured.program, registry, force=decompose_all)
    program = decomposed.program
    export_report.retraced, export_report.decompose_reason = decomposed.retraced, decomposed.reason

    nodes = sum(node.op == "call_function" for node in program.graph.nodes)
    with export_report.phase("translate"), progress.phase("translate", nodes) as advance:
        eager = None if isinstance(model, ExportedProgram) else as_module(model)
        signature = inspect.signature(eager.forward) if eager is not None else None
        dims = DimNames(dim_names(program, signature, tuple(args), kwargs, dynamic_shapes))
        translator = GraphTranslator(registry, dims, target_opset, unknown_custom_ops=unknown_custom_ops)
        graph_module = program.graph_module
        if modules_as_functions:
            graph_module = outline_modules(graph_module, modules_as_functions)
        translated = translator.translate_program(graph_module, on_node=advance)

    with export_report.phase("assemble"), progress.phase("assemble"):
        onnx_model, layout = assemble(program, translated, target_opset)
    export_report.ops = _op_usage(registry, translated)
    export_report.nodes_translated = count_nodes(onnx_model)

    with export_report.phase("optimize"), progress.phase("optimize"):
        export_report.passes = run_passes(onnx_model, passes)
    export_report.nodes_final = count_nodes(onnx_model)
    export_report.inputs = [TensorInfo.of(v) for v in onnx_model.graph.inputs]
    export_report.outputs = [TensorInfo.of(v) for v in onnx_model.graph.outputs]
    export_report.weights_bytes = sum(
        v.const_value.nbytes for v in onnx_model.graph.initializers.values() if v.const_value is not None
    )

    result = ExportResult(onnx_model, program, layout, export_report, eager, progress=progress, report_file=report)
    if f is not None:
        result.save(f)
    return result
