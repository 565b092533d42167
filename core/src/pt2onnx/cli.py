"""The ``pt2onnx`` command: ``plugins``, ``ops``, ``export``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import Pt2OnnxError
from .opnames import normalize_op_name
from .registry import Registry, session_registry

__all__ = ["main"]


def _blocked(values: Sequence[str]) -> list[str]:
    names = []
    for value in values:
        if not value.startswith("no:"):
            raise SystemExit(f"pt2onnx: -p takes no:NAME to block a plugin, got {value!r}")
        names.append(value[3:])
    return names


def _cmd_plugins(registry: Registry, _: argparse.Namespace) -> int:
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


def _cmd_export(registry: Registry, args: argparse.Namespace) -> int:
    from .export import export

    made = _load_factory(args.factory)()
    model, inputs = made[0], made[1]
    options = dict(made[2]) if len(made) > 2 else {}
    if isinstance(inputs, dict):
        call_args, call_kwargs = tuple(inputs.get("args", ())), dict(inputs.get("kwargs", {}))
    else:
        call_args, call_kwargs = tuple(inputs), {}
    result = export(
        model, call_args, call_kwargs, disable=args.blocked, opset=args.opset, strict=args.strict, **options
    )
    result.save(args.output)
    print(f"saved {args.output}: {len(result.model.graph)} nodes, opset {result.report.opset}")
    if args.report:
        print(result.report)
    if args.verify:
        check = result.verify(*call_args, **call_kwargs)
        print(check)
        print(f"max abs difference to eager: {check.max_abs:.3g}")
        return 0 if check.ok else 1
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pt2onnx", description="PyTorch to ONNX exporter built on plugins.")
    parser.add_argument(
        "-p",
        dest="plugin_flags",
        action="append",
        default=[],
        metavar="no:NAME",
        help="block a plugin by name (repeatable)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("plugins", help="list plugins, their layers and what they register")
    ops = sub.add_parser("ops", help="which plugin converts an op, and what it shadows")
    ops.add_argument("ops", nargs="*", metavar="OP", help="e.g. aten::gelu or aten::add.Tensor")
    ops.add_argument("--coverage", action="store_true", help="coverage of the Core ATen opset")
    exp = sub.add_parser("export", help="export MODULE:FACTORY (returns model, example inputs[, options])")
    exp.add_argument("factory", metavar="MODULE:FACTORY")
    exp.add_argument("-o", "--output", required=True)
    exp.add_argument("--verify", action="store_true", help="run in onnxruntime and compare with eager")
    exp.add_argument("--report", action="store_true", help="print the export report")
    exp.add_argument("--opset", type=int, default=None)
    exp.add_argument("--strict", action="store_true", help="capture with strict=True")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``pt2onnx`` console script."""
    args = _parser().parse_args(argv)
    args.blocked = _blocked(args.plugin_flags)
    commands = {"plugins": _cmd_plugins, "ops": _cmd_ops, "export": _cmd_export}
    try:
        registry = session_registry(disable=args.blocked)
        return commands[args.command](registry, args)
    except Pt2OnnxError as e:
        print(f"pt2onnx: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
