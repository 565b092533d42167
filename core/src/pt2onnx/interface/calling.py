"""How the model is called: its example arguments, its signature, its flattened inputs.

A bare tensor is one argument and None none; keywords a ``**kwargs`` parameter catches are
captured as named parameters (:func:`flat_signature`); the ONNX inputs are the user inputs
flattened exactly as the captured program's input spec flattens them.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

from ..errors import CaptureError
from .matching import check_constants, match_inputs, ordered_keywords

__all__ = [
    "bound_arguments",
    "captured_inputs",
    "check_example_inputs",
    "check_outputs",
    "copy_inputs",
    "flat_signature",
    "flatten_inputs",
    "keywords_as_parameters",
    "normalize_args",
    "user_input_names",
    "user_inputs",
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


@contextlib.contextmanager
def keywords_as_parameters(module: torch.nn.Module, kwargs: dict[str, Any]) -> Iterator[None]:
    """While the block runs (the capture), ``module.forward`` takes the keywords its ``**kwargs``
    catches as named parameters (:func:`flat_signature`: torch.export's two layouts then agree)."""
    signature = inspect.signature(module.forward)
    flat = flat_signature(signature, kwargs)
    if flat is signature:
        yield
        return
    own = module.__dict__.get("forward")
    original = module.forward

    def forward(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **kwargs)

    forward.__signature__ = flat  # type: ignore[attr-defined]
    module.forward = forward
    try:
        yield
    finally:
        if own is None:
            del module.forward
        else:
            module.forward = own


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


def flatten_inputs(
    program: ExportedProgram,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None,
    *,
    signature: inspect.Signature | None = None,
    aliases: Mapping[str, str] | None = None,
    names: Sequence[str] | None = None,
) -> list[Any]:
    """Flatten ``(args, kwargs)`` exactly as the captured program's input spec does.

    Inputs of another structure are first laid out as captured by :func:`~pt2onnx.interface.matching.match_inputs`
    (which ``signature``, ``aliases`` and ``names`` help); inputs of the captured structure
    are flattened as they are. Either way, an input the program took as a constant must
    equal its captured value.
    """
    spec = program.call_spec.in_spec
    kwargs = ordered_keywords(spec, dict(kwargs or {}))
    leaves, got = pytree.tree_flatten((tuple(args), kwargs))
    if spec is not None and got != spec:
        args, kwargs = match_inputs(program, tuple(args), kwargs, signature=signature, aliases=aliases, names=names)
        return pytree.tree_leaves((args, kwargs))
    check_constants(program, leaves)
    return leaves


def copy_inputs(tree: Any) -> Any:
    """A copy of the tensors in ``tree``, each in its own memory layout (``clone()`` would make a
    strided view contiguous, and the model, or the captured program's guards, may see it).

    The gaps between a strided copy's elements hold zeros, not what the allocation held:
    some of torch's kernels read past the strides (``embedding_bag`` takes its indices as
    contiguous), and they must read the same thing on every run.
    """

    def copy(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        if any(stride == 0 and size > 1 for stride, size in zip(t.stride(), t.size())):
            return t.clone()  # an expanded tensor: its strides have no storage of their own
        laid = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device)
        if not laid.is_contiguous():
            zeros = torch.zeros(laid.untyped_storage().nbytes() // t.element_size(), dtype=t.dtype, device=t.device)
            laid = torch.empty(0, dtype=t.dtype, device=t.device).set_(zeros.untyped_storage(), 0, t.size(), t.stride())
        return laid.copy_(t)

    return pytree.tree_map(copy, tree)


def user_input_names(program: ExportedProgram) -> list[str]:
    """The placeholder names of the user inputs, in flattened order."""
    return [spec.arg.name for spec in program.graph_signature.input_specs if spec.kind == InputKind.USER_INPUT]


def user_inputs(
    program: ExportedProgram, args: tuple[Any, ...], kwargs: dict[str, Any] | None, **matching: Any
) -> dict[str, Any]:
    """``(args, kwargs)`` as the program's user inputs: each value by its placeholder name, in order.

    ``matching``: :func:`flatten_inputs`' ``signature``, ``aliases`` and ``names``.
    """
    return dict(zip(user_input_names(program), flatten_inputs(program, args, kwargs, **matching)))


def captured_inputs(program: ExportedProgram) -> dict[str, Any]:
    """Each user input as captured (torch's ``meta["val"]``: dtype and symbolic shape), by placeholder name."""
    placeholders = {n.name: n for n in program.graph.find_nodes(op="placeholder")}
    return {name: placeholders[name].meta.get("val") for name in user_input_names(program)}


def user_output_positions(program: ExportedProgram) -> list[int]:
    """Positions, in the FX output node, of the user's outputs."""
    return [i for i, spec in enumerate(program.graph_signature.output_specs) if spec.kind == OutputKind.USER_OUTPUT]
