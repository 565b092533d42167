"""What plugins register, and the registrar objects the hooks hand them.

A plugin module marks its functions with :func:`converter` or :func:`lowering`
(which only tag the function: there is no import-time registry) and registers them
from its hook with ``register.module(this_module)``.

Converters, lowerings, custom-op handlers and rewrites may say which ONNX opsets they
emit for: ``since=N`` (the oldest, inclusive) and ``until=M`` (the newest, inclusive).
One op can have one implementation per ONNX form (``ReduceMean`` with its axes as an
attribute ``until=17``, as an input ``since=18``); the registry built for an export keeps
only those whose range holds the target opset, and of one plugin's, the one with the
highest ``since`` (see :mod:`pt2onnx.registry`).
"""

from __future__ import annotations

import enum
import inspect
import sys
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
    "PreparationRegistrar",
    "PytreeNode",
    "Registration",
    "RewriteRegistrar",
    "converter",
    "lowering",
]

F = TypeVar("F", bound=Callable[..., Any])

Kind = Literal[
    "converter", "lowering", "custom_op", "decomposition", "keep", "rewrite", "pytree", "patch", "dynamic_shapes"
]
#: The kinds of capture preparation (``pt2onnx_register_capture_preparations``).
PREPARATION_KINDS: tuple[Kind, ...] = ("pytree", "patch", "dynamic_shapes")

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
    """One thing one plugin registered for one op (for a rewrite or a capture preparation: under its name)."""

    op: str
    kind: Kind
    fn: Callable[..., Any] | None
    plugin: str
    layer: Layer
    override: bool = False
    #: What a ``pytree`` preparation registers (a :class:`PytreeNode`); None for every other kind.
    data: Any = None
    #: The converter takes and returns complex values (as real tensors with a trailing dim of 2).
    complex_values: bool = False
    #: The oldest target opset this registration serves (inclusive); None: any.
    since: int | None = None
    #: The newest target opset this registration serves (inclusive); None: any.
    until: int | None = None
    #: How far above the dtype's default tolerance its results may differ from eager and a
    #: test still prove it (:data:`pt2onnx.testing.TOLERANCE_FACTOR` when None).
    tolerance: float | None = None

    def serves(self, opset: int) -> bool:
        """Whether this registration applies to an export at ``opset``."""
        return (self.since is None or self.since <= opset) and (self.until is None or opset <= self.until)

    @property
    def opsets(self) -> str:
        """The opset range as people write it: ``"any"``, ``"18+"``, ``"14-17"``, ``"up to 17"``."""
        if self.since is None and self.until is None:
            return "any"
        if self.until is None:
            return f"{self.since}+"
        if self.since is None:
            return f"up to {self.until}"
        return f"{self.since}-{self.until}"

    @property
    def converts(self) -> bool:
        """Whether this registration translates the op itself (rather than decomposing it)."""
        return self.kind in ("converter", "lowering", "custom_op")


def check_tolerance(tolerance: float | None) -> None:
    """Raise ``ValueError`` unless ``tolerance`` is None or a factor of at least 1."""
    if tolerance is not None and (
        isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not tolerance >= 1
    ):
        raise ValueError(f"tolerance={tolerance!r} is not a factor of the dtype's default tolerance (a number >= 1)")


def check_opset_range(since: int | None, until: int | None) -> None:
    """Raise ``ValueError`` unless ``since``/``until`` are None or ints with ``since <= until``."""
    for name, bound in (("since", since), ("until", until)):
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int) or bound < 1):
            raise ValueError(f"{name}={bound!r} is not an opset (a positive int, or None)")
    if since is not None and until is not None and since > until:
        raise ValueError(f"since={since} is above until={until}: the range holds no opset")


@dataclass(frozen=True)
class _Tag:
    kind: Kind
    ops: tuple[str, ...]
    override: bool
    complex_values: bool = False
    since: int | None = None
    until: int | None = None
    tolerance: float | None = None


