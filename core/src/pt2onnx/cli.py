"""The ``pt2onnx`` command: ``plugins``, ``ops``, ``export``.

Only argparse is imported before the arguments are parsed: torch and the plugins load
when a command needs them, so ``--help`` answers at once.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import Pt2OnnxError

if TYPE_CHECKING:
    from .registry import Registry

__all__ = ["main"]

_DESCRIPTION = """\
PyTorch to ONNX exporter built on plugins.

examples:
  pt2onnx plugins                       plugins, their layers, what each registers and overrides
  pt2onnx ops aten::gelu                which plugin converts an op, and what it shadows
  pt2onnx ops --coverage                coverage of the Core ATen opset
  pt2onnx export models.py:make -o model.onnx --dynamic x:0=batch --verify --report report.html
  pt2onnx export program.pt2 -o model.onnx
  pt2onnx -p no:fusions export models.py:make -o model.onnx   (block one plugin)
"""

_EXPORT_DESCRIPTION = """\
Export a model to ONNX. SOURCE is either

  MODULE:FACTORY   a function in a module (`models.py:make` or `mypkg.models:make`) returning
                   (model, example_args) or (model, example_args, export_options): a tuple of
                   positional inputs, or {"args": (...), "kwargs": {...}}; the options are
                   keyword arguments of pt2onnx.export (dynamic_shapes, strict, ...)
  PROGRAM.pt2      an ExportedProgram saved with torch.export.save. Loading it unpickles
                   Python objects, which can run arbitrary code: convert only a .pt2 file
                   from a source you trust.

examples:
  pt2onnx export models.py:make -o model.onnx --verify
  pt2onnx export models.py:make -o model.onnx --dynamic x:0=batch --dynamic x:1=seq --report report.md
  pt2onnx export program.pt2 -o model.onnx --report report.html --json
