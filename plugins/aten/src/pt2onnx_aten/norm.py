"""Normalizations: batch (inference and training statistics), layer, group, instance, RMS.

Training-mode batch norm: ``_native_batch_norm_legit.no_stats`` and
``_native_batch_norm_legit_functional`` normalize with the batch's own statistics (biased
variance), and the functional form also returns the updated running statistics
(``(1 - momentum) * running + momentum * batch``, unbiased variance), which pt2onnx's
assembly turns into buffer-update outputs. ``_native_batch_norm_legit.default`` has no
converter: its schema mutates the running statistics, so pt2onnx functionalizes every
graph holding it into ``_native_batch_norm_legit_functional`` before translation.

Statistics of float16/bfloat16 inputs are computed in float32, as torch does on CPU.

The explicit forms apply the statistics as torch's CPU kernels do, folded into one scale
and shift per channel: ``x * (rstd * w) + (b - mean * rstd * w)`` (batch, instance and
group norm; onnxruntime's BatchNormalization folds them the same way) and
``(x * rstd - rstd * mean) * w + b`` (layer norm), so NaN and inf in the input or the
affine parameters come out where torch puts them. Layer norm is ``LayerNormalization``
from opset 17 and the explicit form before it.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import torch

from pt2onnx.plugin import converter

from ._common import FLOATS, HALVES, as_dtype, compute
from ._dims import ints, reduce_over, shape_of, static_dims


def _stat_dtype(dtype):
    return ir.DataType.FLOAT if dtype in HALVES else dtype


def _filled(op, x, value, dtype, start, end=None):
    """``value`` shaped like dims [start:end] of ``x`` (an affine parameter torch left out)."""
    return op.Expand(op.constant(value, dtype), shape_of(op, x, start=start, end=end))


def _per_channel(op, value, rank):
    """A (C,) tensor shaped to broadcast over (N, C, *spatial)."""
    return op.Reshape(value, op.constant([-1] + [1] * (rank - 2)))


def _moments(op, x, axes, eps):
    """Mean, rstd and the biased variance of ``x`` over ``axes`` (dims kept)."""
    mean = reduce_over(op, "ReduceMean", x, axes, keepdims=1)
    centered = op.Sub(x, mean)
    var = reduce_over(op, "ReduceMean", op.Mul(centered, centered), axes, keepdims=1)
    rstd = op.Reciprocal(op.Sqrt(op.Add(var, op.constant(eps, x.dtype))))
    return mean, rstd, var


def _scale_shift(op, x, mean, rstd, weight, bias):
    """torch's ``x * alpha + beta`` with ``alpha = rstd * weight``, ``beta = bias - mean * alpha``
    (``weight`` and ``bias`` already shaped to broadcast, or None)."""
    alpha = rstd if weight is None else op.Mul(rstd, weight)
    shift = op.Mul(mean, alpha)
    beta = op.Neg(shift) if bias is None else op.Sub(bias, shift)
    return op.Add(op.Mul(x, alpha), beta)


def _channel_params(op, weight, bias, dtype, rank):
    """The affine parameters (or None) in ``dtype``, shaped (C, 1, ...) for (N, C, *spatial)."""
    return [None if v is None else _per_channel(op, as_dtype(op, v, dtype), rank) for v in (weight, bias)]


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
    # onnxruntime has no bfloat16 BatchNormalization: it runs in float32 (torch's opmath too).
    return compute(
        op,
        lambda *vs: op.BatchNormalization(*vs, epsilon=float(eps)),
        [input, weight, bias, running_mean, running_var],
        op.output_dtype,
        FLOATS,
    )


def _empty(op):
    # torch returns empty saved mean/invstd in inference; nothing reads them.
    return op.constant(np.zeros((0,), dtype=op.output_dtype.numpy()))


def _rounded_batch_moments(op, x, mean, var, axes, eps, dtype):
    """The mean and rstd torch's CPU batch norm applies to float16/bfloat16 inputs: it keeps
    the mean and the sum of squared deviations in the input's dtype, and rounds the rstd
    computed from them to it too (the statistics themselves accumulate in float32)."""

    def rounded(v):
        return as_dtype(op, as_dtype(op, v, dtype), x.dtype)

    count = op.Cast(op.ReduceProd(op.Gather(op.Shape(x), op.constant(axes)), keepdims=0), to=x.dtype)
    var = op.Div(rounded(op.Mul(var, count)), count)
    rstd = op.Reciprocal(op.Sqrt(op.Add(var, op.constant(float(eps), x.dtype))))
    return rounded(mean), rounded(rstd)


def _batch_statistics(op, input, weight, bias, eps):
    """Training-mode batch norm: out, and per channel the mean, rstd and unbiased variance
    (in the statistics dtype)."""
    dtype, rank = op.output_dtype, op.rank_of(input)
    x = as_dtype(op, input, _stat_dtype(dtype))
    axes = [0, *range(2, rank)]
    mean, rstd, var = _moments(op, x, axes, float(eps))
    if dtype in HALVES:
        mean, rstd = _rounded_batch_moments(op, x, mean, var, axes, eps, dtype)
    y = as_dtype(op, _scale_shift(op, x, mean, rstd, *_channel_params(op, weight, bias, x.dtype, rank)), dtype)
    squeeze = op.constant(axes)
    mean, rstd, var = (op.Squeeze(v, squeeze) for v in (mean, rstd, var))
    count = op.Cast(op.Div(op.Size(input), shape_of(op, input, start=1, end=2)), to=x.dtype)
    unbiased = op.Mul(var, op.Div(count, op.Sub(count, op.constant(1.0, x.dtype))))
    return y, mean, rstd, unbiased


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
        return _layer_norm_explicit(op, input, normalized_shape, weight, bias, eps, outputs)
    scale = weight if weight is not None else _filled(op, input, 1.0, dtype, axis)
    inputs = [input, scale] if bias is None else [input, scale, bias]
    # Statistics in float32 (for float16/bfloat16 too, as torch computes them).
    return op.LayerNormalization(*inputs, axis=axis, epsilon=float(eps), stash_type=1, _outputs=outputs)


def _layer_norm_explicit(op, input, normalized_shape, weight, bias, eps, outputs):
    """torch's ``(x * rstd - rstd * mean) * w + b``, in float32 for half precision as torch computes it."""
    dtype = op.output_dtype
    stat = _stat_dtype(dtype)
    x = as_dtype(op, input, stat)
    mean, rstd, _ = _moments(op, x, list(range(-len(normalized_shape), 0)), float(eps))
    y = _scale_shift(op, x, mean, rstd, None, None)
    if weight is not None:
        y = op.Mul(y, as_dtype(op, weight, stat))
    if bias is not None:
        y = op.Add(y, as_dtype(op, bias, stat))
    y = as_dtype(op, y, dtype)
    return (y, mean, rstd) if outputs == 3 else y


