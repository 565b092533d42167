"""Where an FX node came from: the user's source line and module path.

torch.export records ``stack_trace`` and ``nn_module_stack`` in strict and non-strict
mode alike (``from_node`` is missing under ``strict=False``), so provenance is derived
from those two only. Each ONNX node carries it as metadata props. Nodes inside the
bodies of higher-order ops often have no user frame of their own (non-strict mode
traces them from generated code): they take the source and module of the enclosing
HOP call, and their FX name is qualified by it (``scan/add``).

The queries users ask of an exported model live here too: which module a parameter's
initializer belongs to (from its fully qualified name, as ``from_node`` is missing),
and which line of their code made a node.

What a saved model reveals of the user's machine is chosen with ``source_paths``
(:func:`apply_source_paths`): file paths relative to the project root (the default),
full, or no source lines at all.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, Literal, get_args

import onnx_ir as ir
import torch.fx

from .errors import NodeLocation, OptionError
from .opnames import op_name
from .walk import all_nodes

__all__ = [
    "METADATA_KEYS",
    "ModuleInfo",
    "SourcePaths",
    "apply_source_paths",
    "check_source_paths",
    "find_node",
    "location_of",
    "metadata_props",
    "module_of_state",
    "module_path",
    "user_source_line",
]

METADATA_KEYS = {
    "node": "pt2onnx.fx_node",
    "op": "pt2onnx.op",
    "module": "pt2onnx.module",
    "module_class": "pt2onnx.module_class",
    "source": "pt2onnx.source",
}

#: How source files appear in the ``pt2onnx.source`` metadata of an exported model.
SourcePaths = Literal["relative", "full", "none"]

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')
# Frames from these places are torch's own, pt2onnx's or generated code, never the user's line.
_LIBRARY_PARTS = ("/torch/", "/site-packages/", "/dist-packages/", "/pt2onnx/", "<frozen ", "<eval_with_key>")


def _frames(trace: str) -> Iterator[tuple[str, str, str, str]]:
    """(file, line, function, code) of each frame; code is empty when the file has none (stdin)."""
    lines = trace.splitlines()
    for i, text in enumerate(lines):
        match = _FRAME.match(text)
        if match is None:
            continue
        following = lines[i + 1].strip() if i + 1 < len(lines) else ""
        code = "" if _FRAME.match(following) or set(following) <= set("^~ ") else following
        yield match["file"], match["line"], match["func"], code


def user_source_line(node: torch.fx.Node) -> str | None:
    """The innermost frame of ``stack_trace`` that is the user's code, as ``file:line in fn: code``."""
    trace = node.meta.get("stack_trace")
    if not trace:
        return None
    users = [f for f in _frames(trace) if not any(part in f[0] for part in _LIBRARY_PARTS)]
    if not users:
        return None
    file, line, func, code = users[-1]
    return f"{file}:{line} in {func}" + (f": {code}" if code else "")


def module_path(node: torch.fx.Node) -> tuple[str, str] | None:
    """The innermost module that made ``node``: (qualified path, class name)."""
    stack = node.meta.get("nn_module_stack")
    if not stack:
        return None
    path, cls = list(stack.values())[-1]
    if path.startswith("_empty_nn_module_stack"):
        return None
    class_name = cls if isinstance(cls, str) else f"{cls.__module__}.{cls.__qualname__}"
    return _clean_module_path(path), class_name


def _clean_module_path(path: str) -> str:
    # Strict mode records paths as Python expressions: L['self'].layers[0].attn.
    path = re.sub(r"^L\['self'\]\.?", "", path)
    # Strict mode records HOP bodies under the module it wraps the root in.
    path = re.sub(r"^_export_root(\.|$)", "", path)
    path = re.sub(r"\[(\d+)\]", r".\1", path)
    path = re.sub(r"\._modules\['([^']+)'\]", r".\1", path)
    return path.lstrip(".")


def location_of(node: torch.fx.Node) -> NodeLocation:
    """A :class:`~pt2onnx.errors.NodeLocation` for error messages."""
    module = module_path(node)
    shown_module = None
    if module is not None:
        shown_module = f"{module[0] or '<root>'} ({module[1]})"
    return NodeLocation(
        node=node.name,
        op=op_name(node.target) if node.op == "call_function" else node.op,
        source=user_source_line(node),
        module_path=shown_module,
    )


