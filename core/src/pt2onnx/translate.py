"""Translate: walk the FX graph once and dispatch every node to its registered converter.

Each converter's outputs are checked against torch's ``meta["val"]`` (dtype and rank)
and then typed from it, so the ONNX graph is fully typed without shape inference.
Every ONNX node gets provenance metadata from the FX node it was made for.
Higher-order ops translate their sub-GraphModules through the same registry.
"""

from __future__ import annotations

import itertools
import operator
import re
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import onnx
import onnx_ir as ir
import onnxscript
import sympy  # type: ignore[import-untyped]  # torch's own dependency, untyped
import torch
import torch.fx
from onnxscript import GraphBuilder
from torch.fx.experimental.symbolic_shapes import statically_known_true

from .builder import Builder
from .errors import (
    ConversionError,
    ConverterDeclined,
    PluginConflictError,
    Pt2OnnxError,
    UnsupportedArgumentError,
    UnsupportedOpsError,
)
from .inspection import function_id
from .interface.symbolic import DimNames, ir_type_and_shape
from .op import Op
from .opnames import op_name
from .opset import MIN_OPSET
from .provenance import METADATA_KEYS, location_of, metadata_props
from .registration import Registration
from .registry import Entry, Registry
from .walk import all_nodes

__all__ = ["NONFINITE_MODES", "GraphTranslator", "TranslatedGraph", "UnknownCustomOpWarning", "check_shapes"]

#: The values of ``export(nonfinite=...)``: the ONNX ops' own results on NaN and ±inf where
#: torch's cost run time (``"onnx"``, the default), or torch's everywhere (``"torch"``).
NONFINITE_MODES = ("onnx", "torch")

# Namespaces of ops torch itself defines; any other namespace is a user's custom op.
_TORCH_NAMESPACES = frozenset(
    {"aten", "prims", "higher_order", "operator", "torch", "math", "builtins", "_operator", "quantized_decomposed"}
)
# A symbolic dim that is one symbol (``batch``, ``s77``), not an expression (``2*seq``).
_SYMBOL = re.compile(r"[A-Za-z_]\w*")


class UnknownCustomOpWarning(UserWarning):
    """A custom op without handler was emitted as an opaque node (``unknown_custom_ops="emit"``)."""


@dataclass
class TranslatedGraph:
    """The main graph as translated: placeholders as values, outputs in FX order."""

    graph: ir.Graph
    builder: GraphBuilder
    placeholders: dict[str, Any]
    outputs: list[Any]
    domains: dict[str, int]
    functions: dict[ir.OperatorIdentifier, ir.Function]
    usage: Counter[tuple[str, str]] = field(default_factory=Counter)
    entries: dict[str, Entry] = field(default_factory=dict)
    #: Per (op, plugin that converted), the plugins whose converters declined those nodes first.
    declined: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    #: Per FX node (qualified as in the ``pt2onnx.fx_node`` metadata): the node, its converter and plugin.
    converted: dict[str, tuple[torch.fx.Node, Callable[..., Any], str]] = field(default_factory=dict)
    #: The converters' outputs typed from torch's metadata, each with its FX node's qualified name.
    torch_typed: dict[ir.Value, str] = field(default_factory=dict)
    #: The graph inputs' symbolic dims that are one symbol each (``batch``, ``s77``).
    input_symbols: frozenset[str] = frozenset()
    #: Per (op, plugin, deviation) that ``op.exact_nonfinite`` recorded: how many FX nodes.
    nonfinite_deviations: dict[tuple[str, str, str], int] = field(default_factory=dict)
    #: Sizes torch's guards fix that the graph holds static (``x_dim1*x_dim2 == 16``),
    #: each with the first FX node whose converter relied on it.
    size_guards: dict[str, str] = field(default_factory=dict)


def _is_custom(name: str) -> bool:
    return name.split("::", 1)[0] not in _TORCH_NAMESPACES


def _other_opsets(unserved: list[Registration], opset: int) -> str:
    """Where the registrations ``unserved`` convert an op, and the oldest opset that would work."""
    ranges = ", ".join(f"{r.opsets} ({r.plugin})" for r in unserved)
    oldest = min(max(r.since or MIN_OPSET, MIN_OPSET) for r in unserved)
    return f"converted at opsets {ranges}, not at {opset}; the oldest that works: opset={oldest}"