@converter("aten::layer_norm.default", since=17)
def layer_norm(op, input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    return _layer_norm(op, input, normalized_shape, weight, bias, eps, 1)


@converter("aten::layer_norm.default", until=16)
def layer_norm_before_17(op, input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    """ONNX has ``LayerNormalization`` from opset 17: before, its reductions spelled out."""
    return _layer_norm_explicit(op, input, normalized_shape, weight, bias, eps, 1)


@converter("aten::native_layer_norm.default", since=17)
def native_layer_norm(op, input, normalized_shape, weight, bias, eps):
    out, mean, rstd = _layer_norm(op, input, normalized_shape, weight, bias, eps, 3)
    dtype = op.output_dtype
    return out, as_dtype(op, mean, dtype), as_dtype(op, rstd, dtype)


@converter("aten::native_layer_norm.default", until=16)
def native_layer_norm_before_17(op, input, normalized_shape, weight, bias, eps):
    """ONNX has ``LayerNormalization`` from opset 17: before, its reductions spelled out."""
    out, mean, rstd = _layer_norm_explicit(op, input, normalized_shape, weight, bias, eps, 3)
    dtype = op.output_dtype
    return out, as_dtype(op, mean, dtype), as_dtype(op, rstd, dtype)


# -- group and instance norm -------------------------------------------------------------


def _group_norm(op, input, weight, bias, group, eps):
    dtype = op.output_dtype
    x = as_dtype(op, input, _stat_dtype(dtype))
    group = int(group)
    if static_dims(x)[0] == 0:
        # An empty batch: nothing to normalize. onnxruntime's shape inference rejects the
        # reshapes below when a literal 0 batch meets a symbolic channel count.
        stats = op.Reshape(x, ints(op, [0, group]))
        return as_dtype(op, x, dtype), stats, stats
    # (N, G, C / G, spatial): statistics per group, affine parameters per channel. Every
    # size is spelled out: Reshape cannot infer a -1 beside an empty batch.
    batch, groups = shape_of(op, x, start=0, end=1), op.constant([group])
    per_group = op.Div(shape_of(op, x, start=1, end=2), groups)
    spatial = reduce_over(op, "ReduceProd", shape_of(op, x, start=2), None, keepdims=True)
    flat = op.Reshape(x, op.Concat(batch, groups, op.Mul(per_group, spatial), axis=0))
    mean, rstd, _ = _moments(op, flat, [2], float(eps))
    grouped = op.Reshape(x, op.Concat(batch, groups, per_group, spatial, axis=0))
    params = [
        None if v is None else op.Reshape(as_dtype(op, v, x.dtype), op.constant([group, -1, 1])) for v in (weight, bias)
    ]
    last = op.constant([-1])
    y = _scale_shift(op, grouped, op.Unsqueeze(mean, last), op.Unsqueeze(rstd, last), *params)
    squeeze = op.constant([2])
    return as_dtype(op, op.Reshape(y, op.Shape(input)), dtype), op.Squeeze(mean, squeeze), op.Squeeze(rstd, squeeze)


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
    # torch runs instance norm as training-mode batch norm over (1, N * C, *spatial).
    dtype, rank = op.output_dtype, op.rank_of(input)
    x = as_dtype(op, input, _stat_dtype(dtype))
    axes = list(range(2, rank))
    mean, rstd, var = _moments(op, x, axes, float(eps))
    if dtype in HALVES:
        mean, rstd = _rounded_batch_moments(op, x, mean, var, axes, eps, dtype)
    return as_dtype(op, _scale_shift(op, x, mean, rstd, *_channel_params(op, weight, bias, x.dtype, rank)), dtype)


# -- RMS norm ----------------------------------------------------------------------------


def _rms_eps(eps, stat):
    """``eps``, or torch's default: the epsilon of the dtype it computes in (float32 for halves)."""
    if eps is not None:
        return eps
    return torch.finfo(torch.float64 if stat == ir.DataType.DOUBLE else torch.float32).eps


@converter("aten::rms_norm.default", since=23)
def rms_norm(op, input, normalized_shape, weight=None, eps=None):
    """One ``RMSNormalization`` (opset 23), which needs a weight; without one, as before 23.
    bfloat16 too: onnxruntime has no bfloat16 RMSNormalization kernel, and the function it
    falls back on multiplies in bfloat16, which it has no kernel for either."""
    if weight is None or op.output_dtype == ir.DataType.BFLOAT16:
        return rms_norm_before_23(op, input, normalized_shape, weight, eps)
    stat = _stat_dtype(op.output_dtype)
    return op.RMSNormalization(
        input, weight, axis=-len(normalized_shape), epsilon=float(_rms_eps(eps, stat)), stash_type=int(stat)
    )


@converter("aten::rms_norm.default", until=22)
def rms_norm_before_23(op, input, normalized_shape, weight=None, eps=None):
    """The mean of squares, its reciprocal square root and the weight: ONNX has
    ``RMSNormalization`` from opset 23."""
    dtype = op.output_dtype
    stat = _stat_dtype(dtype)
    eps = _rms_eps(eps, stat)
    axis = -len(normalized_shape)
    x = as_dtype(op, input, stat)
    mean_square = reduce_over(op, "ReduceMean", op.Mul(x, x), list(range(axis, 0)), keepdims=1)
    y = as_dtype(op, op.Mul(x, op.Reciprocal(op.Sqrt(op.Add(mean_square, op.constant(float(eps), stat))))), dtype)
    # torch multiplies by the weight in the input dtype (bfloat16 in float32 for onnxruntime).
    return y if weight is None else compute(op, op.Mul, [y, weight], dtype, FLOATS)
