"""Normalizations: batch (inference and training statistics), layer, group, instance, RMS.

Training-mode batch norm: ``_native_batch_norm_legit.no_stats`` and
``_native_batch_norm_legit_functional`` normalize with the batch's own statistics (biased
variance), and the functional form also returns the updated running statistics
(``(1 - momentum) * running + momentum * batch``, unbiased variance), which pt2onnx's
assembly turns into buffer-update outputs. ``_native_batch_norm_legit.default`` has no
converter: its schema mutates the running statistics, so pt2onnx functionalizes every
graph holding it into ``_native_batch_norm_legit_functional`` before translation.

Statistics of float16/bfloat16 inputs are computed in float32, as torch does on CPU.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import torch

from pt2onnx.plugin import converter

from ._common import FLOATS, as_dtype, compute

_HALF = (ir.DataType.FLOAT16, ir.DataType.BFLOAT16)


def _stat_dtype(dtype):
    return ir.DataType.FLOAT if dtype in _HALF else dtype


def _filled(op, x, value, dtype, start, end=None):
    """``value`` shaped like dims [start:end] of ``x`` (an affine parameter torch left out)."""
    return op.Expand(op.constant(value, dtype), op.Shape(x, start=start, end=end))


def _per_channel(op, value, rank):
    """A (C,) tensor shaped to broadcast over (N, C, *spatial)."""
    return op.Reshape(value, op.constant([-1] + [1] * (rank - 2)))


def _normalize(op, x, axes, eps):
    """(x - mean) * rstd over ``axes``; returns y, mean, rstd and the biased variance (dims kept)."""
    axes_ = op.constant(axes)
    mean = op.ReduceMean(x, axes_, keepdims=1)
    centered = op.Sub(x, mean)
    var = op.ReduceMean(op.Mul(centered, centered), axes_, keepdims=1)
    rstd = op.Reciprocal(op.Sqrt(op.Add(var, op.constant(eps, x.dtype))))
    return op.Mul(centered, rstd), mean, rstd, var


def _affine(op, y, weight, bias, dtype, rank):
    """``y * weight + bias`` per channel, in ``y``'s (statistics) dtype, then cast to ``dtype``."""
    if weight is not None:
        y = op.Mul(y, _per_channel(op, as_dtype(op, weight, y.dtype), rank))
    if bias is not None:
        y = op.Add(y, _per_channel(op, as_dtype(op, bias, y.dtype), rank))
    return as_dtype(op, y, dtype)


# -- batch norm ------------------------------------------------------------------------


def _channels_param(op, value, input, fill):
    if value is not None:
        return value
    channels = op.node.args[0].meta["val"].shape[1]
    if not isinstance(channels, int):
        return _filled(op, input, fill, op.output_dtype, 1, 2)
    return op.constant(np.full((channels,), fill, dtype=op.output_dtype.numpy()))


def _batch_norm(op, input, weight, bias, running_mean, running_var, eps):
    weight = _channels_param(op, weight, input, 1.0)
    bias = _channels_param(op, bias, input, 0.0)
    return op.BatchNormalization(input, weight, bias, running_mean, running_var, epsilon=float(eps))


def _empty(op):
    # torch returns empty saved mean/invstd in inference; nothing reads them.
    return op.constant(np.zeros((0,), dtype=op.output_dtype.numpy()))


def _batch_statistics(op, input, weight, bias, eps):
    """Training-mode batch norm: out, and per channel the mean, rstd and unbiased variance
    (in the statistics dtype)."""
    dtype, rank = op.output_dtype, op.rank_of(input)
    x = as_dtype(op, input, _stat_dtype(dtype))
    axes = [0, *range(2, rank)]
    y, mean, rstd, var = _normalize(op, x, axes, float(eps))
    if dtype in _HALF:
        # torch's CPU kernel rounds the batch mean and rstd to the input's dtype before applying them.
        mean, rstd = (as_dtype(op, as_dtype(op, v, dtype), x.dtype) for v in (mean, rstd))
        y = op.Mul(op.Sub(x, mean), rstd)
    squeeze = op.constant(axes)
    mean, rstd, var = (op.Squeeze(v, squeeze) for v in (mean, rstd, var))
    count = op.Cast(op.Div(op.Size(input), op.Shape(input, start=1, end=2)), to=x.dtype)
    unbiased = op.Mul(var, op.Div(count, op.Sub(count, op.constant(1.0, x.dtype))))
    return _affine(op, y, weight, bias, dtype, rank), mean, rstd, unbiased


@converter("aten::batch_norm.default")
def batch_norm(op, input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled):
    if training or running_mean is None:
        raise op.unsupported(
            "training",
            training,
            "batch norm with batch statistics is training behaviour",
            hint="call model.eval() before exporting",
        )
    return _batch_norm(op, input, weight, bias, running_mean, running_var, eps)


@converter("aten::_native_batch_norm_legit_no_training.default")
def native_batch_norm_no_training(op, input, weight, bias, running_mean, running_var, momentum, eps):
    out = _batch_norm(op, input, weight, bias, running_mean, running_var, eps)
    empty = _empty(op)
    return out, empty, op.Identity(empty)


@converter("aten::_native_batch_norm_legit.no_stats")
def native_batch_norm_no_stats(op, input, weight, bias, training, momentum, eps):
    # Without running statistics there is nothing but the batch to normalize with.
    out, mean, rstd, _ = _batch_statistics(op, input, weight, bias, eps)
    return out, as_dtype(op, mean, op.output_dtype), as_dtype(op, rstd, op.output_dtype)


