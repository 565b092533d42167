"""Names of the ONNX model's inputs, outputs and dims.

* **Inputs** are the pytree-flattened user inputs, named as torch.export names their
  placeholders after the forward signature (``x``, ``input_ids``, ``cache_0``), unless a
  plugin's pytree type names its leaves (``past_key_values.0.key``).
* **Outputs** are named after the returned structure (``logits``, ``past_key_values.0``,
  ``output_0`` for a tuple's first item, ``output`` for a lone tensor), unless a pytree
  type names them; what the model updates in place comes out as ``<target>.updated``.
* **Dims** are named after the user's ``Dim`` objects; dims torch made symbolic itself
  after the first input and axis they appear at (``input_ids_dim1``).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.export import ExportedProgram

from ..registration import PytreeNode
from .calling import bound_arguments, captured_inputs, user_input_names, user_inputs

__all__ = ["IONames", "dim_names", "io_names", "key_text", "output_names", "updated_name"]

#: A leaf's (or a stopping node's) key path, and its spec.
_Path = tuple[tuple[Any, ...], pytree.TreeSpec]


@dataclass(frozen=True)
class IONames:
    """The ONNX names of a program's user inputs and outputs.

    ``inputs`` maps placeholder names to ONNX names where they differ (a pytree type's
    template); ``outputs`` has one name per flattened user output.
    """

    inputs: dict[str, str]
    outputs: list[str]


def key_text(key: Any) -> str:
    """A pytree key entry as a name part: ``0`` for an index, the key or attribute name otherwise."""
    if isinstance(key, pytree.SequenceKey):
        return str(key.idx)
    if isinstance(key, pytree.MappingKey):
        return str(key.key)
    if isinstance(key, pytree.GetAttrKey):
        return key.name
    return str(key).strip(".[]'\"")


def _output_path(path: Sequence[Any]) -> str:
    """Where a leaf or container sits among the outputs: ``logits``, ``output_1``, ``past_key_values.0``."""
    parts = [key_text(k) for k in path]
    if path and isinstance(path[0], pytree.SequenceKey):
        parts[0] = f"output_{parts[0]}"
    return ".".join(parts)


def _input_path(path: Sequence[Any], signature: inspect.Signature | None) -> str:
    """Where a container sits among the inputs: its parameter's name, then the keys inside that argument."""
    if len(path) >= 2 and isinstance(path[0], pytree.SequenceKey):
        if path[0].idx == 1:  # (args, kwargs)[1][name]
            parts = [key_text(path[1])]
        else:
            index = path[1].idx if isinstance(path[1], pytree.SequenceKey) else 0
            params = list(signature.parameters) if signature is not None else []
            parts = [params[index] if index < len(params) else f"input_{index}"]
        return ".".join([*parts, *(key_text(k) for k in path[2:])])
    return ".".join(key_text(k) for k in path)


def _paths(spec: pytree.TreeSpec, stop: Callable[[pytree.TreeSpec], bool] = lambda _: False) -> list[_Path]:
    """The key path of each leaf of ``spec`` (or of each node ``stop`` says is one), in flattening order."""
    if spec.is_leaf() or stop(spec):
        return [((), spec)]
    keys = _child_keys(spec)
    return [((key, *path), leaf) for key, child in zip(keys, spec.children()) for path, leaf in _paths(child, stop)]


def _child_keys(spec: pytree.TreeSpec) -> list[Any]:
    """The keys of a node's children: its type's own where it was registered with them (lists,
    dicts, named tuples, most libraries' outputs); for a type registered without
    (``register_pytree_node`` with no ``flatten_with_keys_fn``, as diffusers registers its
    outputs), the names in its context when it holds one per child, its dataclass fields, or
    else the children's positions."""
    count = spec.num_children
    node = pytree.SUPPORTED_NODES.get(spec.type)
    if node is not None and node.flatten_with_keys_fn is not None:
        rebuilt = pytree.tree_unflatten(list(range(spec.num_leaves)), spec)
        return [key for key, _ in node.flatten_with_keys_fn(rebuilt)[0]]
    context = spec.context
    if isinstance(context, (list, tuple)) and len(context) == count and all(isinstance(c, str) for c in context):
        return [pytree.MappingKey(c) for c in context]
    if isinstance(spec.type, type) and dataclasses.is_dataclass(spec.type):
        fields = [f.name for f in dataclasses.fields(spec.type)]
        if len(fields) == count:
            return [pytree.GetAttrKey(f) for f in fields]
    return [pytree.SequenceKey(i) for i in range(count)]


def output_names(program: ExportedProgram) -> list[str]:
    """One name per flattened user output, after the structure ``forward`` returns."""
    spec = program.call_spec.out_spec
    if spec is None or (spec.num_leaves == 1 and spec.is_leaf()):
        return ["output"]
    return [_output_path(path) or "output" for path, _ in _paths(spec)]


def updated_name(target: str) -> str:
    """The output holding the new value of ``target`` (a buffer, parameter or input) the model updates in place."""
    return f"{target}.updated"