class GraphTranslator:
    """Translates one exported program; lives for one export."""

    def __init__(
        self,
        registry: Registry,
        dims: DimNames,
        opset: int,
        *,
        unknown_custom_ops: str = "error",
        nonfinite: str = "onnx",
    ) -> None:
        self.registry = registry
        self.dims = dims
        self.opset = opset
        self.unknown_custom_ops = unknown_custom_ops
        self.nonfinite = nonfinite
        self.domains: dict[str, int] = {}
        self.functions: dict[ir.OperatorIdentifier, ir.Function] = {}
        self.usage: Counter[tuple[str, str]] = Counter()
        self.entries: dict[str, Entry] = {}
        self.declined: dict[tuple[str, str], set[str]] = {}
        self.converted: dict[str, tuple[torch.fx.Node, Callable[..., Any], str]] = {}
        self.torch_typed: dict[ir.Value, str] = {}
        # The graph inputs' symbolic dims that are one symbol each (``batch``, ``s77``).
        self._input_symbols: frozenset[str] = frozenset()
        self._prefix = ""
        # Higher-order-op nodes being lowered, outermost first (provenance of body nodes).
        self._enclosing: list[torch.fx.Node] = []
        # The plugins of the converters being called, as ``_enclosing``'s nodes.
        self._calling: list[str] = []
        # What ``op.exact_nonfinite`` recorded: (op, plugin, deviation, FX node), in call order.
        self._deviations: list[tuple[str, str, str, torch.fx.Node]] = []
        self._size_guards: dict[str, str] = {}

    # -- checks before translating anything -----------------------------------------

    def check_supported(self, gm: torch.fx.GraphModule) -> None:
        """Raise one error listing every op of ``gm`` (subgraphs included) without converter."""
        missing: dict[str, list[Any]] = {}
        other_opsets: dict[str, str] = {}
        for node in _all_call_nodes(gm):
            try:
                if self.registry.lookup(node.target) is not None:
                    continue
            except PluginConflictError as e:
                raise e.at(location_of(node)) from None
            name = op_name(node.target)
            unserved = self.registry.unserved(node.target)
            if unserved:
                other_opsets[name] = _other_opsets(unserved, self.opset)
            elif _is_custom(name) and self.unknown_custom_ops == "emit":
                continue
            missing.setdefault(name, []).append(location_of(node))
        if not missing:
            return
        hint = None
        custom = sorted(n for n in missing if _is_custom(n) and n not in other_opsets)
        if custom:
            hint = (
                f"{', '.join(custom)} {'is a custom op' if len(custom) == 1 else 'are custom ops'} "
                "(torch.library). Export it through a custom-op handler plugin in one of three ways: "
                "register.expand(op, fn) to emit standard ONNX ops; register.custom_domain(op, domain=...) "
                "to emit one node in your own domain; register.decompose(op, fn) to decompose it into "
                "aten ops (see docs/custom_ops.md). Or pass unknown_custom_ops='emit' to emit one opaque "
                "node in a domain named after the op's namespace."
            )
        if other_opsets:
            newer = (
                f"{', '.join(sorted(other_opsets))} {'is' if len(other_opsets) == 1 else 'are'} converted at other "
                f"opsets than {self.opset}: export at an opset its line names (opset=N), or register a converter "
                f"that serves opset {self.opset}"
            )
            hint = f"{newer}. {hint}" if hint else newer
        closed = self.registry.plugin_set.closed_note()
        if closed is not None:
            hint = f"{(hint or UnsupportedOpsError.DEFAULT_HINT).rstrip('.')}. Note: {closed}"
        raise UnsupportedOpsError(missing, hint=hint, other_opsets=other_opsets)

    # -- the main graph -------------------------------------------------------------

    def translate_program(
        self, gm: torch.fx.GraphModule, on_node: Callable[[int], None] | None = None
    ) -> TranslatedGraph:
        """Translate the exported program's graph; placeholders become graph inputs for now.

        ``on_node(1)`` is called after each ``call_function`` node of the main graph (progress).
        """
        self.check_supported(gm)
        graph = ir.Graph(inputs=[], outputs=[], nodes=[], opset_imports={"": self.opset}, name="main_graph")
        builder = Builder(graph)
        op = Op(builder, self)
        env: dict[torch.fx.Node, Any] = {}
        placeholders: dict[str, Any] = {}
        for node in gm.graph.find_nodes(op="placeholder"):
            value = self._typed_value(node.meta.get("val"), node.name)
            if value is None:
                # A constant (non-tensor) input: torch specialized the graph on it.
                env[node] = node.meta.get("val")
            else:
                env[node] = value
                graph.inputs.append(value)
            placeholders[node.name] = env[node]
        self._input_symbols = frozenset(
            d.value
            for value in graph.inputs
            for d in value.shape or ()
            if isinstance(d, ir.SymbolicDim) and d.value is not None and _SYMBOL.fullmatch(d.value)
        )
        outputs = self._walk(op, gm.graph, env, on_node)
        return TranslatedGraph(
            graph,
            builder,
            placeholders,
            outputs,
            self.domains,
            self.functions,
            self.usage,
            self.entries,
            self.declined,
            self.converted,
            self.torch_typed,
            self._input_symbols,
            self._deviation_counts(),
            dict(self._size_guards),
        )

    # -- bodies of higher-order ops ---------------------------------------------------

    def placeholder_values(self, fx_graph: torch.fx.Graph, prefix: str) -> list[ir.Value]:
        values = []
        for node in fx_graph.find_nodes(op="placeholder"):
            value = self._typed_value(node.meta.get("val"), f"{prefix}{node.name}")
            if value is None:
                raise ConversionError(
                    f"subgraph input {node.name!r} is not a tensor or symbolic scalar",
                    location=location_of(node),
                )
            values.append(value)
        return values

    def translate_body(self, op: Op, fx_graph: torch.fx.Graph, args: Sequence[Any]) -> list[Any]:
        placeholders = list(fx_graph.find_nodes(op="placeholder"))
        if len(placeholders) != len(args):
            raise ConversionError(
                f"subgraph takes {len(placeholders)} inputs but was given {len(args)}",
                location=location_of(op.node) if op._node is not None else None,
            )
        env: dict[torch.fx.Node, Any] = dict(zip(placeholders, args))
        saved = op._node
        try:
            return self._walk(op, fx_graph, env)
        finally:
            op._node = saved

    def build_subgraph(
        self, op: Op, build: Callable[..., Sequence[Any]], inputs: Sequence[ir.Value], name: str
    ) -> ir.Graph:
        graph = ir.Graph(
            inputs=list(inputs), outputs=[], nodes=[], opset_imports=dict(op.builder.graph.opset_imports), name=name
        )
        sub_op = Op(Builder(graph, parent=op.builder), self)
        sub_op._node = op._node
        saved_prefix, self._prefix = self._prefix, f"{self._prefix}{name}."
        try:
            outputs = build(sub_op, *inputs)
        finally:
            self._prefix = saved_prefix
        graph.outputs.extend(self._graph_outputs(sub_op, list(outputs), graph))
        if op._node is not None:
            _stamp(graph, len(graph), self._props(op._node))
        return graph

    def build_function(self, op: Op, gm: torch.fx.GraphModule, name: str, domain: str) -> ir.Function:
        key: ir.OperatorIdentifier = (domain, name, "")
        if key in self.functions:
            return self.functions[key]
        self.use_domain(domain, 1)
        inputs = self.placeholder_values(gm.graph, "")
        node = op._node

        def trace(inner: onnxscript.OpBuilder, *xs: ir.Value) -> list[ir.Value]:
            body_op = Op(inner.builder, self)
            body_op._node = node
            outputs = self.translate_body(body_op, gm.graph, xs)
            return self._graph_outputs(body_op, outputs, inner.builder.graph)

        opsets = {"": self.opset, **{d: v for d, v in self.domains.items() if d != domain}}
        function = onnxscript.build_function(trace, inputs, domain=domain, name=name, opset_imports=opsets)
        # Domains first used while tracing the body (e.g. calls of nested functions).
        for used, version in self.domains.items():
            function.opset_imports.setdefault(used, version)
        if node is not None:
            _stamp(function.graph, len(function.graph), self._props(node))
        self.functions[key] = function
        return function

    def exact_nonfinite(self, deviation: str) -> bool:
        """See :meth:`pt2onnx.op.Op.exact_nonfinite`."""
        if not self._enclosing:
            raise RuntimeError("op.exact_nonfinite is only available while a node is translated")
        if self.nonfinite == "torch":
            return True
        node = self._enclosing[-1]
        self._deviations.append((op_name(node.target), self._calling[-1], deviation, node))
        return False

    def _deviation_counts(self) -> dict[tuple[str, str, str], int]:
        nodes: dict[tuple[str, str, str], set[torch.fx.Node]] = {}
        for op, plugin, deviation, node in self._deviations:
            nodes.setdefault((op, plugin, deviation), set()).add(node)
        return {key: len(found) for key, found in sorted(nodes.items())}

    def use_domain(self, domain: str, version: int) -> None:
        """Record that nodes of ``domain`` (at ``version``) are emitted."""
        known = self.domains.get(domain)
        if known is not None and known != version:
            raise ConversionError(
                f"domain {domain!r} is used at opset versions {known} and {version}",
                hint="make every plugin emit one version of that domain",
            )
        self.domains[domain] = version

    # -- the walk -------------------------------------------------------------------

    def _walk(
        self,
        op: Op,
        fx_graph: torch.fx.Graph,
        env: dict[torch.fx.Node, Any],
        on_node: Callable[[int], None] | None = None,
    ) -> list[Any]:
        owner = fx_graph.owning_module
        for node in fx_graph.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "get_attr":
                env[node] = _fetch_attr(owner, node.target)
            elif node.op == "call_function":
                if on_node is not None:
                    on_node(1)
                if not node.users and _is_random(node):
                    continue  # a draw nobody uses: torch keeps it only because it is impure
                env[node] = self._convert(op, node, env)
            elif node.op == "output":
                return list(_flatten(_resolve(node.args[0], env)))
            else:
                raise ConversionError(f"unexpected FX node kind {node.op!r}", location=location_of(node))
        raise ConversionError("FX graph has no output node")

    def _convert(self, op: Op, node: torch.fx.Node, env: dict[torch.fx.Node, Any]) -> Any:
        entry = self.registry.lookup(node.target)
        candidates: list[tuple[Callable[..., Any], str, Registration | None]]
        if entry is None:
            candidates = [(_opaque_custom_op(node), "<unknown_custom_ops=emit>", None)]
        else:
            self.entries[op_name(node.target)] = entry
            candidates = [(r.fn, r.plugin, r) for r in entry.in_turn if r.converts and r.fn is not None]
        _check_float8(node, self.opset)
        args = _resolve(node.args, env)
        kwargs = _resolve(node.kwargs, env)
        declined: list[tuple[str, str]] = []
        for fn, plugin, registration in candidates:
            if registration is not None:
                _check_complex(node, registration)
            graph = op.builder.graph
            nodes_before, initializers_before = len(graph), len(graph.initializers)
            deviations_before = len(self._deviations)
            try:
                result = self._call(op, node, fn, plugin, args, kwargs)
            except ConverterDeclined as e:
                _drop_emitted(graph, nodes_before, initializers_before)
                del self._deviations[deviations_before:]  # the plain form it chose is dropped too
                declined.append((plugin, e.reason))
                continue
            props = self._props(node)
            _check_emitted(graph, len(graph) - nodes_before, fn, plugin, node)
            new_nodes = _stamp(graph, len(graph) - nodes_before, props)
            fx_name = props[METADATA_KEYS["node"]]
            self.converted[fx_name] = (node, fn, plugin)
            self.usage[(op_name(node.target), plugin)] += 1
            if declined:
                self.declined.setdefault((op_name(node.target), plugin), set()).update(p for p, _ in declined)
            bound = self._bind_outputs(node, result, new_nodes, fn, plugin)
            for value in _flatten(bound):
                if isinstance(value, ir.Value) and value.producer() in new_nodes:
                    self.torch_typed[value] = fx_name
            return bound
        reasons = "; ".join(f"{plugin}: {reason}" for plugin, reason in declined)
        raise ConversionError(
            f"every converter of {op_name(node.target)} declined this node ({reasons})",
            location=location_of(node),
            hint="block the plugins that declined (-p no:NAME / disable=[NAME]) so that one converting this case "
            "wins, or register a converter that takes it",
        )

    def _call(self, op: Op, node: torch.fx.Node, fn: Callable[..., Any], plugin: str, args: Any, kwargs: Any) -> Any:
        """``fn(op, *args, **kwargs)``, its errors given the node's location and what to do next."""
        op._node = node
        self._enclosing.append(node)
        self._calling.append(plugin)
        try:
            return fn(op, *args, **kwargs)
        except ConverterDeclined:
            raise
        except UnsupportedArgumentError as e:
            raise UnsupportedArgumentError(
                e.argument,
                e.value,
                e.reason,
                hint=e.hint
                or f"change the model to avoid this argument, or override {op_name(node.target)} "
                "with your own converter plugin",
                since=e.since,
            ).at(location_of(node)) from e
        except Pt2OnnxError as e:
            if e.location is None:
                e.at(location_of(node))
            raise
        except Exception as e:
            if e.__traceback__ is not None:  # shown from the converter's frame on, not from this call
                e.__traceback__ = e.__traceback__.tb_next
            raise ConversionError(
                f"converter {function_id(fn)} from plugin {plugin!r} failed: {type(e).__name__}: {e}",
                location=location_of(node),
                hint=f"this is a bug in plugin {plugin!r}; report it there, or override "
                f"{op_name(node.target)} with your own converter plugin (docs/plugins.md)",
            ) from e
        finally:
            op._node = None
            self._enclosing.pop()
            self._calling.pop()

    def _props(self, node: torch.fx.Node) -> dict[str, str]:
        return metadata_props(node, [n for n in self._enclosing if n is not node])

    def _bind_outputs(
        self, node: torch.fx.Node, result: Any, new_nodes: set[ir.Node], fn: Callable[..., Any], plugin: str
    ) -> Any:
        meta = node.meta.get("val")
        if isinstance(meta, (tuple, list)):
            if not isinstance(result, (tuple, list)) or len(result) != len(meta):
                raise self._mismatch(node, fn, plugin, f"{len(meta)} outputs", repr(result))
            return tuple(
                self._bind_one(node, r, m, f"{node.name}_{i}", new_nodes, fn, plugin)
                for i, (r, m) in enumerate(zip(result, meta))
            )
        return self._bind_one(node, result, meta, node.name, new_nodes, fn, plugin)

    def _bind_one(
        self,
        node: torch.fx.Node,
        result: Any,
        meta: Any,
        name: str,
        new_nodes: set[ir.Node],
        fn: Callable[..., Any],
        plugin: str,
    ) -> Any:
        typed = ir_type_and_shape(meta, self.dims)
        if not isinstance(result, ir.Value):
            if typed is not None and isinstance(meta, torch.Tensor):
                raise self._mismatch(node, fn, plugin, "an onnx_ir.Value", repr(result))
            return result
        if typed is None:
            return result
        type_, shape = typed
        if result.type is not None and result.type != type_:
            raise self._mismatch(node, fn, plugin, f"dtype {type_.dtype.name}", f"dtype {result.type}")
        if result.shape is not None:
            if result.shape.rank() != len(shape):
                raise self._mismatch(node, fn, plugin, f"rank {len(shape)}", f"rank {result.shape.rank()}")
            shape = self._guarded_sizes(result.shape, shape, meta, name)
            if not _dims_agree(result.shape, shape, self._input_symbols):
                raise self._mismatch(node, fn, plugin, f"shape {_text(shape)}", f"shape {_text(result.shape)}")
        if result.producer() in new_nodes:
            result.name = f"{self._prefix}{name}"
        result.type = type_
        result.shape = shape
        return result

    def _guarded_sizes(self, got: ir.Shape, expected: ir.Shape, meta: Any, name: str) -> ir.Shape:
        """``expected`` with the converter's size wherever torch's guards fix torch's expression to it.

        torch keeps ``x_dim1*x_dim2`` for a dim a guard says is 16 (a 16-row position table
        added to H*W tokens): the converter's 16 holds in every run the program accepts, so
        it is no disagreement. Each such size is recorded for the report.
        """
        dims = list(expected)
        # torch's sizes lead: a complex tensor's ONNX form has one more dim (real, imaginary).
        sizes = meta.shape if isinstance(meta, torch.Tensor) else ()
        for axis, (g, e, size) in enumerate(zip(got, expected, sizes)):
            if not (isinstance(g, int) and isinstance(e, ir.SymbolicDim) and isinstance(size, torch.SymInt)):
                continue
            if statically_known_true(size == g) or _fixed_by_guards(size) == g:
                dims[axis] = g
                self._size_guards.setdefault(f"{e.value} == {g}", name)
        return ir.Shape(dims)

    def _mismatch(
        self, node: torch.fx.Node, fn: Callable[..., Any], plugin: str, expected: str, got: Any
    ) -> ConversionError:
        got_text = got if isinstance(got, str) else repr(got)
        return ConversionError(
            f"converter {function_id(fn)} from plugin {plugin!r} returned {got_text} where torch says {expected}",
            location=location_of(node),
            hint=f"this is a bug in plugin {plugin!r}: the exported model would be wrong, so export stops",
        )

    def _typed_value(self, val: Any, name: str) -> ir.Value | None:
        typed = ir_type_and_shape(val, self.dims)
        if typed is None or isinstance(val, (int, float, bool)):
            return None
        return ir.Value(name=f"{self._prefix}{name}", type=typed[0], shape=typed[1])

    def _graph_outputs(self, op: Op, outputs: list[Any], graph: ir.Graph) -> list[ir.Value]:
        """Outputs a (sub)graph can declare: values produced inside it, each once."""
        result: list[ir.Value] = []
        seen: set[ir.Value] = set()
        for out in outputs:
            if not isinstance(out, ir.Value):
                if out is None:
                    raise ConversionError("a subgraph output is None", location=location_of(op.node))
                out = op.constant(out)
            producer = out.producer()
            if producer is None or producer.graph is not graph or out in seen:
                identity = op.Identity(out)
                assert isinstance(identity, ir.Value)
                identity.type, identity.shape = out.type, out.shape
                out = identity
            seen.add(out)
            result.append(out)
        return result


