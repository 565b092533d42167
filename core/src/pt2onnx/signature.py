"""The model's calling convention: flattening inputs, naming inputs, outputs and dims.

ONNX inputs are the pytree-flattened user inputs (named as torch.export names its
placeholders, after the forward signature: ``x``, ``input_ids``, ``cache_0``); outputs
are named after the returned structure (``logits``, ``past_key_values.0``, or
``output_0`` for tuples); symbolic dims after the user's ``Dim`` objects.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

from .errors import CaptureError, VerificationError

__all__ = [
    "bound_arguments",
    "check_example_inputs",
    "check_outputs",
    "dim_names",
    "flat_signature",
    "flatten_inputs",
    "key_text",
    "normalize_args",
    "output_names",
    "user_input_names",
    "user_output_positions",
]


def flat_signature(signature: inspect.Signature, kwargs: dict[str, Any]) -> inspect.Signature:
    """``signature`` with the keywords its ``**kwargs`` parameter would catch as keyword-only parameters.

    torch.export (2.13) lays out a model's arguments both ways, nested under ``kwargs`` when
    it checks ``dynamic_shapes`` and flat when it builds the shape constraints, so any dynamic
    shape fails for a tensor passed through ``**kwargs`` (transformers >= 5.24 takes
    ``past_key_values`` that way). Captured with this signature, both ways are flat.
    """
    params = list(signature.parameters.values())
    catch_all = next((p for p in params if p.kind is inspect.Parameter.VAR_KEYWORD), None)
    caught = [name for name in kwargs if name not in signature.parameters]
    if catch_all is None or not caught:
        return signature
    kept = [p for p in params if p is not catch_all]
    added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY) for name in caught]
    return signature.replace(parameters=[*kept, *added])


def bound_arguments(signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments by parameter name, as torch.export sees them (``**kwargs``' keywords flat)."""
    return dict(flat_signature(signature, kwargs).bind(*args, **kwargs).arguments)


def normalize_args(args: Any) -> tuple[Any, ...]:
    """``args`` as the tuple of positional arguments: a bare tensor is ``(tensor,)``, None is ``()``.

    torch.onnx accepts both; iterating a bare tensor would split it into rows.
    """
    if args is None:
        return ()
    if isinstance(args, torch.Tensor):
        return (args,)
    if isinstance(args, list):
        return tuple(args)
    if not isinstance(args, tuple):
        return (args,)
    return args


def check_example_inputs(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Raise a clear error for example inputs that no ONNX model can take."""
    for path, leaf in pytree.tree_flatten_with_path((args, kwargs))[0]:
        if isinstance(leaf, torch.Tensor) and leaf.layout != torch.strided:
            where = pytree.keystr(path)
            raise CaptureError(
                f"example input {where} is a {leaf.layout} tensor; ONNX graph inputs are dense tensors",
                hint="pass the dense tensor (x.to_dense()) and build the sparse one inside forward, "
                "or keep the sparse computation outside the exported model",
            )


def check_outputs(program: ExportedProgram) -> None:
    """Raise a clear error when the captured program computes no tensor the ONNX graph could return."""
    outputs = program.graph_signature.output_specs
    if any(spec.kind != OutputKind.USER_OUTPUT for spec in outputs):
        return  # mutated buffers or inputs are outputs too
    values = [node.meta.get("val") for node in _output_args(program)]
    if not any(isinstance(v, (torch.Tensor, torch.SymInt)) for v in values):
        returned = ", ".join(type(v).__name__ for v in values) or "None"
        raise CaptureError(
            f"the model returns no tensor (it returns {returned}); an ONNX model needs at least one output",
            hint="return the tensors the exported model should compute from forward",
        )


def _output_args(program: ExportedProgram) -> list[Any]:
    output = next(iter(program.graph.find_nodes(op="output")))
    return [a for a in pytree.tree_leaves(output.args[0]) if isinstance(a, torch.fx.Node)]


def flatten_inputs(program: ExportedProgram, args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> list[Any]:
    """Flatten ``(args, kwargs)`` exactly as the captured program's input spec does."""
    spec = program.call_spec.in_spec
    kwargs = dict(kwargs or {})
    if spec is not None and spec.num_children == 2 and spec.child(1).context is not None:
        order = list(spec.child(1).context)
        if set(order) == set(kwargs):
            kwargs = {k: kwargs[k] for k in order}
    leaves, got = pytree.tree_flatten((tuple(args), kwargs))
    if spec is not None and got != spec:
        raise VerificationError(
            "inputs do not have the structure the model was exported with:\n"
            f"  exported with: {spec}\n  given:         {got}",
            hint="call with the same argument structure (positional vs keyword, nesting) as at export",
        )
    return leaves


def user_input_names(program: ExportedProgram) -> list[str]:
    """The placeholder names of the user inputs, in flattened order."""
    return [spec.arg.name for spec in program.graph_signature.input_specs if spec.kind == InputKind.USER_INPUT]


def user_output_positions(program: ExportedProgram) -> list[int]:
    """Positions, in the FX output node, of the user's outputs."""
    return [i for i, spec in enumerate(program.graph_signature.output_specs) if spec.kind == OutputKind.USER_OUTPUT]


def output_names(program: ExportedProgram) -> list[str]:
    """One name per flattened user output, after the structure ``forward`` returns."""
    spec = program.call_spec.out_spec
    if spec is None or (spec.num_leaves == 1 and spec.is_leaf()):
        return ["output"]
    tree = pytree.tree_unflatten(list(range(spec.num_leaves)), spec)
    names = []
    for path, _ in pytree.tree_flatten_with_path(tree)[0]:
        parts = [key_text(k) for k in path]
        if path and isinstance(path[0], pytree.SequenceKey):
            parts[0] = f"output_{parts[0]}"
        names.append(".".join(parts) or "output")
    return names


def key_text(key: Any) -> str:
    """A pytree key entry as a name part: ``0`` for an index, the key or attribute name otherwise."""
    if isinstance(key, pytree.SequenceKey):
        return str(key.idx)
    if isinstance(key, pytree.MappingKey):
        return str(key.key)
    if isinstance(key, pytree.GetAttrKey):
        return key.name
    return str(key).strip(".[]'\"")


def dim_names(
    program: ExportedProgram,
    signature: inspect.Signature | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None,
    dynamic_shapes: Any,
) -> dict[str, str]:
    """Map torch's shape symbols (``s77``) to the names of the user's ``Dim`` objects."""
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
    flat = flatten_inputs(program, args, kwargs)
    position = {id(leaf): i for i, leaf in enumerate(flat)}
    placeholders = {n.name: n for n in program.graph.find_nodes(op="placeholder")}
    input_names = user_input_names(program)
    names: dict[str, str] = {}
    for value, spec in pairs:
        for tensor, tensor_spec in _tensor_specs(value, spec):
            index = position.get(id(tensor))
            if index is None or index >= len(input_names):
                continue
            fake = placeholders[input_names[index]].meta.get("val")
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
