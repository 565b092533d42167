"""Hook specifications: everything a pt2onnx plugin can provide.

A plugin is a module (or any object) with functions marked ``@hookimpl`` whose names
are the hooks below. Each hook hands the plugin a *registrar*; the plugin calls it to
register what it provides, and returns nothing. pt2onnx calls the hooks of a project
or ``plugins=`` plugin once per export, and those of an installed or builtin pack once
per process (its registrations are kept, as its modules are: what a pack registers must
not depend on state that changes while the process runs). It resolves the registrations
into plain lookup tables, so the per-node loop never calls a hook.

A hook implementation may accept fewer arguments than the spec names (pluggy
passes only those it asks for), so hooks can grow without breaking plugins.

Where plugins come from, highest layer first (a higher layer wins silently; two
registrations of one op in the same layer — converters, lowerings, custom-op handlers
and decompositions alike — conflict unless one says ``override=True``, and the conflict
fails the exports that reach the op; registrations whose ``since``/``until`` range does
not hold the target opset take no part):

1. ``plugins=[...]`` passed to :func:`pt2onnx.export` (modules, module names or objects);
2. the user's project: ``[tool.pt2onnx] plugins = ["mypkg.overrides"]`` in the nearest
   ``pyproject.toml`` from the current directory upward (never one above it);
3. installed packs: entry points in the group ``pt2onnx``;
4. builtin packs (``pt2onnx-aten``, ``pt2onnx-hops``, ``pt2onnx-decomp``,
   ``pt2onnx-fusions``): also entry points, found exactly as an installed pack is.

Which of them are read when, and how to close each: ``docs/trust.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from .registration import (
        ConverterRegistrar,
        CustomOpRegistrar,
        DecompositionRegistrar,
        LoweringRegistrar,
        PreparationRegistrar,
        RewriteRegistrar,
    )

__all__ = ["hookimpl", "hookspec"]

#: Marks a hook specification (used by pt2onnx itself).
hookspec = pluggy.HookspecMarker("pt2onnx")
#: Marks a plugin's hook implementation: ``@hookimpl def pt2onnx_register_converters(register): ...``
hookimpl = pluggy.HookimplMarker("pt2onnx")


@hookspec
def pt2onnx_register_converters(register: ConverterRegistrar) -> None:
    """Register converters for ops that appear in exported graphs (aten, prims, Python callables).

    A converter is a function ``fn(op, *args, **kwargs)`` whose parameters mirror the
    op's schema: tensors arrive as ``onnx_ir.Value``, Python scalars as scalars,
    symbolic ints as 0-d INT64 Values. ``op`` (a :class:`pt2onnx.plugin.Op`) emits ONNX
    nodes and knows the target opset. It returns the output Value, or a tuple of them
    for ops with several outputs. It raises
    :class:`pt2onnx.errors.UnsupportedArgumentError` for an argument it cannot express.

    Use ``register.module(mod)`` to register every function of ``mod`` decorated with
    :func:`pt2onnx.plugin.converter`, or ``register.converter(op_name, fn)`` for one.

    ``since=N``/``until=M`` (on the decorator or the call; both inclusive) bound the
    target opsets a converter serves, so an op can have one converter per ONNX form
    (``ReduceMean`` with its axes as an attribute ``until=17``, as an input ``since=18``).
    An export sees only those that serve its opset; of one plugin's, the highest
    ``since`` wins; then layers decide between plugins. Lowerings, custom-op handlers and
    rewrites take the same keywords.

    Fires once per export for a project or ``plugins=`` plugin, once per process for an
    installed or builtin pack (and for ``pt2onnx plugins``/``pt2onnx ops``).
    """


@hookspec
def pt2onnx_register_lowerings(register: LoweringRegistrar) -> None:
    """Register lowerings for higher-order ops (``cond``, ``while_loop``, ``scan``, ``map``, ...).

    A lowering has the converter signature; the HOP's graph arguments arrive as
    ``torch.fx.GraphModule`` objects, which the lowering turns into ONNX subgraphs
    with ``op.subgraph(gm, ...)``, into local functions with ``op.function(gm, ...)``
    or inlines with ``op.inline(gm, ...)``; the same registry translates their
    nodes, so plugins apply inside subgraphs too.

    Use ``register.module(mod)`` (functions decorated with :func:`pt2onnx.plugin.lowering`)
    or ``register.lowering(op, fn)``.
    """


@hookspec
def pt2onnx_register_custom_ops(register: CustomOpRegistrar) -> None:
    """Register handlers for the user's own ops (``torch.library``), in one of three ways.

    * ``register.expand(op, fn)``: ``fn`` emits standard ONNX ops, like a converter;
    * ``register.custom_domain(op, domain=..., op_type=..., version=...)``: one node in a
      domain of your choosing (e.g. ``com.microsoft``, or your own onnxruntime
      custom-op library), its output types and shapes set from torch's metadata;
    * ``register.decompose(op, fn)``: a Python decomposition into aten ops, which the
      aten converters then translate.

    An op can be named by string (``"mylib::fused_gelu"``) so the pack need not import
    the library that defines it.
    """


@hookspec
def pt2onnx_register_decompositions(register: DecompositionRegistrar) -> None:
    """Say which ops to decompose before translation and which to keep whole.

    pt2onnx re-traces the captured program with a decomposition table only when it
    must (the graph mutates, or holds an op no converter takes). That table is
    torch's default table minus every op that some plugin converts or keeps
    (``register.keep(op)``), plus the decompositions plugins add
    (``register.decompose(op, fn)``). A decomposition competes with the converters of
    the op like one of them: from a higher layer it forces the op to be decomposed even
    where a converter exists; in the same layer it conflicts unless one says
    ``override=True``.
    """


@hookspec
def pt2onnx_register_rewrites(register: RewriteRegistrar) -> None:
    """Register rewrites of the assembled ONNX model: fusions that span several nodes.

    A converter sees one FX node; a pattern such as rotary embedding or attention with
    its head reshapes spans many, so it is rewritten on the ONNX graph after translation.
    ``register.rewrite(name, fn)`` registers ``fn(model)``, which rewrites an
    ``onnx_ir.Model`` in place and must keep its numerics and its inputs and outputs.

    Rewrites run in the optimize phase after the core's clean-up passes (constant
    folding, identity elimination, reshape simplification, CSE), so patterns meet a
    canonical graph, and before dead-code removal, so a rewrite need not delete what it
    bypasses. Each is a pass of its own in the report, switched off with
    ``optimize={name: False}``. A rewrite that emits an op newer than some opsets says
    so with ``register.rewrite(name, fn, since=N)``: below ``N`` it does not run, and the
    report's ``passes_off`` names it with the reason.
    """


@hookspec
def pt2onnx_register_capture_preparations(register: PreparationRegistrar) -> None:
    """Register what must surround ``torch.export`` for some models to be captured at all.

    Three kinds, each under a name (resolved by layer like converters: a higher layer
    registering the same name wins, two in one layer conflict unless one says
    ``override=True``, and the conflict fails only exports that reach it):

    * ``register.pytree(cls, flatten_with_keys, unflatten, input_names=..., output_names=...)``:
      a container type in the model's inputs or outputs (a KV cache), named after the
      type. Registered with ``torch.utils._pytree`` once per process by the first
      export that loads the plugin, and kept: the exported program's specs hold the
      type, and running, verifying or saving the program flattens it again, after
      capture. The key entries the flatten returns name the ONNX inputs and outputs;
      the templates rename them (``"{path}.{key}"`` in, ``"present.{key}"`` out).
      ``cls`` may be an import path, ``"module:qualname"``: registered by the first
      export that finds the module imported, so the plugin need not import it.
    * ``register.patch(name, patch)``: ``patch(model)`` returns a context manager that
      replaces untraceable model code with a traceable equivalent while capture runs
      (under the capture lock), or None when the model does not need it.
    * ``register.dynamic_shapes(name, hint)``: ``hint(model, args, kwargs)`` returns
      dynamic shapes for some of the model's arguments (named ``Dim`` objects), used
      for those arguments when the export asks for ``dynamic_shapes="auto"``, or None.

    The preparations run in the capture phase, before ``torch.export``; the report lists
    those that applied (``report.preparations``). A pytree counts as applied when its
    type is in the captured program's inputs or outputs.
    """
