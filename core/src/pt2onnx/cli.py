"""The ``pt2onnx`` command: ``plugins``, ``ops``, ``export``.

Errors print as one paragraph on stderr, without a traceback unless ``--debug``; the
exit status says what failed (:data:`EXIT_CODES`). A closed output pipe
(``pt2onnx plugins | head -1``) ends the command quietly and never changes its exit
status: stdout is flushed before ``main`` returns, not left to the interpreter's exit.
Only the standard library is imported before the arguments are parsed: torch and the
plugins load when a command needs them, so ``--help`` and ``--version`` answer at once.

The commands only parse and print: what ``plugins`` and ``ops`` show is gathered by
:mod:`pt2onnx.inspection` (its text and its ``--json`` render the same data), and the
code ``export`` names is imported by :mod:`pt2onnx.loader`.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib.metadata
import json
import os
import platform
import re
import sys
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from .collector import collector_paused
from .errors import (
    CaptureError,
    OptionError,
    PluginLoadWarning,
    Pt2OnnxError,
    UnsupportedOpsError,
    VerificationError,
)
from .loader import SourceError, UserCodeError, import_cli_plugins, load_factory

if TYPE_CHECKING:
    from .registry import Registry

__all__ = ["EXIT_CODES", "freeze_at_exit", "main"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_UNSUPPORTED = 3
EXIT_CAPTURE = 4
EXIT_VERIFICATION = 5

#: Each exit status of the command and what it means.
EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_ERROR: "any other error (plugins, a broken [tool.pt2onnx] in the project's pyproject.toml, translation, "
    "optimization, saving, an exception in your factory); `ops`: an op named has no converter",
    EXIT_USAGE: "usage: bad arguments or options, a MODULE:FACTORY or --plugins module that cannot be found, "
    "`ops` without an op",
    EXIT_UNSUPPORTED: "the model holds ops no plugin converts",
    EXIT_CAPTURE: "torch.export could not capture the model",
    EXIT_VERIFICATION: "the exported model does not run, or differs from eager PyTorch (--verify)",
}


class UsageError(Exception):
    """A command-line mistake: printed with the command's usage, exit status 2."""


#: Printed with the command's usage, exit status 2: a mistake on the command line, or code it names that is not there.
_USAGE_ERRORS = (UsageError, SourceError)
#: Errors whose message says it all: printed without their type.
_OWN_ERRORS = (Pt2OnnxError, UsageError, SourceError, UserCodeError)


_DESCRIPTION = """\
PyTorch to ONNX exporter built on plugins.

examples:
  pt2onnx plugins                       plugins, their layers, what each registers and overrides
  pt2onnx plugins --opset 18            ... and what each overrides at opset 18
  pt2onnx ops aten::gelu                which plugin converts an op, and what it shadows
  pt2onnx ops --coverage                coverage of the Core ATen opset
  pt2onnx export models.py:make -o model.onnx --dynamic x:0=batch --verify --report report.html
  pt2onnx export program.pt2 -o model.onnx
  pt2onnx --version                     pt2onnx's version, and torch's, onnx's, onnxruntime's
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
  pt2onnx export models.py:make_on_meta -o model.onnx --weights checkpoint/ --dtype float16 --max-shard-bytes 2GB
"""

#: The distributions ``--version`` names beside pt2onnx.
_VERSIONS_OF = ("torch", "onnx", "onnxruntime", "onnx-ir", "onnxscript")
#: ``--dtype`` choices: torch's names.
_DTYPES = ("float16", "bfloat16", "float32")
#: ``--max-shard-bytes`` units.
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}

#: Whether :func:`freeze_at_exit` registered its callback in this process.
_freezing_at_exit = False


def _blocked(values: Sequence[str]) -> list[str]:
    names = []
    for value in values:
        if not value.startswith("no:") or not value[3:]:
            raise UsageError(f"-p takes no:NAME to block a plugin, got {value!r}")
        names.append(value[3:])
    return names


