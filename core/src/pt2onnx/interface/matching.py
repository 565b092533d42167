"""Matching the inputs a caller gives to the structure the program was captured with.

``result.run(...)`` and ``result.verify(...)`` are called as the model is; a caller
naturally passes by keyword what the capture took by position (or the other way round),
leaves out what the program took as a constant (``use_cache=True``), names a cache by
another of its names, or gives a cache's tensors by their ONNX names. This lays such
inputs out as captured, or says in one line which input is missing, extra, or of another
structure, and what the model takes.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.export import ExportedProgram
from torch.export.graph_signature import ConstantArgument, InputKind, InputSpec

from ..errors import VerificationError

__all__ = ["check_constants", "match_inputs", "ordered_keywords"]


def ordered_keywords(spec: pytree.TreeSpec | None, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` in the captured keyword order, when they are the captured keywords."""
    if spec is not None and spec.num_children == 2 and spec.child(1).context is not None:
        order = list(spec.child(1).context)
        if set(order) == set(kwargs):
            return {k: kwargs[k] for k in order}
    return kwargs


def match_inputs(
    program: ExportedProgram,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None,
    *,
    signature: inspect.Signature | None = None,
    aliases: Mapping[str, str] | None = None,
    names: Sequence[str] | None = None,
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``(args, kwargs)`` laid out as the program was captured: what the user naturally passes, matched by name.

    Inputs of the captured structure come back as they are. Otherwise each input is matched
    to the captured one of its parameter name, whether given by position or by keyword
    (``signature``: the forward's, else the program's own argument names):

    * an input the program took as a constant (``use_cache=True``: no graph input) may be
      left out, and is then the captured value;
    * a keyword in ``aliases`` (given name -> captured name) stands for the captured input;
    * a keyword whose value is its parameter's default, and which the capture left out, is dropped;
    * a captured input of several tensors (a cache) may be given as its leaves, each by its
      ONNX input name (``names``: the ONNX name of each flattened user input).

    What is still missing, extra or of another structure, and a constant of another value,
    raises a one-line :class:`~pt2onnx.errors.VerificationError` naming it and what the model takes.
    """
    spec = program.call_spec.in_spec
    args, kwargs = tuple(args), ordered_keywords(spec, dict(kwargs or {}))
    if spec is not None and pytree.tree_structure((args, kwargs)) != spec:
        args, kwargs = _match(program, spec, args, kwargs, signature, aliases, names)
    check_constants(program, pytree.tree_leaves((args, kwargs)))
    return args, kwargs


_TENSOR = object()  # a flattened user input that is a graph input, not a constant


def _user_input_specs(program: ExportedProgram) -> list[InputSpec]:
    return [spec for spec in program.graph_signature.input_specs if spec.kind == InputKind.USER_INPUT]


def check_constants(program: ExportedProgram, leaves: list[Any]) -> None:
    """Raise a one-line error for a given value that differs from the constant the program was captured with."""
    for spec, leaf in zip(_user_input_specs(program), leaves):
        if isinstance(spec.arg, ConstantArgument) and not _same(leaf, spec.arg.value):
            raise VerificationError(
                f"input {spec.arg.name!r} is {leaf!r}, but the model was exported with {spec.arg.value!r}, "
                "a constant of the graph rather than an input",
                hint=f"leave it out (it is {spec.arg.value!r}), or export again with the value you need",
            )


def _same(value: Any, captured: Any) -> bool:
    """Whether ``value`` equals the captured constant (values that cannot be compared pass)."""
    if value is captured:
        return True
    if isinstance(value, torch.Tensor):
        return False
    if isinstance(value, float) and isinstance(captured, float) and math.isnan(value) and math.isnan(captured):
        return True
    try:
        return bool(value == captured)
    except Exception:  # noqa: BLE001 (an object whose == is not a truth value)
        return True


@dataclass(frozen=True)
class _Captured:
    """One argument of the captured call: its name, whether positional, its spec and its flattened leaves."""

    name: str
    positional: bool
    spec: pytree.TreeSpec
    leaves: range

    def constants(self, values: list[Any]) -> list[Any] | None:
        """Its leaves' captured values, when all of them are constants; else None."""
        taken = [values[i] for i in self.leaves]
        return None if any(v is _TENSOR for v in taken) else taken


def _captured(program: ExportedProgram, spec: pytree.TreeSpec, signature: inspect.Signature | None) -> list[_Captured]:
    """The captured arguments, positional ones first, named by the forward's parameters."""
    positional, keywords = spec.child(0), spec.child(1)
    call = program.module_call_graph[0].signature if program.module_call_graph else None
    arg_names = list(call.forward_arg_names or []) if call is not None else []
    if len(arg_names) < positional.num_children:
        arg_names = _positional_names(signature) if signature is not None else []
    arguments: list[_Captured] = []
    start = 0
    children = [(True, positional.child(i)) for i in range(positional.num_children)]
    children += [(False, keywords.child(i)) for i in range(keywords.num_children)]
    keyword_names = list(keywords.context or [])
    for index, (is_positional, child) in enumerate(children):
        if is_positional:
            name = arg_names[index] if index < len(arg_names) else f"args[{index}]"
        else:
            name = keyword_names[index - positional.num_children]
        arguments.append(_Captured(name, is_positional, child, range(start, start + child.num_leaves)))
        start += child.num_leaves
    return arguments


def _positional_names(signature: inspect.Signature) -> list[str]:
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in signature.parameters.values() if p.kind in kinds]