def _tagger(
    kind: Kind,
    ops: Sequence[OpRef],
    override: bool,
    complex_values: bool = False,
    since: int | None = None,
    until: int | None = None,
    tolerance: float | None = None,
) -> Callable[[F], F]:
    names = tuple(normalize_op_name(op) for op in ops)
    if not names:
        raise ValueError(f"@{kind} needs at least one op name")
    check_opset_range(since, until)
    check_tolerance(tolerance)

    def mark(fn: F) -> F:
        tags: list[_Tag] = list(getattr(fn, _TAG, ()))
        tags.append(_Tag(kind, names, override, complex_values, since, until, tolerance))
        setattr(fn, _TAG, tags)
        return fn

    return mark


def converter(
    *ops: OpRef,
    override: bool = False,
    complex_values: bool = False,
    since: int | None = None,
    until: int | None = None,
    tolerance: float | None = None,
) -> Callable[[F], F]:
    """Mark ``fn`` as the converter of ``ops`` (names like ``"aten::gelu"`` or op objects).

    ``override=True`` lets it replace another registration of the same layer.
    ``complex_values=True`` says it handles complex tensors, which reach it as real
    Values with a trailing dim of 2 (real, imaginary); pt2onnx refuses to hand complex
    values to any other converter, which would compute on them as on real ones.
    ``since``/``until`` bound the target opsets it serves (both inclusive; None: no
    bound): an export at another opset does not see it, and of one plugin's converters
    of an op that serve the target opset, the one with the highest ``since`` wins.
    ``tolerance=N`` declares that its results match eager only within N times the
    dtype's default tolerance (say, it computes in another precision than torch's
    kernel): a test with such a tolerance then proves it (``pytest --pt2onnx-prove``),
    where without the declaration only tests within
    :data:`pt2onnx.testing.TOLERANCE_FACTOR` times the default do.
    The function is registered when its module is passed to ``register.module``.
    """
    return _tagger("converter", ops, override, complex_values, since, until, tolerance)


def lowering(
    *ops: OpRef,
    override: bool = False,
    since: int | None = None,
    until: int | None = None,
    tolerance: float | None = None,
) -> Callable[[F], F]:
    """Mark ``fn`` as the lowering of higher-order ``ops`` (``"higher_order::cond"``, ...).

    ``since``/``until``/``tolerance``: as for :func:`converter`.
    """
    return _tagger("lowering", ops, override, since=since, until=until, tolerance=tolerance)


@dataclass
class _Sink:
    """Collects one plugin's registrations during one hook call."""

    plugin: str
    layer: Layer
    registrations: list[Registration] = field(default_factory=list)

    def add(
        self,
        kind: Kind,
        op: OpRef,
        fn: Callable[..., Any] | None,
        override: bool,
        complex_values: bool = False,
        since: int | None = None,
        until: int | None = None,
        tolerance: float | None = None,
    ) -> None:
        if fn is not None and not callable(fn):
            raise TypeError(f"plugin {self.plugin!r}: {kind} for {op!r} is not callable: {fn!r}")
        try:
            check_opset_range(since, until)
            check_tolerance(tolerance)
        except ValueError as e:
            raise ValueError(f"plugin {self.plugin!r}: {kind} for {op!r}: {e}") from None
        self.registrations.append(
            Registration(
                normalize_op_name(op),
                kind,
                fn,
                self.plugin,
                self.layer,
                override,
                None,
                complex_values,
                since,
                until,
                tolerance,
            )
        )


class _Registrar:
    def __init__(self, sink: _Sink) -> None:
        self._sink = sink

    @property
    def plugin(self) -> str:
        """The name of the plugin registering."""
        return self._sink.plugin

    def _add_tagged(self, module: ModuleType, tagged: Kind, kind: Kind | None = None) -> int:
        """Register the functions of ``module`` tagged ``tagged`` as registrations of ``kind`` (default: the same)."""
        kind = kind or tagged
        count = 0
        for _, fn in sorted(inspect.getmembers(module, callable), key=lambda item: item[0]):
            if getattr(fn, "__module__", None) != module.__name__:
                continue
            for tag in getattr(fn, _TAG, ()):
                if tag.kind != tagged:
                    continue
                for op in tag.ops:
                    self._sink.add(kind, op, fn, tag.override, tag.complex_values, tag.since, tag.until, tag.tolerance)
                    count += 1
        return count


