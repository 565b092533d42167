"""The model's weights and dtype: where their values come from, and in which dtype they are exported.

One wing for ``weights=`` and ``dtype=`` of :func:`pt2onnx.export`:

* :mod:`~pt2onnx.weights.checkpoint`: a checkpoint apart from the model (safetensors file,
  folder of shards, mapping), matched to the model by name and read only as the model is
  written (:class:`~pt2onnx.weights.checkpoint.CheckpointTensor`);
* :mod:`~pt2onnx.weights.dtype`: capture in another floating dtype (a meta-device copy
  converted with ``.to(dtype)``), the graph's inputs and outputs kept in theirs, and the
  eager side of ``verify`` in the same dtype.

:class:`WeightPlan` is what the export asks: decided before capture (the module to
capture and its example inputs), finished while assembling (the initializers get their
values' source, the graph's edges their dtypes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import onnx_ir as ir
import torch
from torch.export import ExportedProgram

from ..errors import OptionError
from .checkpoint import (
    CheckpointTensor,
    Weights,
    WeightSource,
    attach_weights,
    checkpoint_values_hidden,
    holds_meta_tensors,
    inputs_on_meta,
    mapping_source,
    open_weights,
    reads_checkpoint,
    transposed,
    unreadable_weights,
)
from .dtype import cast_inputs, check_dtype, converted_model, keep_io_dtypes, weights_dtype

__all__ = [
    "CheckpointTensor",
    "WeightPlan",
    "Weights",
    "checkpoint_values_hidden",
    "reads_checkpoint",
    "transposed",
    "unreadable_weights",
]

Inputs = tuple[tuple[Any, ...], dict[str, Any]]


@dataclass
class WeightPlan:
    """What an export does with the model's weights and dtype.

    Attributes:
        model: the module to capture: the user's, or its meta-device copy in ``dtype``;
            None for an ``ExportedProgram``.
        dtype: the floating dtype the export converts to, or None.
        source: where the weights' values are read from when the model is written: the
            checkpoint given, the model's own values for ``dtype=``, or None (they stay the
            captured tensors).
        original_dtypes: each parameter's and buffer's dtype before the conversion.
        own_values: the model's own values, for what a checkpoint never holds.
    """

    model: torch.nn.Module | None
    dtype: torch.dtype | None = None
    source: WeightSource | None = None
    original_dtypes: dict[str, torch.dtype] | None = None
    own_values: WeightSource | None = None

    @classmethod
    def make(cls, eager: torch.nn.Module | None, weights: Weights | None, dtype: torch.dtype | None) -> WeightPlan:
        """The plan for exporting ``eager`` (None: an ``ExportedProgram``) with ``weights=`` and ``dtype=``.

        Opens the checkpoint (its headers only), so a wrong path fails before capture.
        """
        source = open_weights(weights) if weights is not None else None
        if dtype is None:
            return cls(eager, source=source)
        if eager is None:
            raise OptionError(
                "dtype= converts an nn.Module; an ExportedProgram is exported in the dtypes it was captured in",
                hint="pass the module itself, or capture it converted (model.to(dtype)) and drop dtype=",
            )
        twin, original_dtypes, own = converted_model(eager, check_dtype(dtype))
        own_values = mapping_source(own, "the model's own weights") if own else None
        return cls(twin, dtype, source or own_values, original_dtypes, own_values)

    def inputs(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Inputs:
        """The example inputs as the module to capture takes them: floating ones in ``dtype``,
        all on the meta device when its weights are there (torch refuses to mix devices)."""
        if self.dtype is not None:
            args, kwargs = cast_inputs(args, kwargs, self.dtype)
        if self.model is not None and holds_meta_tensors(self.model):
            args, kwargs = inputs_on_meta(args, kwargs)
        return args, kwargs

    def finish(
        self,
        model: ir.Model,
        program: ExportedProgram,
        example: Inputs,
        *,
        keep_io_dtype: bool,
    ) -> None:
        """Give the assembled ``model``'s initializers their values' source and, with ``dtype``
        and ``keep_io_dtype``, keep its inputs in ``example``'s dtypes and its outputs in the weights'."""
        if self.dtype is not None and keep_io_dtype:
            outputs = weights_dtype(self.original_dtypes or {})
            keep_io_dtypes(model, program, example[0], example[1], self.dtype, outputs)
        attach_weights(model, program, self.source, original_dtypes=self.original_dtypes, model_values=self.own_values)