def _echo(text: object) -> None:
    """Print ``text`` on stdout; once the reader has closed the pipe, print nothing more (the
    command goes on, and ends with its own exit status)."""
    try:
        print(text)
    except BrokenPipeError:
        _silence_stdout()


def _print_json(data: Any) -> None:
    _echo(json.dumps(data, indent=2))


def _quiet_registry(blocked: Sequence[str], opset: int | None = None) -> Registry:
    """The session's registry; its broken plugins (the project's too) are listed by the command,
    not warned about twice, and never stop it: it is how the user sees why an export stops."""
    from .opset import check_opset
    from .plugin_manager import load_plugins
    from .registry import build_registry

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginLoadWarning)
        return build_registry(load_plugins(disable=blocked, diagnose=True), check_opset(opset))


def _cmd_plugins(args: argparse.Namespace) -> int:
    from .inspection import inspect_plugins

    found = inspect_plugins(_quiet_registry(args.blocked, args.opset))
    if args.json:
        _print_json(found.to_dict())
    else:
        _echo("\n".join(found.lines()))
    return EXIT_OK


def _cmd_ops(args: argparse.Namespace) -> int:
    if not args.ops and not args.coverage:
        raise UsageError("name at least one op (e.g. aten::gelu or aten::add.Tensor), or pass --coverage")
    registry = _quiet_registry(args.blocked, args.opset)  # broken plugins are noted below, once
    if args.coverage:
        if args.json:
            from .inspection import coverage_data

            _print_json(coverage_data(registry))
        else:
            from .coverage import coverage_report

            _echo(coverage_report(registry))
        return EXIT_OK
    from .inspection import inspect_ops

    found = inspect_ops(registry, args.ops)
    if args.json:
        _print_json(found.to_list())
    else:
        _echo("\n".join(found.lines()))
    return EXIT_OK if found.handled else EXIT_ERROR


def _made(spec: str, made: Any) -> tuple[Any, tuple[Any, ...], dict[str, Any], dict[str, Any]]:
    if not isinstance(made, (tuple, list)) or len(made) not in (2, 3):
        raise UsageError(
            f"{spec} must return (model, inputs) or (model, inputs, export options), got {type(made).__name__}"
        )
    model, inputs = made[0], made[1]
    options = dict(made[2]) if len(made) > 2 else {}
    if isinstance(inputs, dict):
        return model, tuple(inputs.get("args", ())), dict(inputs.get("kwargs", {})), options
    return model, tuple(inputs), {}, options


def _dynamic_shapes(flags: Sequence[str], model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], given: Any) -> Any:
    """``dynamic_shapes`` from ``--dynamic NAME:AXIS[=DIM]`` flags, merged over the factory's."""
    from .capture import as_module
    from .interface.shapes import dynamic_axes

    axes: list[tuple[str, int, str | None]] = []
    for flag in flags:
        target, _, dim_name = flag.partition("=")
        name, _, axis = target.partition(":")
        if not name or not axis.lstrip("-").isdigit():
            raise UsageError(f"--dynamic takes NAME:AXIS[=DIM] (e.g. x:0=batch), got {flag!r}")
        axes.append((name, int(axis), dim_name or None))
    try:
        return dynamic_axes(as_module(model).forward, args, kwargs, axes, given)
    except OptionError as e:
        raise UsageError(f"--dynamic: {e}") from None


def _load_program(path: str) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """A saved ExportedProgram and the example inputs saved with it (unpickles: trusted files only)."""
    import torch

    if not Path(path).is_file():
        raise UsageError(f"{path}: no such file (in {Path.cwd()})")
    program = torch.export.load(path)
    example = program.example_inputs
    call_args, call_kwargs = (tuple(example[0]), dict(example[1])) if example is not None else ((), {})
    return program, call_args, call_kwargs