def _match(
    program: ExportedProgram,
    spec: pytree.TreeSpec,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    signature: inspect.Signature | None,
    aliases: Mapping[str, str] | None,
    names: Sequence[str] | None,
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """:func:`match_inputs` for inputs not of the captured structure."""
    if not (spec.type is tuple and spec.num_children == 2 and spec.child(1).type is dict):
        raise VerificationError(
            f"inputs do not have the structure the model was exported with ({_describe(spec)})",
            hint="call with the same argument structure as at export",
        )
    captured = _captured(program, spec, signature)
    by_name = {c.name: c for c in captured}
    values = [s.arg.value if isinstance(s.arg, ConstantArgument) else _TENSOR for s in _user_input_specs(program)]
    takes = _takes(captured, values)

    # The inputs given, by parameter name.
    positional = [c.name for c in captured if c.positional]
    if len(args) > len(positional) and signature is not None:
        positional += _positional_names(signature)[len(positional) :]
    given: dict[str, Any] = {}
    too_many = len(args) - len(positional)
    for name, value in zip(positional, args):
        given[name] = value
    for name, value in kwargs.items():
        if name in given:
            raise VerificationError(
                f"input {name!r} is given twice, by position and by keyword; the exported model takes {takes}",
                hint="pass it once",
            )
        target = (aliases or {}).get(name)
        if name not in by_name and target in by_name and target not in kwargs and target not in given:
            name = target
        given[name] = value

    # Each captured input: given, a constant left out, or missing.
    matched: dict[str, Any] = {}
    missing: list[_Captured] = []
    for argument in captured:
        if argument.name in given:
            matched[argument.name] = given.pop(argument.name)
            continue
        constants = argument.constants(values)
        if constants is not None:
            matched[argument.name] = pytree.tree_unflatten(constants, argument.spec)
        else:
            missing.append(argument)
    if signature is not None:  # a keyword left at its default, as at capture
        for name in list(given):
            parameter = signature.parameters.get(name)
            default = inspect.Parameter.empty if parameter is None else parameter.default
            if default is not inspect.Parameter.empty and _same(given[name], default):
                del given[name]
    if missing and given and names is not None:  # inputs of several tensors, given by their ONNX names
        for argument in list(missing):
            leaf_names = [names[i] for i in argument.leaves]
            needed = [n for i, n in zip(argument.leaves, leaf_names) if values[i] is _TENSOR]
            if needed and all(n in given for n in needed):
                leaves = [given[n] if values[i] is _TENSOR else values[i] for i, n in zip(argument.leaves, leaf_names)]
                matched[argument.name] = pytree.tree_unflatten(leaves, argument.spec)
                for n in needed:
                    del given[n]
                missing.remove(argument)

    problems = []
    if missing:
        problems.append(f"missing input{'s' if len(missing) > 1 else ''} {_quoted(c.name for c in missing)}")
    if given:
        problems.append(f"unexpected input{'s' if len(given) > 1 else ''} {_quoted(given)}")
    if too_many > 0:
        problems.append(f"{len(args)} positional inputs given, {len(positional)} taken")
    if problems:
        raise VerificationError(
            f"{'; '.join(problems)}; the exported model takes {takes}",
            hint="pass each input by the name of the forward's parameter, by position or by keyword",
        )
    for argument in captured:
        got = pytree.tree_structure(matched[argument.name])
        if got != argument.spec:
            expected, described = _describe(argument.spec), _describe(got)
            if described == expected:
                described += " of another structure (the pytree contexts differ)"
            raise VerificationError(
                f"input {argument.name!r} is {described}; the exported model takes {expected}",
                hint="pass it as it was at export; an input of another structure needs another export",
            )
    return (
        tuple(matched[c.name] for c in captured if c.positional),
        {c.name: matched[c.name] for c in captured if not c.positional},
    )


def _quoted(names: Iterable[str]) -> str:
    return ", ".join(repr(n) for n in names)


def _takes(captured: list[_Captured], values: list[Any]) -> str:
    """What the model takes, for an error: ``x, mask, cache (a DynamicCache of 2, each a dict {key, value}), use_cache=True``."""
    parts = []
    for argument in captured:
        constants = argument.constants(values)
        if argument.spec.is_leaf():
            parts.append(argument.name if constants is None else f"{argument.name}={constants[0]!r}")
        else:
            parts.append(f"{argument.name} ({_describe(argument.spec)})")
    return ", ".join(parts) or "no inputs"


def _describe(spec: pytree.TreeSpec) -> str:
    """A short account of a structure: ``a tensor``, ``a tuple of 2 tensors``, ``a DynamicCache of 2, each a dict {key, value}``."""
    if spec.is_leaf():
        return "a tensor"
    name = getattr(spec.type, "__name__", str(spec.type))
    children = [spec.child(i) for i in range(spec.num_children)]
    if spec.type is dict:
        return f"a dict {{{', '.join(str(k) if c.is_leaf() else f'{k}: {_describe(c)}' for k, c in zip(spec.context, children))}}}"
    if not children:
        return f"an empty {name}"
    if all(c.is_leaf() for c in children):
        return f"a {name} of {len(children)} tensor{'s' if len(children) > 1 else ''}"
    if all(c == children[0] for c in children):
        return f"a {name} of {len(children)}, each {_describe(children[0])}"
    return f"a {name} of ({'; '.join(_describe(c) for c in children)})"
