"""Dynamic shapes without the boilerplate: ``dynamic_shapes="auto"`` and dims told by examples.

``"auto"`` asks torch.export for every dim of every tensor input with ``Dim.AUTO``: torch
keeps a dim symbolic unless the model's code (or the 0/1 specialization) fixes it, and
then specializes it instead of failing. A second example (``other_inputs=``) asks for
exactly the dims that differ between the examples, with ``Dim.DYNAMIC``: if the model
fixes one of those, capture fails, since the model could not serve both examples.

Which dims stayed static, and why, is :func:`static_dims`; how dims are named is
:mod:`pt2onnx.interface.names`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.export import Dim, ExportedProgram

from ..errors import CaptureError, OptionError
from .calling import bound_arguments, captured_inputs, user_inputs

__all__ = ["AUTO", "dims_from_examples", "dynamic_axes", "resolve_dynamic_shapes", "static_dims"]

#: The value of ``dynamic_shapes`` that makes every dim dynamic where torch allows it.
AUTO = "auto"


def _per_argument(
    forward: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], spec_of: Callable[[Any], Any]
) -> dict[str, Any]:
    """``dynamic_shapes`` keyed by ``forward``'s parameter names, ``spec_of(tensor)`` for each tensor leaf."""
    bound = bound_arguments(inspect.signature(forward), args, kwargs)
    return {name: _specs(value, spec_of) for name, value in bound.items()}


def _is_custom_node(value: Any) -> bool:
    """A registered pytree type other than a list, tuple or dict (e.g. a plugin's cache class)."""
    return type(value) in pytree.SUPPORTED_NODES and value is not None and not isinstance(value, (list, tuple, dict))


def _specs(value: Any, spec_of: Callable[[Any], Any]) -> Any:
    """The spec of one argument in the structure torch.export takes: lists, tuples and dicts as
    themselves, any other registered pytree type as the list of its children."""
    if _is_custom_node(value):
        children, _ = pytree.SUPPORTED_NODES[type(value)].flatten_fn(value)
        return [_specs(child, spec_of) for child in children]

    def leaf_spec(leaf: Any) -> Any:
        if _is_custom_node(leaf):
            return _specs(leaf, spec_of)
        return spec_of(leaf) if isinstance(leaf, torch.Tensor) else None

    return pytree.tree_map(leaf_spec, value, is_leaf=_is_custom_node)


def _every_dim(tensor: torch.Tensor) -> dict[int, Any]:
    return {axis: Dim.AUTO for axis in range(tensor.dim())}


def dims_from_examples(
    forward: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    others: Sequence[tuple[tuple[Any, ...], dict[str, Any]]],
) -> dict[str, Any]:
    """``dynamic_shapes`` marking as dynamic exactly the dims that differ between the examples."""
    leaves, spec = pytree.tree_flatten((args, kwargs))
    differing: dict[int, set[int]] = {}
    for other_args, other_kwargs in others:
        other_leaves, other_spec = pytree.tree_flatten((tuple(other_args), dict(other_kwargs)))
        if other_spec != spec:
            raise CaptureError(
                "other_inputs must have the structure of the example inputs (same arguments, same nesting)",
                hint="pass each further example as (args, kwargs) shaped like the first",
            )
        for index, (a, b) in enumerate(zip(leaves, other_leaves)):
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
                if a.dim() != b.dim():
                    raise CaptureError(
                        f"example input {index} has rank {a.dim()} in one example and {b.dim()} in another",
                        hint="an ONNX input has one rank; only sizes may differ between examples",
                    )
                differing.setdefault(index, set()).update(i for i in range(a.dim()) if a.shape[i] != b.shape[i])
    position = {id(leaf): i for i, leaf in enumerate(leaves)}

    def spec_of(tensor: torch.Tensor) -> dict[int, Any] | None:
        axes = differing.get(position.get(id(tensor), -1), set())
        return {axis: Dim.DYNAMIC for axis in sorted(axes)} or None

    return _per_argument(forward, args, kwargs, spec_of)


def dynamic_axes(
    forward: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    axes: Sequence[tuple[str, int, str | None]],
    given: Any,
) -> Any:
    """``dynamic_shapes`` making each ``(input, axis, dim name)`` of ``axes`` dynamic, merged over ``given``.

    Inputs are named as the capture lays them out: by ``forward``'s parameters, and the
    keywords its ``**kwargs`` catches by their own names. A dim name left out is
    ``<input>_dim<axis>``; inputs that share a dim name share the ``Dim`` (one of that name
    in ``given`` too). The result has an entry for every input the example passes, as
    torch.export wants: ``given``'s (with the named axes added), else None (static).

    Raises:
        OptionError: an input the example does not pass, one that is no tensor, an axis
            it does not have, or a ``given`` that is not a dict keyed by input names.
    """
    if not axes:
        return given
    if given is not None and not isinstance(given, dict):
        raise OptionError(
            "named dynamic axes cannot be merged into a dynamic_shapes that is not a dict",
            hint="give every dynamic dim in one dict keyed by forward's parameter names",
        )
    signature = inspect.signature(forward)
    try:
        inputs = bound_arguments(signature, args, kwargs)
    except TypeError as e:
        raise OptionError(
            f"the example inputs do not fit the model's signature {signature}: {e}",
            hint="return inputs the model can be called with: (args,) or {'args': (...), 'kwargs': {...}}",
        ) from None
    flat = _flat_keywords(given, signature, kwargs) if given else {}
    shapes: dict[str, Any] = {name: flat.get(name) for name in inputs}
    shapes.update({name: spec for name, spec in flat.items() if name not in shapes})  # torch names what is wrong
    dims = _dims_by_name(flat)
    for name, axis, dim_name in axes:
        if name not in inputs:
            if name in signature.parameters:
                raise OptionError(
                    f"the example inputs do not pass {name!r}, so the exported model has no such input",
                    hint=f"pass {name} in the example inputs to make it an input with a dynamic axis",
                )
            raise OptionError(f"the model has no input {name!r}; its inputs are {list(inputs)}")
        value = inputs[name]
        if not isinstance(value, torch.Tensor):
            raise OptionError(
                f"input {name!r} is a {type(value).__name__}, not a tensor: --dynamic names an axis of a tensor input",
                hint=f"give the dims of the tensors in {name} in dynamic_shapes",
            )
        rank = value.dim()
        if not -rank <= axis < rank:
            raise OptionError(
                f"input {name!r} has {rank} dims (shape {list(value.shape)}), so no axis {axis}",
                hint=f"name an axis from 0 to {rank - 1} (or -1 for the last)" if rank else "a scalar has no axis",
            )
        axis %= rank
        dim_name = dim_name or f"{name}_dim{axis}"
        if dim_name not in dims:
            dims[dim_name] = Dim(dim_name)
        shapes[name] = _with_axis(name, shapes[name], rank, axis, dims[dim_name])
    return shapes