def check_shapes(model: ir.Model, translated: TranslatedGraph) -> None:
    """Check the translated model with ONNX's shape inference, strict and with data propagation.

    Each converter's outputs were checked against torch's dtype, rank and sizes where its
    own nodes' inference knew them, and then typed from torch. Inference over the whole
    model, from the graph inputs on, checks what that cannot: a shape a converter computes
    at run time (``Reshape`` to a ``Concat`` of ``Shape`` slices) against the sizes torch
    recorded (as :func:`_dims_agree` compares them), the nodes inside subgraphs and local
    functions, and the nodes no converter made. A disagreement or a node ONNX rejects stops
    the export with a :class:`ConversionError` naming the converter that emitted it, its
    plugin, the FX node and the user's line. The weights take no part (typed inputs stand in
    for them): a checkpoint is not read, and the check costs the same whatever their size.
    """
    proto = _for_inference(model)
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, check_type=True, strict_mode=True, data_prop=True)
    except onnx.shape_inference.InferenceError:
        # Data propagation also computes int tensors that are not shapes (position ids) and
        # some ops' propagation rejects them ("Invalid rank for Mul broadcasting" on a
        # broadcast that is right): a node counts as rejected only without it.
        try:
            inferred = onnx.shape_inference.infer_shapes(proto, check_type=True, strict_mode=True)
        except onnx.shape_inference.InferenceError as e:
            raise _rejected(model, translated, str(e)) from None
    found = {v.name: v.type for v in [*inferred.graph.value_info, *inferred.graph.output]}
    for value, fx_name in translated.torch_typed.items():
        producer = value.producer()
        if producer is None or producer.graph is not model.graph:
            continue  # names are unique within a graph only: the value_info found is the main graph's
        type_proto = found.get(value.name or "")
        if type_proto is None or not type_proto.HasField("tensor_type") or not isinstance(value.type, ir.TensorType):
            continue
        expected = f"dtype {value.dtype.name}" if value.dtype is not None else "?"
        got_dtype = type_proto.tensor_type.elem_type
        if value.dtype is not None and got_dtype and got_dtype != value.dtype.value:
            raise _disagreement(translated, fx_name, expected, f"dtype {ir.DataType(got_dtype).name}")
        if value.shape is None or not type_proto.tensor_type.HasField("shape"):
            continue
        got = ir.Shape([_dim(d) for d in type_proto.tensor_type.shape.dim])
        if got.rank() != value.shape.rank():
            raise _disagreement(translated, fx_name, f"rank {value.shape.rank()}", f"rank {got.rank()}")
        if not _dims_agree(got, value.shape, translated.input_symbols, expressions=False):
            raise _disagreement(translated, fx_name, f"shape {_text(value.shape)}", f"shape {_text(got)}")