class ConverterRegistrar(_Registrar):
    """Handed to ``pt2onnx_register_converters``."""

    def converter(
        self,
        op: OpRef,
        fn: Callable[..., Any],
        *,
        override: bool = False,
        complex_values: bool = False,
        since: int | None = None,
        until: int | None = None,
        tolerance: float | None = None,
    ) -> None:
        """Register ``fn`` as the converter of ``op`` (the keywords: see :func:`converter`)."""
        self._sink.add("converter", op, fn, override, complex_values, since, until, tolerance)

    def module(self, module: ModuleType) -> int:
        """Register every ``@converter`` function defined in ``module``; returns how many."""
        return self._add_tagged(module, "converter")


class LoweringRegistrar(_Registrar):
    """Handed to ``pt2onnx_register_lowerings``."""

    def lowering(
        self,
        op: OpRef,
        fn: Callable[..., Any],
        *,
        override: bool = False,
        since: int | None = None,
        until: int | None = None,
        tolerance: float | None = None,
    ) -> None:
        """Register ``fn`` as the lowering of the higher-order op ``op`` (the keywords: see :func:`converter`)."""
        self._sink.add("lowering", op, fn, override, since=since, until=until, tolerance=tolerance)

    def module(self, module: ModuleType) -> int:
        """Register every ``@lowering`` function defined in ``module``; returns how many."""
        return self._add_tagged(module, "lowering")


