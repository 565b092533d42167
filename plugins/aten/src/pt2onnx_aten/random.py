"""Random ops: rand, randn, randperm.

ONNX's ``RandomUniformLike``/``RandomNormalLike`` draw from the same distributions as
torch's ``rand``/``randn`` but from a different generator, so the exported model
reproduces torch's contract (shape, dtype, distribution), never its values. That is
what a model sampling at inference needs, so these are converted rather than refused;
tests check shape, dtype and statistics. ``randperm`` is the argsort of uniform keys,
a uniformly random permutation as torch's is. The samples are taken in float32 (double
for a double output) and cast, since onnxruntime samples no other type.

onnxruntime (1.31) implements ONNX's random ops only up to their opset-21 versions
(opset 22 re-versioned them), so at a target opset of 22 or more these converters raise
a clear error naming opset 21 as the way out, rather than emit a model it cannot run.
"""

from __future__ import annotations

import onnx_ir as ir

from pt2onnx.plugin import converter

from ._dims import one_d, to_dtype

_LAST_RUNNABLE_OPSET = 21


def _check_opset(op):
    if op.opset > _LAST_RUNNABLE_OPSET:
        raise op.unsupported(
            "opset",
            op.opset,
            "onnxruntime implements ONNX's random ops only up to opset 21",
            hint="export with opset=21 to sample in the model, or draw the random tensor outside it and pass it in",
        )


def _sample_type(op):
    return ir.DataType.DOUBLE if op.output_dtype == ir.DataType.DOUBLE else ir.DataType.FLOAT


def _zeros(op, shape, dtype):
    return op.Expand(op.constant(0, dtype), shape)


@converter("aten::rand.default")
def rand(op, size, **kwargs):
    _check_opset(op)
    dtype = _sample_type(op)
    sample = op.RandomUniformLike(_zeros(op, op.shape_tensor(list(size)), dtype), low=0.0, high=1.0, dtype=dtype)
    return to_dtype(op, sample, op.output_dtype)


@converter("aten::randn.default")
def randn(op, size, **kwargs):
    _check_opset(op)
    dtype = _sample_type(op)
    sample = op.RandomNormalLike(_zeros(op, op.shape_tensor(list(size)), dtype), mean=0.0, scale=1.0, dtype=dtype)
    return to_dtype(op, sample, op.output_dtype)


@converter("aten::randperm.default")
def randperm(op, n, **kwargs):
    _check_opset(op)
    count = one_d(op, n)
    keys = op.RandomUniformLike(_zeros(op, count, ir.DataType.FLOAT), dtype=ir.DataType.FLOAT)
    _, order = op.TopK(keys, count, axis=0, largest=0, sorted=1, _outputs=2)
    return to_dtype(op, order, op.output_dtype)