def _dim(d: onnx.TensorShapeProto.Dimension) -> int | str | None:
    """An inferred dim: a size, a symbol, or None (unknown, which ONNX names ``unk__N``)."""
    if d.HasField("dim_value"):
        return d.dim_value
    return None if not d.dim_param or d.dim_param.startswith("unk__") else d.dim_param


def _for_inference(model: ir.Model) -> onnx.ModelProto:
    """``model`` as a proto for inference from its inputs on: the weights typed graph inputs
    holding no values, and no shape declared for the main graph's values and outputs."""
    graph = model.graph
    weights = list(graph.initializers.values())
    graph.initializers.clear()
    try:
        proto = ir.serde.serialize_model(model)
    finally:
        for value in weights:
            graph.register_initializer(value)
    inputs = set(graph.inputs)
    proto.graph.input.extend(ir.serde.serialize_value(v) for v in weights if v not in inputs)
    del proto.graph.value_info[:]
    for output in proto.graph.output:
        if output.type.HasField("tensor_type"):
            output.type.tensor_type.ClearField("shape")
    return proto


def _disagreement(translated: TranslatedGraph, fx_name: str, expected: str, got: str) -> ConversionError:
    fx_node, fn, plugin = translated.converted[fx_name]
    return ConversionError(
        f"converter {function_id(fn)} from plugin {plugin!r} returned {got} where torch says {expected} "
        "(found by ONNX shape inference over the whole model)",
        location=location_of(fx_node),
        hint=f"this is a bug in plugin {plugin!r}: the exported model would be wrong, so export stops",
    )


