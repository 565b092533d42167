"""Normalizations in inference form."""

from __future__ import annotations

import numpy as np
from pt2onnx.plugin import converter


def _channels_param(op, value, input, fill):
    if value is not None:
        return value
    channels = op.node.args[0].meta["val"].shape[1]
    if not isinstance(channels, int):
        raise op.unsupported("weight", None, "batch norm without affine weights needs a static channel count")
    return op.constant(np.full((channels,), fill, dtype=np.float32), op.output_dtype)


def _batch_norm(op, input, weight, bias, running_mean, running_var, eps):
    weight = _channels_param(op, weight, input, 1.0)
    bias = _channels_param(op, bias, input, 0.0)
    return op.BatchNormalization(input, weight, bias, running_mean, running_var, epsilon=float(eps))


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
    # torch returns empty saved mean/invstd in inference; nothing reads them.
    empty = op.constant(np.zeros((0,), dtype=np.float32), op.output_dtype)
    return out, empty, op.Identity(empty)