def _cmd_export(args: argparse.Namespace) -> int:
    if args.weights is not None and not Path(args.weights).exists():
        raise UsageError(f"--weights {args.weights}: no such file or folder (in {Path.cwd()})")
    from .export import export
    from .report import report_format
    from .save import prepare_location

    prepare_location(args.output)  # its folders made, or a SaveError now, not after the export

    if args.report not in (None, "-"):
        report_format(args.report)  # an unknown suffix fails before the export
    if args.factory.endswith(".pt2"):
        if args.dynamic:
            raise UsageError("a .pt2 program has its dynamic shapes already; drop --dynamic")
        model, call_args, call_kwargs = _load_program(args.factory)
        options: dict[str, Any] = {}
    else:
        factory = load_factory(args.factory)
        try:
            made = factory()
        except Exception as e:  # the user's factory may raise anything
            raise UserCodeError(f"{args.factory} raised", e) from e
        model, call_args, call_kwargs, options = _made(args.factory, made)
        options["dynamic_shapes"] = _dynamic_shapes(
            args.dynamic, model, call_args, call_kwargs, options.get("dynamic_shapes")
        )
    for key, value in (
        ("opset", args.opset),
        ("strict", args.strict),
        ("source_paths", args.source_paths),
        ("nonfinite", args.nonfinite),
        ("weights", args.weights),
        ("dtype", _dtype(args.dtype)),
    ):
        if value is not None:
            options[key] = value
    if args.verify:
        _check_verifiable(args.factory, model, options.get("weights"))
    plugins = [name for value in args.plugins for name in value.split(",") if name]
    if plugins:
        options["plugins"] = [*options.get("plugins", ()), *import_cli_plugins(plugins)]
    disable = [*args.blocked, *_blocked(args.export_plugin_flags)]
    report_file = args.report if args.report not in (None, "-") else None
    quiet = args.quiet or args.json
    result = export(model, call_args, call_kwargs, disable=disable, report=report_file, quiet=quiet, **options)
    written = result.save(args.output, max_shard_bytes=args.max_shard_bytes)
    check = None
    if args.verify:
        from .progress import Progress

        if isinstance(model, type(result.program)) and not (call_args or call_kwargs):
            raise UsageError(f"{args.factory} holds no example inputs to verify with")
        with Progress.for_terminal(quiet).phase("verify"):
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
        return EXIT_OK if check is None or check.ok else EXIT_VERIFICATION
    _echo(f"saved {args.output}: {len(result.model.graph)} nodes, opset {result.report.opset}")
    deviating = result.report.nonfinite_deviations
    if deviating:
        ops = ", ".join(d.op for d in deviating)
        verb = "differs" if len(deviating) == 1 else "differ"
        _echo(f"non-finite inputs: {ops} {verb} from torch on some NaN or ±inf (--nonfinite torch: torch's results)")
    if args.report == "-":
        _echo(result.report)
    elif report_file is not None:
        _echo(f"report: {report_file}")
    if check is not None:
        _echo(check)
        _echo(f"max abs difference to eager: {check.max_abs:.3g}")
        if not check.ok:
            raise VerificationError("the exported model differs from eager PyTorch beyond the tolerance (see above)")
    return EXIT_OK


def _dtype(name: str | None) -> Any:
    """The torch dtype ``--dtype`` names (torch is imported only when it is given)."""
    if name is None:
        return None
    import torch

    return getattr(torch, name)


def _check_verifiable(spec: str, model: Any, weights: Any) -> None:
    """``--verify`` runs the model in eager PyTorch: a model built on the meta device cannot run."""
    import torch

    if not isinstance(model, torch.nn.Module):
        return
    if any(t.is_meta for t in (*model.parameters(), *model.buffers())):
        where = f"; --weights {weights} gives the ONNX model its weights, not the eager one" if weights else ""
        raise UsageError(
            f"--verify compares with eager PyTorch, and {spec} builds the model on the meta device (no weights "
            f"to run with){where}: drop --verify, or build the model with its weights"
        )


def _byte_count(text: str) -> int:
    """``--max-shard-bytes``: a positive number of bytes, plain (``2000000000``, ``2_000_000_000``) or with
    a unit (``500MB``, ``2GB``, ``2GiB``)."""
    match = re.fullmatch(r"\s*(\d[\d_]*(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    unit = match[2].lower() if match else ""
    if match is None or unit not in _UNITS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a size: give a number of bytes, or one with a unit "
            f"({', '.join(u.upper().replace('I', 'i') for u in _UNITS if u)}), e.g. 2GB or 500MiB"
        )
    count = int(float(match[1].replace("_", "")) * _UNITS[unit])
    if count <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive size")
    return count


