"""Prepare capture: what plugins say must surround ``torch.export`` for a model to be captured.

Plugins register three kinds of preparation (``pt2onnx_register_capture_preparations``),
each under a name and resolved by layer like converters:

* **pytree types**: container types in the model's inputs or outputs (a KV cache).
  They are registered with ``torch.utils._pytree`` process-wide, once, and kept: the
  captured program's input and output specs hold the type, and everything after
  capture (``ExportResult.run``/``verify``, ``program.module()``, ``torch.export.save``)
  flattens and unflattens it again. Scoping the registration to capture would break
  those. Registering is idempotent; a type some other code registered first is left as
  it is (its leaves then keep pt2onnx's default names). Blocking the plugin later in
  the same process does not unregister a type (torch has no public way to).
* **patches**: context managers that swap untraceable model code for a traceable
  equivalent while ``torch.export`` runs, entered under the capture lock.
* **dynamic-shape hints**: for ``dynamic_shapes="auto"``, named dims for the arguments
  a plugin knows (a cache's batch and past length) instead of every dim ``AUTO``.

A same-layer conflict fails an export only when it reaches it: a patch or hint that
would apply to the model, a pytree type found in the captured program's specs.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch.utils._pytree as pytree
from torch.export import ExportedProgram

from .errors import PluginError
from .interface.shapes import AUTO, resolve_dynamic_shapes
from .registration import PytreeNode
from .registry import Entry, Registry

__all__ = ["Preparation", "prepare_capture", "register_pytree_node", "register_pytrees"]

_registering = threading.Lock()


def register_pytree_node(node: PytreeNode, cls: type) -> bool:
    """Register ``cls`` (``node``'s type, resolved) with torch's pytree, once per process; False if
    other code registered it first."""
    with _registering:
        existing = pytree.SUPPORTED_NODES.get(cls)
        if existing is not None:
            return existing.unflatten_fn is node.unflatten
        pytree.register_pytree_node(
            cls,
            lambda obj: _without_keys(node, obj),
            node.unflatten,
            serialized_type_name=node.serialized_type_name,
            to_dumpable_context=node.to_dumpable_context,
            from_dumpable_context=node.from_dumpable_context,
            flatten_with_keys_fn=node.flatten_with_keys,
        )
        return True


def _without_keys(node: PytreeNode, obj: Any) -> tuple[list[Any], Any]:
    children, context = node.flatten_with_keys(obj)
    return [child for _, child in children], context


@dataclass
class Preparation:
    """The preparations of one export: the dynamic shapes to capture with and the patches to enter.

    Attributes:
        dynamic_shapes: what to hand ``torch.export.export`` (the user's, with hints applied).
        patches: the patches that apply to the model, with their context managers.
        hints: the dynamic-shape hints that applied.
        pytrees: the pytree types this session registered (or found registered), by type.
    """

    dynamic_shapes: Any
    patches: list[tuple[Entry, contextlib.AbstractContextManager[Any]]] = field(default_factory=list)
    hints: list[Entry] = field(default_factory=list)
    pytrees: dict[type, Entry] = field(default_factory=dict)

    @contextlib.contextmanager
    def around(self) -> Iterator[None]:
        """Enter every patch (the caller holds the capture lock); each restores what it changed on exit."""
        with contextlib.ExitStack() as stack:
            for _, patch in self.patches:
                stack.enter_context(patch)
            yield

    def reached(self, program: ExportedProgram) -> list[Entry]:
        """The pytree types in ``program``'s input or output specs.

        Raises:
            PluginConflictError: one of them is registered by two plugins of one layer.
        """
        found = _spec_types(program.call_spec.in_spec) | _spec_types(program.call_spec.out_spec)
        return [entry.check() for cls, entry in self.pytrees.items() if cls in found]

    def applied(self, program: ExportedProgram) -> list[Entry]:
        """Every preparation that did something in this export, in the order the report lists them."""
        return [*self.reached(program), *(entry for entry, _ in self.patches), *self.hints]

    def templates(self) -> dict[type, PytreeNode]:
        """The pytree types of this session, as :func:`pt2onnx.interface.names.io_names` applies their name templates."""
        return {cls: entry.winner.data for cls, entry in self.pytrees.items()}


def register_pytrees(registry: Registry) -> dict[type, Entry]:
    """Register the plugins' pytree types with torch; the ones this session registered (or found), by type.

    Done before anything walks the example inputs (moving them to the meta device, converting
    their dtype), so that the tensors inside a plugin's type (a cache) are reached too. A type
    named by the path of a module not imported yet is left for a later export: nothing the
    model takes or returns can be of it.

    Raises:
        PluginError: a plugin's type path names no class of its (imported) module.
    """
    pytrees: dict[type, Entry] = {}
    for entry in registry.preparations.values():
        if entry.winner.kind == "pytree":
            node: PytreeNode = entry.winner.data
            try:
                cls = node.resolve()
            except TypeError as e:
                raise PluginError(
                    f"plugin {entry.winner.plugin!r}: {e}",
                    hint=f"fix the path passed to register.pytree, or block the plugin with -p no:{entry.winner.plugin}",
                ) from e
            if cls is not None and register_pytree_node(node, cls):
                pytrees[cls] = entry
    return pytrees


def prepare_capture(
    registry: Registry,
    pytrees: dict[type, Entry],
    model: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    dynamic_shapes: Any,
    other_inputs: Sequence[tuple[tuple[Any, ...], dict[str, Any]]],
) -> Preparation:
    """Resolve the dynamic shapes (with hints) and pick the patches.

    ``pytrees`` are the types :func:`register_pytrees` registered. ``model`` is the eager
    module, or None for a given ``ExportedProgram`` (then there is nothing to prepare).

    Raises:
        PluginConflictError: a patch or hint that applies to ``model`` is registered by two
            plugins of one layer.
    """
    forward = model.forward if model is not None else None
    shapes = resolve_dynamic_shapes(dynamic_shapes, forward, args, kwargs, other_inputs)
    preparation = Preparation(shapes, pytrees=pytrees)
    if model is None:
        return preparation
    hinted: list[tuple[Entry, dict[str, Any]]] = []
    for entry in registry.preparations.values():
        kind = entry.winner.kind
        if kind == "patch":
            patch = _call(entry, model)
            if patch is not None:
                preparation.patches.append((entry.check(), patch))
        elif kind == "dynamic_shapes" and dynamic_shapes == AUTO and isinstance(shapes, dict):
            spec = _call(entry, model, args, kwargs)
            if spec:
                hinted.append((entry.check(), {k: v for k, v in spec.items() if k in shapes}))
    # A higher layer's hint wins for the arguments two hints name.
    for entry, spec in sorted(hinted, key=lambda pair: pair[0].winner.layer):
        shapes.update(spec)
        preparation.hints.append(entry)
    return preparation


def _call(entry: Entry, *args: Any) -> Any:
    fn: Callable[..., Any] = entry.winner.fn  # type: ignore[assignment]
    return fn(*args)


def _spec_types(spec: pytree.TreeSpec | None) -> set[type]:
    if spec is None:
        return set()
    found = {spec.type} if spec.type is not None else set()
    for child in spec.children():
        found |= _spec_types(child)
    return found