def _dims_by_name(spec: Any) -> dict[str, Any]:
    """The ``Dim`` objects in a ``dynamic_shapes`` spec, by name."""
    if isinstance(spec, Dim):
        return {spec.__name__: spec}
    children = spec.values() if isinstance(spec, dict) else spec if isinstance(spec, (list, tuple)) else ()
    return {name: dim for child in children for name, dim in _dims_by_name(child).items()}


def _with_axis(name: str, spec: Any, rank: int, axis: int, dim: Any) -> Any:
    """One tensor input's spec (None, ``{axis: dim}`` or one entry per axis) with ``axis`` made ``dim``."""
    if spec is None:
        return {axis: dim}
    if isinstance(spec, dict):
        return {**spec, axis: dim}
    if isinstance(spec, (list, tuple)) and len(spec) == rank:
        entries = list(spec)
        entries[axis] = dim
        return type(spec)(entries)
    raise OptionError(
        f"dynamic_shapes gives input {name!r} as {spec!r}, which an axis cannot be added to",
        hint="give it as a dict {axis: Dim} or with one entry per axis",
    )


def resolve_dynamic_shapes(
    dynamic_shapes: Any,
    forward: Callable[..., Any] | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    other_inputs: Sequence[tuple[tuple[Any, ...], dict[str, Any]]],
) -> Any:
    """What to hand ``torch.export.export`` for the ``dynamic_shapes`` and ``other_inputs`` the user gave."""
    if isinstance(dynamic_shapes, str):
        if dynamic_shapes != AUTO:
            raise CaptureError(f"dynamic_shapes={dynamic_shapes!r} is not understood", hint='use "auto" or a spec')
        if forward is None:
            return None  # an ExportedProgram: its shapes are decided
        return _per_argument(forward, args, kwargs, _every_dim)
    if dynamic_shapes is None and other_inputs and forward is not None:
        return dims_from_examples(forward, args, kwargs, other_inputs)
    if isinstance(dynamic_shapes, dict) and forward is not None:
        return _flat_keywords(dynamic_shapes, inspect.signature(forward), kwargs)
    return dynamic_shapes


def _flat_keywords(dynamic_shapes: dict[str, Any], signature: inspect.Signature, kwargs: dict[str, Any]) -> Any:
    """Specs nested under the ``**kwargs`` parameter (torch's documented form) moved up beside the others,
    as the capture's flat signature (:func:`~pt2onnx.interface.calling.flat_signature`) names them."""
    catch_all = next((p.name for p in signature.parameters.values() if p.kind is inspect.Parameter.VAR_KEYWORD), None)
    nested = dynamic_shapes.get(catch_all) if catch_all is not None and catch_all not in kwargs else None
    if not isinstance(nested, dict):
        return dynamic_shapes
    return {**{k: v for k, v in dynamic_shapes.items() if k != catch_all}, **nested}


def static_dims(
    program: ExportedProgram, args: tuple[Any, ...], kwargs: dict[str, Any], narrowed: str | None = None
) -> dict[str, dict[int, str]]:
    """For ``dynamic_shapes="auto"``: the input dims torch kept static, and why (``narrowed``: the
    capture's own reason, where it kept dims static after failing with every dim dynamic)."""
    fakes = captured_inputs(program)
    result: dict[str, dict[int, str]] = {}
    for input_name, leaf in user_inputs(program, args, kwargs).items():
        fake = fakes[input_name]
        if not isinstance(fake, torch.Tensor) or not isinstance(leaf, torch.Tensor):
            continue
        for axis, size in enumerate(fake.shape):
            if isinstance(size, torch.SymInt) and not size.node.expr.is_number:
                continue
            size = int(size)
            if size in (0, 1):
                why = f"size {size}: torch specializes sizes 0 and 1 (give an example with a larger size)"
            elif narrowed is not None:
                why = f"kept at {size}: {narrowed}"
            else:
                why = f"the model's code fixes it to {size} (torch specialized it while tracing)"
            result.setdefault(input_name, {})[axis] = why
    return result