class _VersionAction(argparse.Action):
    """``--version``: pt2onnx's version and those of what it runs on, read from the installed
    distributions' metadata (nothing is imported)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        _echo(_versions())
        parser.exit()


def _versions() -> str:
    from . import __version__

    versions = []
    for name in _VERSIONS_OF:
        try:
            versions.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{name} not installed")
    return f"pt2onnx {__version__} ({', '.join(versions)}; Python {platform.python_version()})"


def _epilog() -> str:
    codes = "\n".join(f"  {code}  {meaning}" for code, meaning in EXIT_CODES.items())
    return f"exit status:\n{codes}\n\nErrors print without a traceback; --debug adds it."


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    parser = argparse.ArgumentParser(
        prog="pt2onnx",
        description=_DESCRIPTION,
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="print tracebacks of errors")
    parser.add_argument("--debug", action="store_true", help="print tracebacks of errors")
    parser.add_argument(
        "--version", action=_VersionAction, help="print the versions of pt2onnx, torch, onnx and onnxruntime, and exit"
    )
    parser.add_argument(
        "-p",
        dest="plugin_flags",
        action="append",
        default=[],
        metavar="no:NAME",
        help="block a plugin by entry-point, distribution or module name (repeatable)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    plugins = sub.add_parser(
        "plugins", parents=[debug], help="list plugins, their layers, what they register, what is broken"
    )
    plugins.add_argument("--json", action="store_true", help="print JSON instead of a table")
    plugins.add_argument(
        "--opset",
        type=int,
        default=None,
        help="say what each plugin overrides at this target opset (default: the newest onnxruntime runs at full speed)",
    )
    ops = sub.add_parser("ops", parents=[debug], help="which plugin converts an op, and what it shadows")
    ops.add_argument("ops", nargs="*", metavar="OP", help="e.g. aten::gelu or aten::add.Tensor")
    ops.add_argument("--coverage", action="store_true", help="coverage of the Core ATen opset")
    ops.add_argument("--json", action="store_true", help="print JSON instead of text")
    ops.add_argument(
        "--opset",
        type=int,
        default=None,
        help="resolve for this target opset (default: the newest onnxruntime runs at full speed)",
    )
    exp = sub.add_parser(
        "export",
        parents=[debug],
        help="export MODULE:FACTORY or a saved PROGRAM.pt2 to ONNX",
        description=_EXPORT_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    exp.add_argument("factory", metavar="SOURCE", help="MODULE:FACTORY or PROGRAM.pt2 (see above)")
    exp.add_argument("-o", "--output", required=True, help="the .onnx file to write (missing folders are made)")
    exp.add_argument(
        "--dynamic",
        action="append",
        default=[],
        metavar="NAME:AXIS[=DIM]",
        help="make an input's axis dynamic, named DIM (default NAME_dimAXIS); inputs sharing a DIM "
        "have equal sizes (repeatable)",
    )
    exp.add_argument(
        "--opset", type=int, default=None, help="target ONNX opset (default: the newest onnxruntime runs at full speed)"
    )
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
    exp.add_argument(
        "--weights",
        default=None,
        metavar="PATH",
        help="the weights of a model built on the meta device: a .safetensors file, or a folder of shards "
        "(with its model.safetensors.index.json); read one tensor at a time as the model is saved",
    )
    exp.add_argument(
        "--dtype",
        choices=_DTYPES,
        default=None,
        help="convert the floating weights and the computation to this dtype (inputs and outputs keep theirs)",
    )
    exp.add_argument(
        "--max-shard-bytes",
        type=_byte_count,
        default=None,
        metavar="SIZE",
        help="save the weights as external data in files of at most SIZE bytes (e.g. 2GB, 500MiB, 1000000)",
    )
    exp.add_argument(
        "--verify", action="store_true", help="run in onnxruntime and compare with eager (exit 5 if they differ)"
    )
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
    exp.add_argument(
        "--source-paths",
        choices=["relative", "full", "none"],
        default=None,
        help="source file paths in the model's provenance metadata (default: relative to the project root)",
    )
    exp.add_argument(
        "--nonfinite",
        choices=["onnx", "torch"],
        default=None,
        help="results on NaN and ±inf: 'onnx' (default) keeps the ONNX op's own where torch's cost run time "
        "(max pooling; the report lists such ops), 'torch' exports torch's exact forms",
    )
    return parser, {"plugins": plugins, "ops": ops, "export": exp}


def _exit_code(error: BaseException) -> int:
    if isinstance(error, (*_USAGE_ERRORS, OptionError)):
        return EXIT_USAGE
    if isinstance(error, UnsupportedOpsError):
        return EXIT_UNSUPPORTED
    if isinstance(error, CaptureError):
        return EXIT_CAPTURE
    if isinstance(error, VerificationError):
        return EXIT_VERIFICATION
    return EXIT_ERROR


def _paragraph(error: BaseException) -> str:
    text = str(error) if isinstance(error, _OWN_ERRORS) else f"{type(error).__name__}: {error}"
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    print(f"pt2onnx: warning: {message}", file=file or sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``pt2onnx`` console script; returns the exit status (:data:`EXIT_CODES`).

    Whatever the command printed is flushed before this returns (or ``--help`` exits): a
    reader that closed the pipe then ends the command quietly, with the status the command
    had, instead of failing the interpreter's flush at exit (status 120). The garbage collector
    is paused while the command runs, imports of torch and the user's model included
    (:mod:`pt2onnx.collector`), and enabled again when it returns.
    """
    freeze_at_exit()
    try:
        with collector_paused():
            return _main(argv)
    finally:
        _flush_stdout()