# One node's error in the message of onnx's InferenceError.
_NODE_ERROR = re.compile(r"\(op_type:(?P<op_type>[^,]*), node name: (?P<name>[^)]*)\): (?P<error>[^\n]*)")


def _rejected(model: ir.Model, translated: TranslatedGraph, message: str) -> ConversionError:
    """The error for ONNX's inference rejecting the model: the first node it names, and who emitted it."""
    match = _NODE_ERROR.search(message)
    if match is None:
        return ConversionError(
            f"ONNX shape inference rejects the translated model: {message.strip()}",
            hint="this is a bug in pt2onnx or a plugin: please report it with the model",
        )
    name = match["name"]
    node = next((n for n in all_nodes(model) if name and n.name == name), None)
    fx_name = node.metadata_props.get(METADATA_KEYS["node"]) if node is not None else None
    converted = translated.converted.get(fx_name) if fx_name is not None else None
    what = f"a {match['op_type']} node" + (f" (inputs {_inputs_text(node)})" if node is not None else f" {name!r}")
    if converted is None:
        return ConversionError(
            f"ONNX shape inference rejects {what} of the translated model: {match['error'].strip()}",
            hint="this is a bug in pt2onnx or a plugin: please report it with the model",
        )
    fx_node, fn, plugin = converted
    return ConversionError(
        f"converter {function_id(fn)} from plugin {plugin!r} emitted {what} that ONNX shape inference rejects: "
        f"{match['error'].strip()}",
        location=location_of(fx_node),
        hint=f"this is a bug in plugin {plugin!r}: the exported model would not load or would disagree with torch "
        "on shapes, so export stops",
    )