"""


def _blocked(values: Sequence[str]) -> list[str]:
    names = []
    for value in values:
        if not value.startswith("no:"):
            raise SystemExit(f"pt2onnx: -p takes no:NAME to block a plugin, got {value!r}")
        names.append(value[3:])
    return names


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2))


def _cmd_plugins(registry: Registry, args: argparse.Namespace) -> int:
    if args.json:
        from .inventory import plugins_data

        _print_json(plugins_data(registry))
        return 0
    plugin_set = registry.plugin_set
    grouped = registry.by_plugin()
    print(
        f"{'plugin':<28} {'layer':<10} {'distribution':<22} {'version':<9} converters lowerings custom_ops decompositions keeps rewrites"
    )
    for info in sorted(plugin_set.plugins.values(), key=lambda p: (-p.layer, p.name)):
        kinds = Counter(r.kind for r in grouped.get(info.name, []))
        print(
            f"{info.name:<28} {info.layer!s:<10} {info.distribution or '-':<22} {info.version or '-':<9} "
            f"{kinds['converter']:>10} {kinds['lowering']:>9} {kinds['custom_op']:>10} "
            f"{kinds['decomposition']:>14} {kinds['keep']:>5} {kinds['rewrite']:>8}"
        )
        for entry in registry.overrides(info.name):
            shadowed = ", ".join(f"{s.plugin} [{s.layer}]" for s in entry.shadowed if s.plugin != info.name)
            print(f"    overrides {entry.winner.op}: {shadowed}")
    if plugin_set.project_config is not None:
        print(f"project config: {plugin_set.project_config}")
    for name in plugin_set.blocked:
        print(f"blocked: {name}")
    for broken in plugin_set.broken:
        print(f"BROKEN {broken.name} ({broken.distribution or 'project'}): {broken.error}")
    return 0


def _cmd_ops(registry: Registry, args: argparse.Namespace) -> int:
    from .opnames import normalize_op_name

    if args.json:
        from .inventory import coverage_data, ops_data

        if args.coverage:
            _print_json(coverage_data(registry))
            return 0
        found = ops_data(registry, args.ops)
        _print_json(found)
        return 1 if any("error" in op or not (op["converters"] or op["decomposed_by"]) for op in found) else 0
    if args.coverage:
        from .coverage import coverage_report

        print(coverage_report(registry))
        return 0
    status = 0
    for raw in args.ops:
        try:
            name = normalize_op_name(raw)
        except ValueError as e:
            print(f"{raw}: {e}")
            status = 1
            continue
        packet = name.split(".", 1)[0]
        matches = registry.entries_for(name)
        if not matches:
            decomposition = registry.decompositions.get(name) or registry.decompositions.get(packet)
            if decomposition is not None:
                print(f"{name}: decomposed by {decomposition.winner.plugin} [{decomposition.winner.layer}]")
            else:
                kept = " (kept whole)" if name in registry.kept or packet in registry.kept else ""
                print(f"{name}: no converter{kept}")
                status = 1
            continue
        for key, entry in sorted(matches.items()):
            w = entry.winner
            fn = f"{getattr(w.fn, '__module__', '?')}.{getattr(w.fn, '__qualname__', '?')}"
            print(f"{key}: {w.kind} {fn} from {w.plugin} [{w.layer}]" + (" (override=True)" if w.override else ""))
            for s in entry.shadowed:
                print(f"    shadows {s.plugin} [{s.layer}]")
    return status


def _load_factory(spec: str) -> Any:
    module_name, _, attr = spec.partition(":")
    if not attr:
        raise SystemExit(f"pt2onnx export: expected MODULE:FACTORY, got {spec!r}")
    if module_name.endswith(".py") or "/" in module_name:
        path = Path(module_name).resolve()
        sys.path.insert(0, str(path.parent))
        module_name = path.stem
    else:
        sys.path.insert(0, str(Path.cwd()))
    return getattr(importlib.import_module(module_name), attr)


def _dynamic_shapes(flags: Sequence[str], model: Any, given: Any) -> Any:
    """``dynamic_shapes`` from ``--dynamic NAME:AXIS[=DIM]`` flags, merged over the factory's."""
    import inspect

    import torch

    from .capture import as_module

    if not flags:
        return given
    if given is not None and not isinstance(given, dict):
        raise SystemExit("pt2onnx export: --dynamic cannot be combined with the factory's non-dict dynamic_shapes")
    parameters = list(inspect.signature(as_module(model).forward).parameters)
    dims: dict[str, Any] = {}
    shapes: dict[str, Any] = dict(given or {})
    for flag in flags:
        target, _, dim_name = flag.partition("=")
        name, _, axis = target.partition(":")
        if not name or not axis.lstrip("-").isdigit():
            raise SystemExit(f"pt2onnx export: --dynamic takes NAME:AXIS[=DIM] (e.g. x:0=batch), got {flag!r}")
        if name not in parameters:
            raise SystemExit(
                f"pt2onnx export: --dynamic {flag}: the model has no input {name!r}; its inputs are {parameters}"
            )
        dim_name = dim_name or f"{name}_{axis}"
        if dim_name not in dims:
            dims[dim_name] = torch.export.Dim(dim_name)
        shapes.setdefault(name, {})[int(axis)] = dims[dim_name]
    return shapes


def _load_program(path: str) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """A saved ExportedProgram and the example inputs saved with it (unpickles: trusted files only)."""
    import torch

    if not Path(path).is_file():
        raise SystemExit(f"pt2onnx export: {path} is not a file")
    program = torch.export.load(path)
    example = program.example_inputs
    call_args, call_kwargs = (tuple(example[0]), dict(example[1])) if example is not None else ((), {})
    return program, call_args, call_kwargs