def metadata_props(node: torch.fx.Node, enclosing: Sequence[torch.fx.Node] = ()) -> dict[str, str]:
    """The metadata props every ONNX node made for ``node`` carries.

    ``enclosing`` are the higher-order-op nodes whose bodies ``node`` is in, outermost
    first: they qualify its name and lend it their module and source when it has none.
    """
    props = {METADATA_KEYS["node"]: "/".join([*(n.name for n in enclosing), node.name])}
    if node.op == "call_function":
        props[METADATA_KEYS["op"]] = op_name(node.target)
    for candidate in (node, *reversed(enclosing)):
        module = module_path(candidate)
        if module is not None:
            props[METADATA_KEYS["module"]] = module[0]
            props[METADATA_KEYS["module_class"]] = module[1]
            break
    for candidate in (node, *reversed(enclosing)):
        source = user_source_line(candidate)
        if source is not None:
            props[METADATA_KEYS["source"]] = source
            break
    return props


# -- queries on an exported model ------------------------------------------------------


@dataclass(frozen=True)
class ModuleInfo:
    """The module owning a parameter or buffer: its path in the model and its class."""

    path: str
    class_name: str | None


def module_of_state(name: str, model: torch.nn.Module | None, graph: torch.fx.Graph) -> ModuleInfo:
    """The module owning the parameter/buffer ``name`` (a fully qualified name).

    The path is the FQN without its last part. The class comes from the eager model when
    there is one, else from the ``nn_module_stack`` of the nodes torch recorded for it.
    """
    path = name.rpartition(".")[0]
    class_name: str | None = None
    if model is not None:
        try:
            owner = model.get_submodule(path)
        except AttributeError:
            owner = None
        if owner is not None:
            class_name = f"{type(owner).__module__}.{type(owner).__qualname__}"
    if class_name is None:
        for node in graph.nodes:
            for entry_path, cls in (node.meta.get("nn_module_stack") or {}).values():
                if _clean_module_path(entry_path) == path:
                    class_name = cls if isinstance(cls, str) else f"{cls.__module__}.{cls.__qualname__}"
                    break
            if class_name is not None:
                break
    return ModuleInfo(path, class_name)


def find_node(model: ir.Model, node_or_name: Any) -> ir.Node:
    """An ONNX node given as itself, by node name, or by the name of one of its outputs."""
    if isinstance(node_or_name, ir.Node):
        return node_or_name
    if isinstance(node_or_name, ir.Value):
        producer = node_or_name.producer()
        if producer is None:
            raise KeyError(f"value {node_or_name.name!r} is not produced by a node")
        return producer
    for node in all_nodes(model):
        if node.name == node_or_name or any(v.name == node_or_name for v in node.outputs):
            return node
    raise KeyError(f"no ONNX node or node output named {node_or_name!r}")


# -- what the saved model reveals ------------------------------------------------------

_SOURCE = re.compile(r"^(?P<file>.+?):(?P<rest>\d+ in .*)$", re.S)
_PACKAGE_DIRS = ("site-packages", "dist-packages")


def check_source_paths(mode: object) -> SourcePaths:
    """``mode`` if it is a valid ``source_paths`` value, else an :class:`OptionError`."""
    if mode not in get_args(SourcePaths):
        raise OptionError(
            f"source_paths={mode!r} is not one of {', '.join(map(repr, get_args(SourcePaths)))}",
            hint="'relative' (default: paths relative to the project root), 'full', or 'none' (no source lines)",
        )
    return mode  # type: ignore[return-value]


def shown_path(file: str, root: Path) -> str:
    """``file`` as the relative mode shows it.

    Relative to the project ``root`` when inside it (and not in an installed package);
    else relative to the ``sys.path`` entry it was imported from (``transformers/...``);
    else its name only.
    """
    path = PurePath(file)
    if not path.is_absolute():
        return file
    if path.is_relative_to(root) and not set(path.relative_to(root).parts) & set(_PACKAGE_DIRS):
        return path.relative_to(root).as_posix()
    bases = [PurePath(p) for p in sys.path if p and PurePath(p).is_absolute()]
    inside = [b for b in bases if path.is_relative_to(b)]
    if inside:
        return path.relative_to(max(inside, key=lambda b: len(b.parts))).as_posix()
    return path.name


def apply_source_paths(model: ir.Model, mode: SourcePaths, root: Path) -> None:
    """Rewrite the ``pt2onnx.source`` metadata of every node (subgraphs and functions too).

    ``"full"`` keeps absolute paths; ``"relative"`` shows each file as :func:`shown_path`
    does; ``"none"`` removes the source metadata (file, line and code).
    """
    if mode == "full":
        return
    key = METADATA_KEYS["source"]
    for node in all_nodes(model):
        source = node.metadata_props.get(key)
        if source is None:
            continue
        if mode == "none":
            del node.metadata_props[key]
            continue
        match = _SOURCE.match(source)
        if match is not None:
            node.metadata_props[key] = f"{shown_path(match['file'], root)}:{match['rest']}"