def io_names(
    program: ExportedProgram, signature: inspect.Signature | None, templates: Mapping[type, PytreeNode]
) -> IONames:
    """The names of ``program``'s user inputs and outputs, with the pytree types' ``templates`` applied."""
    defaults = output_names(program)
    named = {cls: node for cls, node in templates.items() if node.input_names or node.output_names}
    if not named:
        return IONames({}, defaults)
    spec = program.call_spec
    inputs: dict[str, str] = {}
    if spec.in_spec is not None:
        placeholders = user_input_names(program)
        names = _leaf_names(spec.in_spec, named, "input", lambda path: _input_path(path, signature))
        if len(names) == len(placeholders):
            inputs = {p: n for p, n in zip(placeholders, names) if n is not None}
    renamed = _leaf_names(spec.out_spec, named, "output", _output_path) if spec.out_spec is not None else []
    outputs = [new or default for default, new in zip(defaults, renamed)] + defaults[len(renamed) :]
    return IONames(inputs, outputs)


def _leaf_names(
    spec: pytree.TreeSpec,
    nodes: Mapping[type, PytreeNode],
    role: str,
    root: Callable[[Sequence[Any]], str],
) -> list[str | None]:
    """One name per leaf of ``spec``: from its container's template, or None (the default name)."""
    names: list[str | None] = []
    for path, sub in _paths(spec, stop=lambda s: s.type in nodes):
        node = nodes.get(sub.type)
        if node is None:
            names.append(None)
            continue
        template = node.input_names if role == "input" else node.output_names
        where = root(path)
        for inner, _ in _paths(sub):
            key = ".".join(key_text(k) for k in inner)
            names.append(template.format(path=where, key=key) if template else None)
    return names


def dim_names(
    program: ExportedProgram,
    signature: inspect.Signature | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None,
    dynamic_shapes: Any,
) -> dict[str, str]:
    """Map torch's shape symbols (``s77``) to ONNX dim names: the user's ``Dim`` names where
    ``dynamic_shapes`` gives them, else the first input and axis the symbol appears at."""
    return {**_input_dim_names(program), **_user_dim_names(program, signature, args, kwargs, dynamic_shapes)}


def _input_dim_names(program: ExportedProgram) -> dict[str, str]:
    """Each symbol that is a whole input dim, named after the first input and axis it appears at."""
    names: dict[str, str] = {}
    for input_name, fake in captured_inputs(program).items():
        if not isinstance(fake, torch.Tensor):
            continue
        for axis, size in enumerate(fake.shape):
            if isinstance(size, torch.SymInt) and size.node.expr.is_symbol:
                names.setdefault(str(size.node.expr), f"{input_name}_dim{axis}")
    return names


def _user_dim_names(
    program: ExportedProgram,
    signature: inspect.Signature | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None,
    dynamic_shapes: Any,
) -> dict[str, str]:
    """Map torch's shape symbols to the names of the user's ``Dim`` objects."""
    if dynamic_shapes is None or signature is None:
        return {}
    kwargs = dict(kwargs or {})
    try:
        bound = bound_arguments(signature, args, kwargs)
    except TypeError:
        return {}
    if isinstance(dynamic_shapes, dict):
        pairs = [(bound[k], dynamic_shapes[k]) for k in bound if k in dynamic_shapes]
    else:
        pairs = list(zip(bound.values(), dynamic_shapes))
    fakes = list(captured_inputs(program).values())
    position = {id(leaf): i for i, leaf in enumerate(user_inputs(program, args, kwargs).values())}
    names: dict[str, str] = {}
    for value, spec in pairs:
        for tensor, tensor_spec in _tensor_specs(value, spec):
            index = position.get(id(tensor))
            if index is None:
                continue
            fake = fakes[index]
            if not isinstance(fake, torch.Tensor):
                continue
            axes = tensor_spec.items() if isinstance(tensor_spec, dict) else enumerate(tensor_spec)
            for axis, dim in axes:
                name = getattr(dim, "__name__", None)
                size = fake.shape[axis]
                if name and isinstance(size, torch.SymInt) and not size.node.expr.is_number:
                    names.setdefault(str(size.node.expr), name)
    return names


def _is_tensor_spec(spec: Any) -> bool:
    if isinstance(spec, dict):
        return all(isinstance(k, int) for k in spec)
    if isinstance(spec, (list, tuple)):
        return all(
            s is None or isinstance(s, int) or hasattr(s, "__name__") or type(s).__name__ == "_DimHint" for s in spec
        )
    return False


def _tensor_specs(value: Any, spec: Any) -> Iterator[tuple[torch.Tensor, Any]]:
    if spec is None:
        return
    if isinstance(value, torch.Tensor):
        if _is_tensor_spec(spec):
            yield value, spec
        return
    if isinstance(value, dict) and isinstance(spec, dict):
        for key, sub in value.items():
            yield from _tensor_specs(sub, spec.get(key))
        return
    if isinstance(value, (list, tuple)) and isinstance(spec, (list, tuple)):
        for sub, sub_spec in zip(value, spec):
            yield from _tensor_specs(sub, sub_spec)
        return
    # A registered pytree class (e.g. a transformers cache): its spec mirrors its flattened leaves.
    leaves = pytree.tree_leaves(value)
    spec_leaves = pytree.tree_leaves(spec, is_leaf=lambda s: s is None or _is_tensor_spec(s))
    for leaf, leaf_spec in zip(leaves, spec_leaves):
        if isinstance(leaf, torch.Tensor) and leaf_spec is not None:
            yield leaf, leaf_spec