def _cmd_export(args: argparse.Namespace) -> int:
    from .export import export
    from .report import report_format

    if args.report not in (None, "-"):
        report_format(args.report)  # an unknown suffix fails before the export
    if args.factory.endswith(".pt2"):
        if args.dynamic:
            raise SystemExit("pt2onnx export: a .pt2 program has its dynamic shapes already; drop --dynamic")
        model, call_args, call_kwargs = _load_program(args.factory)
        options: dict[str, Any] = {}
    else:
        made = _load_factory(args.factory)()
        model, inputs = made[0], made[1]
        options = dict(made[2]) if len(made) > 2 else {}
        if isinstance(inputs, dict):
            call_args, call_kwargs = tuple(inputs.get("args", ())), dict(inputs.get("kwargs", {}))
        else:
            call_args, call_kwargs = tuple(inputs), {}
        options["dynamic_shapes"] = _dynamic_shapes(args.dynamic, model, options.get("dynamic_shapes"))
    if args.opset is not None:
        options["opset"] = args.opset
    if args.strict is not None:
        options["strict"] = args.strict
    plugins = [name for value in args.plugins for name in value.split(",") if name]
    if plugins:
        options["plugins"] = [*options.get("plugins", ()), *plugins]
    disable = [*args.blocked, *_blocked(args.export_plugin_flags)]
    report_file = args.report if args.report not in (None, "-") else None
    quiet = args.quiet or args.json
    result = export(model, call_args, call_kwargs, disable=disable, report=report_file, quiet=quiet, **options)
    written = result.save(args.output)
    check = None
    if args.verify:
        if isinstance(model, type(result.program)) and not (call_args or call_kwargs):
            raise SystemExit(f"pt2onnx export --verify: {args.factory} holds no example inputs to verify with")
        check = result.verify(*call_args, **call_kwargs)
    if args.json:
        _print_json(
            {
                "output": str(args.output),
                "files": {str(p): p.stat().st_size for p in written},
                "nodes": len(result.model.graph),
                "opset": result.report.opset,
                "verified": None if check is None else check.ok,
                "report_file": report_file,
                "report": result.report.to_dict(),
            }
        )
        return 0 if check is None or check.ok else 1
    print(f"saved {args.output}: {len(result.model.graph)} nodes, opset {result.report.opset}")
    if args.report == "-":
        print(result.report)
    elif report_file is not None:
        print(f"report: {report_file}")
    if check is not None:
        print(check)
        print(f"max abs difference to eager: {check.max_abs:.3g}")
        return 0 if check.ok else 1
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pt2onnx", description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "-p",
        dest="plugin_flags",
        action="append",
        default=[],
        metavar="no:NAME",
        help="block a plugin by name (repeatable)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    plugins = sub.add_parser("plugins", help="list plugins, their layers and what they register")
    plugins.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ops = sub.add_parser("ops", help="which plugin converts an op, and what it shadows")
    ops.add_argument("ops", nargs="*", metavar="OP", help="e.g. aten::gelu or aten::add.Tensor")
    ops.add_argument("--coverage", action="store_true", help="coverage of the Core ATen opset")
    ops.add_argument("--json", action="store_true", help="print JSON instead of text")
    exp = sub.add_parser(
        "export",
        help="export MODULE:FACTORY or a saved PROGRAM.pt2 to ONNX",
        description=_EXPORT_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    exp.add_argument("factory", metavar="SOURCE", help="MODULE:FACTORY or PROGRAM.pt2 (see above)")
    exp.add_argument("-o", "--output", required=True, help="the .onnx file to write")
    exp.add_argument(
        "--dynamic",
        action="append",
        default=[],
        metavar="NAME:AXIS[=DIM]",
        help="make an input's axis dynamic, named DIM (default NAME_AXIS); inputs sharing a DIM "
        "have equal sizes (repeatable)",
    )
    exp.add_argument("--opset", type=int, default=None, help="target ONNX opset (default: the newest onnxruntime runs)")
    mode = exp.add_mutually_exclusive_group()
    mode.add_argument("--strict", dest="strict", action="store_const", const=True, help="capture with strict=True")
    mode.add_argument(
        "--non-strict", dest="strict", action="store_const", const=False, help="capture with strict=False (default)"
    )
    exp.add_argument(
        "--plugins",
        action="append",
        default=[],
        metavar="MODULE[,MODULE]",
        help="plugin modules for this export, the highest layer (repeatable)",
    )
    exp.add_argument(
        "-p", dest="export_plugin_flags", action="append", default=[], metavar="no:NAME", help="block a plugin"
    )
    exp.add_argument("--verify", action="store_true", help="run in onnxruntime and compare with eager")
    exp.add_argument(
        "--report",
        nargs="?",
        const="-",
        default=None,
        metavar="FILE",
        help="write the export report to FILE (.md, .html or .json); without FILE, print it",
    )
    exp.add_argument("--quiet", action="store_true", help="no progress display")
    exp.add_argument("--json", action="store_true", help="print the result and the report as JSON")
    return parser


def _session_registry(blocked: Sequence[str]) -> Registry:
    from .registry import session_registry

    return session_registry(disable=blocked)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``pt2onnx`` console script."""
    args = _parser().parse_args(argv)
    args.blocked = _blocked(args.plugin_flags)
    commands = {"plugins": _cmd_plugins, "ops": _cmd_ops}
    try:
        if args.command == "export":
            # export() loads the plugins itself: loading them here too would warn twice about a broken one.
            return _cmd_export(args)
        return commands[args.command](_session_registry(args.blocked), args)
    except Pt2OnnxError as e:
        print(f"pt2onnx: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