def _is_complex(value: Any) -> bool:
    meta = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
    if isinstance(meta, (tuple, list)):
        return any(isinstance(m, torch.Tensor) and m.is_complex() for m in meta)
    return isinstance(meta, torch.Tensor) and meta.is_complex()


def _drop_emitted(graph: ir.Graph, nodes_before: int, initializers_before: int) -> None:
    """Remove what a converter that declined added to ``graph``: its nodes and initializers."""
    emitted = [graph[i] for i in range(nodes_before, len(graph))]
    graph.remove(emitted, safe=False)
    for name in list(graph.initializers)[initializers_before:]:
        del graph.initializers[name]


def _check_complex(node: torch.fx.Node, registration: Registration) -> None:
    """Refuse complex values for a converter that does not say it handles them.

    They reach converters as real tensors with a trailing dim of 2: a converter written for
    real tensors would compute on them as on real numbers (a complex product as two real
    ones) and emit a wrong model. Lowerings and ``getitem`` only route values, and an op
    without output (an assertion) computes none.
    """
    if registration.complex_values or registration.kind == "lowering" or node.target is operator.getitem:
        return
    if node.meta.get("val") is None:
        return
    if _is_complex(node) or any(_is_complex(a) for a in _flatten([node.args, list(node.kwargs.values())])):
        raise UnsupportedArgumentError(
            "self",
            "a complex tensor",
            f"the converter of {op_name(node.target)} from plugin {registration.plugin!r} does not handle complex values",
            hint="keep complex arithmetic out of the exported model (torch.view_as_real it right after the FFT), "
            "or convert the op with a plugin whose converter says complex_values=True",
        ).at(location_of(node))


