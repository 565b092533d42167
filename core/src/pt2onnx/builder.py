"""``Builder``: onnxscript's ``GraphBuilder`` with its per-node schema work cached.

For every node it emits, onnxscript's builder looks the ONNX schema up and converts it
into an ``OpSignature`` to tell inputs from attributes: about 1 ms a node, a third of
the translation time of a transformer. Both depend only on (domain, op type, version),
so they are computed once per process here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import onnx
import onnx_ir as ir
from onnxscript import GraphBuilder

# The builder's own partitioning helper; onnxscript has no public entry point for it.
from onnxscript._internal import param_manipulation

__all__ = ["Builder"]

_SCHEMAS: dict[tuple[str, str, int | None], onnx.defs.OpSchema | None] = {}
_SIGNATURES: dict[tuple[str, str, int], ir.schemas.OpSignature] = {}


class Builder(GraphBuilder):
    """A ``GraphBuilder`` that caches schema look-ups and op signatures."""

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
