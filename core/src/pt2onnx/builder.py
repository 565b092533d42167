"""``Builder``: onnxscript's ``GraphBuilder`` with its per-node schema work cached.

For every node it emits, onnxscript's builder looks the ONNX schema up and converts it
into an ``OpSignature`` to tell inputs from attributes: about 1 ms a node, a third of
the translation time of a transformer. Both depend only on (domain, op type, version),
so they are computed once per process here.

It then runs ONNX shape inference on the node, which serializes the node and its input
types to protos: half of what was left of a transformer's translation. The inferred
output types depend only on the node's signature (op, attributes, input types and
shapes, small constant inputs), which repeats from layer to layer, so they are kept
per signature and inferred once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import onnx
import onnx_ir as ir
from onnxscript import GraphBuilder

# The builder's own partitioning helper and its per-node inference; onnxscript has no
# public entry point for either.
from onnxscript._internal import _inference, param_manipulation

__all__ = ["Builder"]

_SCHEMAS: dict[tuple[str, str, int | None], onnx.defs.OpSchema | None] = {}
_SIGNATURES: dict[tuple[str, str, int], ir.schemas.OpSignature] = {}
#: Inferred (dtype, shape) of each output, per node signature (see ``_signature``).
_INFERRED: dict[tuple[Any, ...], tuple[tuple[ir.DataType, ir.Shape | None] | None, ...]] = {}
#: Beyond this many signatures the cache starts over: a long-lived process exporting many
#: models should not grow without bound.
_MAX_INFERRED = 50_000


class Builder(GraphBuilder):
    """A ``GraphBuilder`` that caches schema look-ups, op signatures and inferred output types."""

    def _get_schema(self, op_type: str, domain: str, version: int | None) -> onnx.defs.OpSchema | None:
        key = (op_type, domain, version)
        if key not in _SCHEMAS:
            _SCHEMAS[key] = super()._get_schema(op_type, domain, version)
        return _SCHEMAS[key]

    def _partition_inputs_attributes(
        self, schema: onnx.defs.OpSchema | None, args: Sequence[Any], kwargs: dict[str, Any]
    ) -> tuple[Sequence[Any], dict[str, Any]]:
        if schema is None:
            return args, kwargs
        key = (schema.domain, schema.name, schema.since_version)
        signature = _SIGNATURES.get(key)
        if signature is None:
            signature = _SIGNATURES[key] = ir.schemas.OpSignature.from_op_schema(schema)
        return param_manipulation.separate_input_attributes_from_arguments(
            signature, list(args), kwargs, fill_defaults=False, allow_extra_args=False
        )

    def _infer_shapes(self, node: ir.Node) -> None:
        if all(_complete(output) for output in node.outputs):
            return
        key = _signature(node)
        if key is None:
            super()._infer_shapes(node)
            return
        inferred = _INFERRED.get(key)
        if inferred is None:
            super()._infer_shapes(node)
            if "pkg.onnxscript.shape_inference_error" not in node.metadata_props:
                _remember(key, node)
            return
        for output, found in zip(node.outputs, inferred, strict=True):
            if found is not None:
                output.type = ir.TensorType(found[0])
                output.merge_shapes(found[1])


def _complete(value: ir.Value) -> bool:
    return value.type is not None and value.shape is not None and value.shape.is_static()


def _dims(shape: ir.Shape | None) -> tuple[int | str | None, ...] | None:
    if shape is None:
        return None
    return tuple(dim if isinstance(dim, int) else dim.value for dim in shape)


def _signature(node: ir.Node) -> tuple[Any, ...] | None:
    """What ONNX inference reads of ``node``; ``None`` where that is not cheap to key on.

    Inference reads input types, shapes and constant inputs of at most 20 elements (see
    onnxscript's ``_inference``). Nodes with tensor or graph attributes, non-tensor
    inputs, or outputs already typed are left to inference itself.
    """
    if any(output.type is not None or output.shape is not None for output in node.outputs):
        return None
    inputs: list[Any] = []
    for value in node.inputs:
        if value is None:
            inputs.append(None)
            continue
        if not isinstance(value.type, ir.TensorType):
            return None
        constant = _inference._get_numpy_value(value, size_limit=20)
        data = None if constant is None else (constant.dtype.str, constant.shape, constant.tobytes())
        inputs.append((value.type.dtype, _dims(value.shape), data))
    attributes: list[Any] = []
    for name, attr in node.attributes.items():
        if attr.type in _UNKEYED_ATTRIBUTES:
            return None
        value = attr.value
        plain = tuple(value) if isinstance(value, Sequence) and not isinstance(value, str) else value
        attributes.append((name, attr.type, plain))
    return (node.domain, node.op_type, node.version, len(node.outputs), tuple(inputs), tuple(attributes))


def _remember(key: tuple[Any, ...], node: ir.Node) -> None:
    found: list[tuple[ir.DataType, ir.Shape | None] | None] = []
    for output in node.outputs:
        if output.type is None and output.shape is None:
            found.append(None)
        elif isinstance(output.type, ir.TensorType):
            found.append((output.type.dtype, None if output.shape is None else output.shape.copy()))
        else:
            return
    if len(_INFERRED) >= _MAX_INFERRED:
        _INFERRED.clear()
    _INFERRED[key] = tuple(found)


_UNKEYED_ATTRIBUTES = frozenset(
    {
        ir.AttributeType.TENSOR,
        ir.AttributeType.TENSORS,
        ir.AttributeType.GRAPH,
        ir.AttributeType.GRAPHS,
        ir.AttributeType.SPARSE_TENSOR,
        ir.AttributeType.SPARSE_TENSORS,
        ir.AttributeType.TYPE_PROTO,
        ir.AttributeType.TYPE_PROTOS,
    }
)