#: ONNX's float8 types appeared in opset 19: below it no Cast or Constant may hold them.
_FLOAT8_SINCE = 19
_FLOAT8 = {torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2, torch.float8_e5m2fnuz}


def _check_float8(node: torch.fx.Node, opset: int) -> None:
    """Refuse a float8 value below opset 19, naming the opset that has them."""
    if opset >= _FLOAT8_SINCE:
        return
    metas = [node.meta.get("val")] + [a.meta.get("val") for a in node.all_input_nodes]
    for meta in _flatten(metas):
        if isinstance(meta, torch.Tensor) and meta.dtype in _FLOAT8:
            raise UnsupportedArgumentError(
                "dtype", meta.dtype, f"ONNX has float8 types from opset {_FLOAT8_SINCE} on", since=_FLOAT8_SINCE
            ).at(location_of(node))


def _stamp(graph: ir.Graph, count: int, props: dict[str, str]) -> set[ir.Node]:
    """Put provenance on the last ``count`` nodes of ``graph`` that have none yet."""
    nodes = set(itertools.islice(reversed(graph), count))
    key = METADATA_KEYS["node"]
    for n in nodes:
        if key not in n.metadata_props:
            for k in ("namespace", "pkg.onnxscript.class_hierarchy", "pkg.onnxscript.name_scopes"):
                n.metadata_props.pop(k, None)
            n.metadata_props.update(props)
    return nodes


def _fixed_by_guards(size: torch.SymInt) -> int | None:
    """The value torch's guards fix ``size`` to through a part of its expression, or None.

    torch proves ``x_dim2 // 16 == 64`` (a 64x64 position table added to the patch grid)
    but not ``((x_dim2 // 16 - 1) // 2) + 1 == 32`` (a stride-2 conv after it): each
    sub-expression it proves equal to its value at the example is that value, and the rest
    is computed from them.
    """
    env = size.node.shape_env
    if env is None:
        return None
    # The example's sizes: torch 2.13 renamed var_to_val.
    hints = env.backed_var_to_val if hasattr(env, "backed_var_to_val") else env.var_to_val

    def fold(expr: Any) -> Any:
        if not expr.free_symbols:
            return expr
        value = expr.xreplace(hints)
        if value.is_number and env._maybe_evaluate_static(sympy.Eq(expr, value)) == sympy.true:
            return value
        return expr.func(*(fold(arg) for arg in expr.args)) if expr.args else expr

    folded = fold(size.node.expr)
    return int(folded) if folded.is_number else None


def _dims_agree(got: ir.Shape, expected: ir.Shape, input_symbols: frozenset[str], *, expressions: bool = True) -> bool:
    """Whether every dim the converter's output declares is the one torch recorded.

    A static size where torch has a symbolic one is a disagreement too: the model would
    be right only for the example's sizes (with ``expressions=False``, only where torch
    has an input's own symbol: an expression such as ``(x_dim0*x_dim1)//2`` may be one
    size under torch's guards). So is an input's own symbolic dim (``batch``, from
    ``input_symbols``) where torch has a static size. An input's symbol where torch has
    another input's symbol is no claim: torch keeps two symbols for dims its kernels
    require equal without a guard (``adaptive_avg_pool2d_backward``'s ``grad_output`` and
    ``self``), so they may be one size in every run torch accepts. An expression
    (``2*seq``), a name the converter made up, or an unknown dim is no claim either.
    """
    for g, e in zip(got, expected):
        if isinstance(g, int):
            if g != e and (expressions or isinstance(e, int) or e.value in input_symbols):
                return False
        elif g.value in input_symbols and isinstance(e, int):
            return False
    return True