class CustomOpRegistrar(_Registrar):
    """Handed to ``pt2onnx_register_custom_ops``: three ways to export a ``torch.library`` op.

    Each takes ``since``/``until``, the target opsets the handler serves, and
    ``tolerance``, how far from eager its results may be (see :func:`converter`).
    """

    def expand(
        self,
        op: OpRef,
        fn: Callable[..., Any],
        *,
        override: bool = False,
        since: int | None = None,
        until: int | None = None,
        tolerance: float | None = None,
    ) -> None:
        """``fn(op, *args, **kwargs)`` emits standard ONNX ops for the custom op."""
        self._sink.add("custom_op", op, fn, override, since=since, until=until, tolerance=tolerance)

    def custom_domain(
        self,
        op: OpRef,
        *,
        domain: str,
        op_type: str | None = None,
        version: int = 1,
        attributes: Callable[..., dict[str, Any]] | None = None,
        override: bool = False,
        since: int | None = None,
        until: int | None = None,
        tolerance: float | None = None,
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
        emit = _single_node(domain, node_type, version, attributes)
        self._sink.add("custom_op", op, emit, override, since=since, until=until, tolerance=tolerance)

    def decompose(
        self,
        op: OpRef,
        fn: Callable[..., Any],
        *,
        override: bool = False,
        since: int | None = None,
        until: int | None = None,
        tolerance: float | None = None,
    ) -> None:
        """``fn`` is a Python decomposition of the op into aten ops, run before translation."""
        self._sink.add("decomposition", op, fn, override, since=since, until=until, tolerance=tolerance)

    def module(self, module: ModuleType) -> int:
        """Register every ``@converter`` function of ``module`` as an ``expand`` handler; returns how many.

        Like :meth:`expand`, each is a custom-op handler (kind ``custom_op``), whatever its decorator.
        """
        return self._add_tagged(module, "converter", "custom_op")


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

    def rewrite(
        self,
        name: str,
        fn: Callable[[ir.Model], object],
        *,
        override: bool = False,
        since: int | None = None,
        until: int | None = None,
        tolerance: float | None = None,
    ) -> None:
        """Register ``fn(model)``, which rewrites the assembled ``onnx_ir.Model`` in place, as the pass ``name``.

        ``name`` is how the report lists the pass and how ``optimize={name: False}``
        switches it off; a higher layer registering the same name replaces it.
        ``since``/``until``: the target opsets it runs at (inclusive), e.g. ``since=23``
        for a fusion into ``Attention``; at any other opset the pass is off and the
        report says why. ``tolerance``: how far from eager its results may be, as for
        :func:`converter`.
        """
        if not name.isidentifier():
            raise ValueError(f"plugin {self.plugin!r}: rewrite name {name!r} is not an identifier")
        if not callable(fn):
            raise TypeError(f"plugin {self.plugin!r}: rewrite {name!r} is not callable: {fn!r}")
        try:
            check_opset_range(since, until)
            check_tolerance(tolerance)
        except ValueError as e:
            raise ValueError(f"plugin {self.plugin!r}: rewrite {name!r}: {e}") from None
        self._sink.registrations.append(
            Registration(
                name,
                "rewrite",
                fn,
                self.plugin,
                self._sink.layer,
                override,
                since=since,
                until=until,
                tolerance=tolerance,
            )
        )


@dataclass(frozen=True)
class PytreeNode:
    """A container type the capture must see through, as ``torch.utils._pytree`` registers it.

    ``flatten_with_keys(obj) -> (children_with_keys, context)`` and
    ``unflatten(children, context) -> obj`` as for ``register_pytree_node``. The key
    entries name the ONNX inputs and outputs: a leaf inside the container is named
    ``input_names`` (as a graph input) or ``output_names`` (as a graph output) with
    ``{path}`` replaced by where the container sits (``past_key_values``) and ``{key}``
    by the leaf's keys inside it joined by dots (``0.key``); None keeps pt2onnx's
    default names (``past_key_values_0_key`` in, ``past_key_values.0.key`` out).

    ``cls`` is the type, or its import path ``"module:qualname"``, which :meth:`resolve`
    looks up only once that module is imported.
    """

    cls: type | str
    flatten_with_keys: Callable[[Any], tuple[list[tuple[Any, Any]], Any]]
    unflatten: Callable[[Any, Any], Any]
    serialized_type_name: str
    to_dumpable_context: Callable[[Any], Any] | None = None
    from_dumpable_context: Callable[[Any], Any] | None = None
    input_names: str | None = None
    output_names: str | None = None

    @property
    def name(self) -> str:
        """The registration's name: the type's ``module.qualname``."""
        return _type_name(self.cls)

    def resolve(self) -> type | None:
        """The type; None while the module an import path names is not imported.

        Until then no object of the type can exist, so no model input or output holds one:
        a plugin that names its types by path never imports the library they come from.

        Raises:
            TypeError: the imported module has no type at that path.
        """
        if not isinstance(self.cls, str):
            return self.cls
        module_name, _, qualname = self.cls.partition(":")
        found: Any = sys.modules.get(module_name)
        if found is None:
            return None
        for part in qualname.split("."):
            found = getattr(found, part, None)
        if not isinstance(found, type):
            raise TypeError(f"pytree type {self.cls!r}: module {module_name!r} has no class {qualname!r}")
        return found


class PreparationRegistrar(_Registrar):
    """Handed to ``pt2onnx_register_capture_preparations``: what must surround ``torch.export``."""

    def pytree(
        self,
        cls: type | str,
        flatten_with_keys: Callable[[Any], tuple[list[tuple[Any, Any]], Any]],
        unflatten: Callable[[Any, Any], Any],
        *,
        serialized_type_name: str | None = None,
        to_dumpable_context: Callable[[Any], Any] | None = None,
        from_dumpable_context: Callable[[Any], Any] | None = None,
        input_names: str | None = None,
        output_names: str | None = None,
        override: bool = False,
    ) -> None:
        """Register the container type ``cls`` with ``torch.utils._pytree`` before capture.

        ``cls`` is the type or its import path, ``"module:qualname"``
        (``"transformers.cache_utils:DynamicCache"``): a type named by path is registered by
        the first export that finds its module imported, so a plugin serving a library
        does not import it (nor make every export pay for importing it). Its functions must
        then be importable without that library too.

        The registration is made once per process, by the first export that loads the
        plugin, and stays: the exported program's input and output specs hold ``cls``,
        and running, verifying or saving it flattens ``cls`` again. ``serialized_type_name``
        (default ``module.qualname``) and the dumpable-context pair are what
        ``torch.export.save`` writes. ``input_names``/``output_names`` name the leaves (see
        :class:`PytreeNode`). A type some other code already registered is left as it is.
        """
        if isinstance(cls, str):
            module_name, colon, qualname = cls.partition(":")
            if not colon or not all(p.isidentifier() for p in [*module_name.split("."), *qualname.split(".")]):
                raise ValueError(
                    f"plugin {self.plugin!r}: register.pytree takes a class or its path 'module:qualname', got {cls!r}"
                )
        elif not isinstance(cls, type):
            raise TypeError(f"plugin {self.plugin!r}: register.pytree takes a class or its path, got {cls!r}")
        for what, fn in (("flatten_with_keys", flatten_with_keys), ("unflatten", unflatten)):
            if not callable(fn):
                raise TypeError(f"plugin {self.plugin!r}: pytree {what} for {cls.__qualname__} is not callable: {fn!r}")
        for what, template in (("input_names", input_names), ("output_names", output_names)):
            if template is not None:
                _check_template(self.plugin, what, template)
        node = PytreeNode(
            cls,
            flatten_with_keys,
            unflatten,
            serialized_type_name or _type_name(cls),
            to_dumpable_context,
            from_dumpable_context,
            input_names,
            output_names,
        )
        self._add_prepared("pytree", node.name, flatten_with_keys, override, node)

    def patch(self, name: str, patch: Callable[[Any], Any], *, override: bool = False) -> None:
        """Register ``patch(model)``: a context manager entered around ``torch.export``, or None.

        For model code that cannot be traced as it is (a Python loop over a sequence
        length, a data-dependent branch): ``patch`` returns a context manager that swaps
        in a traceable equivalent while capture runs, or None when ``model`` does not need
        it. Patches run under the capture lock, so a class attribute swapped there is
        seen by no other thread's trace; they must restore everything on exit.
        """
        self._check_name(name, "patch")
        self._add_prepared("patch", name, patch, override)

    def dynamic_shapes(self, name: str, hint: Callable[..., Any], *, override: bool = False) -> None:
        """Register ``hint(model, args, kwargs)``: dynamic shapes for some of the model's arguments, or None.

        With ``dynamic_shapes="auto"``, the spec the hint returns (keyed by ``forward``'s
        parameter names, as ``torch.export`` takes it; ``Dim`` names name the ONNX dims)
        replaces the every-dim-``AUTO`` spec of those arguments. None: the hint does not
        apply to this model. Hints of a higher layer win for the arguments both name.
        """
        self._check_name(name, "dynamic_shapes hint")
        self._add_prepared("dynamic_shapes", name, hint, override)

    def _check_name(self, name: str, what: str) -> None:
        if not isinstance(name, str) or not all(part.isidentifier() for part in name.split(".")):
            raise ValueError(f"plugin {self.plugin!r}: {what} name {name!r} is not a dotted identifier")

    def _add_prepared(self, kind: Kind, name: str, fn: Callable[..., Any], override: bool, data: Any = None) -> None:
        if not callable(fn):
            raise TypeError(f"plugin {self.plugin!r}: {kind} {name!r} is not callable: {fn!r}")
        self._sink.registrations.append(Registration(name, kind, fn, self.plugin, self._sink.layer, override, data))


def _type_name(cls: type | str) -> str:
    """``module.qualname`` of a type or of its import path ``module:qualname``."""
    return cls.replace(":", ".") if isinstance(cls, str) else f"{cls.__module__}.{cls.__qualname__}"


def _check_template(plugin: str, what: str, template: str) -> None:
    try:
        template.format(path="p", key="k")
    except (KeyError, IndexError, ValueError) as e:
        raise ValueError(
            f"plugin {plugin!r}: pytree {what}={template!r} may use only {{path}} and {{key}}: {e}"
        ) from None


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