@converter("aten::_native_batch_norm_legit_functional.default")
def native_batch_norm_functional(op, input, weight, bias, running_mean, running_var, training, momentum, eps):
    if not training:
        out, mean, rstd = native_batch_norm_no_training(
            op, input, weight, bias, running_mean, running_var, momentum, eps
        )
        return out, mean, rstd, op.Identity(running_mean), op.Identity(running_var)
    out, mean, rstd, unbiased = _batch_statistics(op, input, weight, bias, eps)

    def update(running, batch):
        stat = running.dtype
        keep, take = op.constant(1.0 - momentum, stat), op.constant(float(momentum), stat)
        return op.Add(op.Mul(running, keep), op.Mul(as_dtype(op, batch, stat), take))

    dtype = op.output_dtype
    new_mean, new_var = update(running_mean, mean), update(running_var, unbiased)
    return out, as_dtype(op, mean, dtype), as_dtype(op, rstd, dtype), new_mean, new_var


# -- layer norm ------------------------------------------------------------------------


def _layer_norm(op, input, normalized_shape, weight, bias, eps, outputs):
    dtype = op.output_dtype
    axis = -len(normalized_shape)
    if dtype == ir.DataType.DOUBLE:
        # LayerNormalization's statistics are float32 at most: float64 takes the explicit form.
        y, mean, rstd, _ = _normalize(op, input, list(range(axis, 0)), float(eps))
        if weight is not None:
            y = op.Mul(y, weight)
        if bias is not None:
            y = op.Add(y, bias)
        return (y, mean, rstd) if outputs == 3 else y
    scale = weight if weight is not None else _filled(op, input, 1.0, dtype, axis)
    inputs = [input, scale] if bias is None else [input, scale, bias]
    # Statistics in float32 (for float16/bfloat16 too, as torch computes them).
    return op.LayerNormalization(*inputs, axis=axis, epsilon=float(eps), stash_type=1, _outputs=outputs)


@converter("aten::layer_norm.default")
def layer_norm(op, input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    return _layer_norm(op, input, normalized_shape, weight, bias, eps, 1)


@converter("aten::native_layer_norm.default")
def native_layer_norm(op, input, normalized_shape, weight, bias, eps):
    out, mean, rstd = _layer_norm(op, input, normalized_shape, weight, bias, eps, 3)
    dtype = op.output_dtype
    return out, as_dtype(op, mean, dtype), as_dtype(op, rstd, dtype)


# -- group and instance norm -------------------------------------------------------------


def _group_norm(op, input, weight, bias, group, eps):
    dtype, rank = op.output_dtype, op.rank_of(input)
    x = as_dtype(op, input, _stat_dtype(dtype))
    grouped = op.Reshape(x, op.constant([0, int(group), -1]))
    y, mean, rstd, _ = _normalize(op, grouped, [2], float(eps))
    y = op.Reshape(y, op.Shape(input))
    squeeze = op.constant([2])
    return _affine(op, y, weight, bias, dtype, rank), op.Squeeze(mean, squeeze), op.Squeeze(rstd, squeeze)


@converter("aten::group_norm.default")
def group_norm(op, input, num_groups, weight=None, bias=None, eps=1e-05, cudnn_enabled=True):
    return _group_norm(op, input, weight, bias, num_groups, eps)[0]


@converter("aten::native_group_norm.default")
def native_group_norm(op, input, weight, bias, N, C, HxW, group, eps):
    out, mean, rstd = _group_norm(op, input, weight, bias, group, eps)
    dtype = op.output_dtype
    return out, as_dtype(op, mean, dtype), as_dtype(op, rstd, dtype)


@converter("aten::instance_norm.default")
def instance_norm(op, input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn_enabled):
    if not use_input_stats:
        return _batch_norm(op, input, weight, bias, running_mean, running_var, eps)
    dtype, rank = op.output_dtype, op.rank_of(input)
    x = as_dtype(op, input, _stat_dtype(dtype))
    y, _, _, _ = _normalize(op, x, list(range(2, rank)), float(eps))
    return _affine(op, y, weight, bias, dtype, rank)


# -- RMS norm ----------------------------------------------------------------------------


@converter("aten::rms_norm.default")
def rms_norm(op, input, normalized_shape, weight=None, eps=None):
    dtype = op.output_dtype
    stat = _stat_dtype(dtype)
    if eps is None:
        # torch's default is the epsilon of the dtype it computes in (float32 for halves).
        eps = torch.finfo(torch.float64 if stat == ir.DataType.DOUBLE else torch.float32).eps
    axis = -len(normalized_shape)
    if op.opset >= 23 and weight is not None:
        return op.RMSNormalization(input, weight, axis=axis, epsilon=float(eps), stash_type=int(stat))
    x = as_dtype(op, input, stat)
    mean_square = op.ReduceMean(op.Mul(x, x), op.constant(list(range(axis, 0))), keepdims=1)
    y = as_dtype(op, op.Mul(x, op.Reciprocal(op.Sqrt(op.Add(mean_square, op.constant(float(eps), stat))))), dtype)
    # torch multiplies by the weight in the input dtype (bfloat16 in float32 for onnxruntime).
    return y if weight is None else compute(op, op.Mul, [y, weight], dtype, FLOATS)
