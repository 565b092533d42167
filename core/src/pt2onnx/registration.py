"""What plugins register, and the registrar objects the hooks hand them.

A plugin module marks its functions with :func:`converter` or :func:`lowering`
(which only tag the function: there is no import-time registry) and registers them
from its hook with ``register.module(this_module)``.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Literal, TypeVar

import onnx_ir as ir

from .opnames import OpRef, normalize_op_name

__all__ = [
    "ConverterRegistrar",
    "CustomOpRegistrar",
    "DecompositionRegistrar",
    "Layer",
    "LoweringRegistrar",
    "Registration",
    "RewriteRegistrar",
    "converter",
    "lowering",
]

F = TypeVar("F", bound=Callable[..., Any])

Kind = Literal["converter", "lowering", "custom_op", "decomposition", "keep", "rewrite"]

_TAG = "__pt2onnx_registrations__"


class Layer(enum.IntEnum):
    """Where a plugin comes from; a higher layer wins."""

    BUILTIN = 0
    INSTALLED = 1
    PROJECT = 2
    ARGUMENT = 3

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Registration:
    """One thing one plugin registered for one op (for a rewrite: under the rewrite's name)."""

    op: str
    kind: Kind
    fn: Callable[..., Any] | None
    plugin: str
    layer: Layer
    override: bool = False

    @property
    def converts(self) -> bool:
        """Whether this registration translates the op itself (rather than decomposing it)."""
        return self.kind in ("converter", "lowering", "custom_op")


@dataclass(frozen=True)
class _Tag:
    kind: Kind
    ops: tuple[str, ...]
    override: bool


def _tagger(kind: Kind, ops: Sequence[OpRef], override: bool) -> Callable[[F], F]:
    names = tuple(normalize_op_name(op) for op in ops)
    if not names:
        raise ValueError(f"@{kind} needs at least one op name")

    def mark(fn: F) -> F:
        tags: list[_Tag] = list(getattr(fn, _TAG, ()))
        tags.append(_Tag(kind, names, override))
        setattr(fn, _TAG, tags)
        return fn

    return mark


def converter(*ops: OpRef, override: bool = False) -> Callable[[F], F]:
    """Mark ``fn`` as the converter of ``ops`` (names like ``"aten::gelu"`` or op objects).

    ``override=True`` lets it replace another registration of the same layer.
    The function is registered when its module is passed to ``register.module``.
    """
    return _tagger("converter", ops, override)


def lowering(*ops: OpRef, override: bool = False) -> Callable[[F], F]:
    """Mark ``fn`` as the lowering of higher-order ``ops`` (``"higher_order::cond"``, ...)."""
    return _tagger("lowering", ops, override)


@dataclass
class _Sink:
    """Collects one plugin's registrations during one hook call."""

    plugin: str
    layer: Layer
    registrations: list[Registration] = field(default_factory=list)

    def add(self, kind: Kind, op: OpRef, fn: Callable[..., Any] | None, override: bool) -> None:
        if fn is not None and not callable(fn):
            raise TypeError(f"plugin {self.plugin!r}: {kind} for {op!r} is not callable: {fn!r}")
        self.registrations.append(Registration(normalize_op_name(op), kind, fn, self.plugin, self.layer, override))


class _Registrar:
    def __init__(self, sink: _Sink) -> None:
        self._sink = sink

    @property
    def plugin(self) -> str:
        """The name of the plugin registering."""
        return self._sink.plugin

    def _add_tagged(self, module: ModuleType, kind: Kind) -> int:
        count = 0
        for _, fn in sorted(inspect.getmembers(module, callable), key=lambda item: item[0]):
            if getattr(fn, "__module__", None) != module.__name__:
                continue
            for tag in getattr(fn, _TAG, ()):
                if tag.kind != kind:
                    continue
                for op in tag.ops:
                    self._sink.add(kind, op, fn, tag.override)
                    count += 1
        return count


class ConverterRegistrar(_Registrar):
    """Handed to ``pt2onnx_register_converters``."""

    def converter(self, op: OpRef, fn: Callable[..., Any], *, override: bool = False) -> None:
        """Register ``fn`` as the converter of ``op``."""
        self._sink.add("converter", op, fn, override)

    def module(self, module: ModuleType) -> int:
        """Register every ``@converter`` function defined in ``module``; returns how many."""
        return self._add_tagged(module, "converter")


class LoweringRegistrar(_Registrar):
    """Handed to ``pt2onnx_register_lowerings``."""

    def lowering(self, op: OpRef, fn: Callable[..., Any], *, override: bool = False) -> None:
        """Register ``fn`` as the lowering of the higher-order op ``op``."""
        self._sink.add("lowering", op, fn, override)

    def module(self, module: ModuleType) -> int:
        """Register every ``@lowering`` function defined in ``module``; returns how many."""
        return self._add_tagged(module, "lowering")


class CustomOpRegistrar(_Registrar):
    """Handed to ``pt2onnx_register_custom_ops``: three ways to export a ``torch.library`` op."""

    def expand(self, op: OpRef, fn: Callable[..., Any], *, override: bool = False) -> None:
        """``fn(op, *args, **kwargs)`` emits standard ONNX ops for the custom op."""
        self._sink.add("custom_op", op, fn, override)

    def custom_domain(
        self,
        op: OpRef,
        *,
        domain: str,
        op_type: str | None = None,
        version: int = 1,
        attributes: Callable[..., dict[str, Any]] | None = None,
        override: bool = False,
    ) -> None:
        """Emit the op as one node ``domain::op_type`` (opset ``version`` of that domain).

        Tensor arguments become the node's inputs in schema order (an absent optional
        tensor before a present one is an empty input); ``attributes``, if
        given, maps the op's non-tensor arguments to ONNX attributes
        (``attributes(*args, **kwargs) -> dict``). Output types and shapes come from
        torch's metadata.
        """
        name = normalize_op_name(op)
        node_type = op_type or name.split("::", 1)[1].split(".", 1)[0]
        self._sink.add("custom_op", op, _single_node(domain, node_type, version, attributes), override)

    def decompose(self, op: OpRef, fn: Callable[..., Any], *, override: bool = False) -> None:
        """``fn`` is a Python decomposition of the op into aten ops, run before translation."""
        self._sink.add("decomposition", op, fn, override)

    def module(self, module: ModuleType) -> int:
        """Register every ``@converter`` function of ``module`` as an ``expand`` handler."""
        return self._add_tagged(module, "converter")


class DecompositionRegistrar(_Registrar):
    """Handed to ``pt2onnx_register_decompositions``."""

    def keep(self, *ops: OpRef) -> None:
        """Never decompose ``ops``: a converter translates them whole."""
        for op in ops:
            self._sink.add("keep", op, None, False)

    def decompose(self, op: OpRef, fn: Callable[..., Any], *, override: bool = False) -> None:
        """Decompose ``op`` with ``fn`` (a Python function over torch ops) before translation."""
        self._sink.add("decomposition", op, fn, override)


class RewriteRegistrar(_Registrar):
    """Handed to ``pt2onnx_register_rewrites``."""

    def rewrite(self, name: str, fn: Callable[[ir.Model], object], *, override: bool = False) -> None:
        """Register ``fn(model)``, which rewrites the assembled ``onnx_ir.Model`` in place, as the pass ``name``.

        ``name`` is how the report lists the pass and how ``optimize={name: False}``
        switches it off; a higher layer registering the same name replaces it.
        """
        if not name.isidentifier():
            raise ValueError(f"plugin {self.plugin!r}: rewrite name {name!r} is not an identifier")
        if not callable(fn):
            raise TypeError(f"plugin {self.plugin!r}: rewrite {name!r} is not callable: {fn!r}")
        self._sink.registrations.append(Registration(name, "rewrite", fn, self.plugin, self._sink.layer, override))


def _single_node(
    domain: str, op_type: str, version: int, attributes: Callable[..., dict[str, Any]] | None
) -> Callable[..., Any]:
    def emit(op: Any, *args: Any, **kwargs: Any) -> Any:
        attrs = attributes(*args, **kwargs) if attributes is not None else {}
        return op.custom_node(domain, op_type, _tensor_inputs(op, args, kwargs), attrs, version=version)

    emit.__name__ = f"{domain}.{op_type}"
    emit.__qualname__ = emit.__name__
    return emit


def _tensor_inputs(op: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> list[ir.Value | None]:
    """The tensor arguments in schema order; an absent optional tensor stays an empty input."""
    schema = getattr(op.node.target, "_schema", None)
    if schema is None:
        return [a for a in _flatten(args) if isinstance(a, ir.Value)]
    inputs: list[ir.Value | None] = []
    for i, argument in enumerate(schema.arguments):
        if "Tensor" not in str(argument.type):
            continue
        value = args[i] if i < len(args) else kwargs.get(argument.name)
        if isinstance(value, (list, tuple)):
            inputs.extend(_flatten(value))
        else:
            inputs.append(value)
    while inputs and inputs[-1] is None:
        inputs.pop()
    return inputs


def _flatten(args: Sequence[Any]) -> list[Any]:
    flat: list[Any] = []
    for a in args:
        if isinstance(a, (list, tuple)):
            flat.extend(_flatten(a))
        else:
            flat.append(a)
    return flat