#: The metadata onnxscript's builder puts on a node whose ONNX shape inference failed as it was added.
_INFERENCE_ERROR = "pkg.onnxscript.shape_inference_error"
#: How ONNX's inference reports a node it rejects (other failures: no schema, a custom domain, ...).
_REJECTED = re.compile(r"^\[(Shape|Type)InferenceError\]")


def _check_emitted(graph: ir.Graph, count: int, fn: Callable[..., Any], plugin: str, fx_node: torch.fx.Node) -> None:
    """Stop on a node of the last ``count`` of ``graph`` that ONNX's shape inference rejected.

    onnxscript's builder infers each node's outputs as the converter adds it and, where ONNX
    rejects the node (``Concat`` of 0-d tensors: "axis must be in [-rank, rank-1]"), only
    notes it on the node and leaves its outputs' shapes unknown, so the rank check after
    the converter cannot see it: the model would fail to load in onnxruntime, naming a
    node instead of the converter. Nodes of standard ONNX domains only (other domains have
    no schema ONNX knows), and none holding a subgraph (checked with the whole model).
    """
    for n in itertools.islice(reversed(graph), count):
        error = n.metadata_props.pop(_INFERENCE_ERROR, None)
        if error is None or n.domain not in ("", "ai.onnx") or not _REJECTED.match(error):
            continue
        if any(a.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS) for a in n.attributes.values()):
            continue
        raise ConversionError(
            f"converter {function_id(fn)} from plugin {plugin!r} emitted a {n.op_type} node that ONNX rejects "
            f"(inputs {_inputs_text(n)}): {error.strip()}",
            location=location_of(fx_node),
            hint=f"this is a bug in plugin {plugin!r}: the exported model would not load, so export stops",
        )


def _inputs_text(node: ir.Node) -> str:
    """``FLOAT[], INT64[2]``: the dtype and shape of each input of ``node``."""
    parts = []
    for v in node.inputs:
        if v is None:
            parts.append("None")
            continue
        dtype = v.dtype.name if v.dtype is not None else "?"
        parts.append(dtype + (_text(v.shape) if v.shape is not None else "[?]"))
    return ", ".join(parts)


def _text(shape: ir.Shape) -> str:
    return (
        "[" + ", ".join(str(d) if isinstance(d, int) else "?" if d.value is None else str(d.value) for d in shape) + "]"
    )


def _resolve(arg: Any, env: dict[torch.fx.Node, Any]) -> Any:
    if isinstance(arg, torch.fx.Node):
        return env[arg]
    if isinstance(arg, (list, tuple)):
        return [_resolve(a, env) for a in arg]
    if isinstance(arg, dict):
        return {k: _resolve(v, env) for k, v in arg.items()}
    return arg


def _flatten(values: Any) -> Any:
    if isinstance(values, (list, tuple)):
        for v in values:
            yield from _flatten(v)
    else:
        yield values


def _fetch_attr(module: torch.nn.Module | None, target: str) -> Any:
    obj: Any = module
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _all_call_nodes(gm: torch.fx.GraphModule) -> Any:
    for node in gm.graph.nodes:
        if node.op == "call_function":
            yield node
        elif node.op == "get_attr":
            sub = _fetch_attr(gm, node.target)
            if isinstance(sub, torch.fx.GraphModule):
                yield from _all_call_nodes(sub)


def _is_random(node: torch.fx.Node) -> bool:
    target = node.target
    return isinstance(target, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in target.tags


def _opaque_custom_op(node: torch.fx.Node) -> Callable[..., Any]:
    name = op_name(node.target)
    domain, op_type = name.split("::", 1)
    op_type = op_type.split(".", 1)[0]

    def emit(op: Op, *args: Any, **kwargs: Any) -> Any:
        warnings.warn(
            f"custom op {name} has no handler; emitted as one opaque node {domain}::{op_type} "
            "(unknown_custom_ops='emit'). The model runs only where that op is implemented.",
            UnknownCustomOpWarning,
            stacklevel=2,
        )
        inputs = [a for a in _flatten(args) if isinstance(a, ir.Value)]
        # Non-tensor arguments, positional ones too, become attributes named as in the schema.
        named = {**dict(zip(arg_names, args)), **kwargs}
        attrs = {k: v for k, v in named.items() if _is_attribute(v)}
        return op.custom_node(domain, op_type, inputs, attrs)

    schema = getattr(node.target, "_schema", None)
    arg_names = [a.name for a in schema.arguments] if schema is not None else []
    return emit


def _is_attribute(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return bool(value) and all(isinstance(v, (int, float)) for v in value)
    return isinstance(value, (int, float, str))