def freeze_at_exit() -> None:
    """At the interpreter's exit, move every live object out of the garbage collector's reach.

    The interpreter's final collections walk every object torch and an export leave (some
    470,000 after a small Llama's export): about 1 s of a command's wall time on a 2-core
    machine, to free memory the operating system takes back anyway. Frozen at exit, those
    walks find nothing to do. ``atexit`` callbacks still run; only cyclic garbage left at exit
    is not finalized, which Python does not promise either. Registered once per process; a
    caller of :func:`main` that goes on running is unaffected until it exits. Command-line
    entry points of plugin packs that export (``pt2onnx-transformers``) can call it too.
    """
    global _freezing_at_exit
    if not _freezing_at_exit:
        atexit.register(gc.freeze)
        _freezing_at_exit = True


def _main(argv: Sequence[str] | None) -> int:
    parser, commands_parsers = _parser()
    args = parser.parse_args(argv)
    commands = {"plugins": _cmd_plugins, "ops": _cmd_ops, "export": _cmd_export}
    shown = warnings.showwarning
    warnings.showwarning = _show_warning
    try:
        args.blocked = _blocked(args.plugin_flags)
        return commands[args.command](args)
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_OK
    except Exception as e:  # noqa: BLE001 - every error ends as one paragraph and an exit status
        if args.debug:
            traceback.print_exception(e)
        if isinstance(e, _USAGE_ERRORS):
            commands_parsers.get(args.command, parser).print_usage(sys.stderr)
        kind = "error" if isinstance(e, _OWN_ERRORS) else "internal error"
        print(f"pt2onnx: {kind}: {_paragraph(e)}", file=sys.stderr)
        if kind == "internal error" and not args.debug:
            print("pt2onnx: run with --debug for the traceback, and report it", file=sys.stderr)
        return _exit_code(e)
    finally:
        warnings.showwarning = shown


def _flush_stdout() -> None:
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()


def _silence_stdout() -> None:
    # The reader is gone: further writes (and the flush at exit) would raise again. As the
    # Python docs advise (library/signal.html, "Note on SIGPIPE"): stdout's file descriptor
    # now writes to devnull, so what is still buffered goes there at exit.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    raise SystemExit(main())
