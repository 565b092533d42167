"""Where an FX node came from: the user's source line and module path.

torch.export records ``stack_trace`` and ``nn_module_stack`` in strict and non-strict
mode alike (``from_node`` is missing under ``strict=False``), so provenance is derived
from those two only. Each ONNX node carries it as metadata props.
"""

from __future__ import annotations

import re

import torch.fx

from .errors import NodeLocation
from .opnames import op_name

__all__ = [
    "METADATA_KEYS",
    "location_of",
    "metadata_props",
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

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)\n(?P<code>[^\n]*)')
# Frames from these places are torch's own or pt2onnx's, never the user's line.
_LIBRARY_PARTS = ("/torch/", "/site-packages/", "/dist-packages/", "/pt2onnx/", "<frozen ")


def user_source_line(node: torch.fx.Node) -> str | None:
    """The innermost frame of ``stack_trace`` that is the user's code, as ``file:line code``."""
    trace = node.meta.get("stack_trace")
    if not trace:
        return None
    frames = list(_FRAME.finditer(trace))
    if not frames:
        return None
    users = [f for f in frames if not any(part in f["file"] for part in _LIBRARY_PARTS)]
    frame = (users or frames)[-1]
    return f"{frame['file']}:{frame['line']} in {frame['func']}: {frame['code'].strip()}"


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


def metadata_props(node: torch.fx.Node) -> dict[str, str]:
    """The metadata props every ONNX node made for ``node`` carries."""
    props = {METADATA_KEYS["node"]: node.name}
    if node.op == "call_function":
        props[METADATA_KEYS["op"]] = op_name(node.target)
    module = module_path(node)
    if module is not None:
        props[METADATA_KEYS["module"]] = module[0]
        props[METADATA_KEYS["module_class"]] = module[1]
    source = user_source_line(node)
    if source is not None:
        props[METADATA_KEYS["source"]] = source
    return props
