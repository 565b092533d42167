"""Softmax and log-softmax along one dim.

The input is cast to the output dtype first, which is what ``half_to_float`` and ``dtype=``
ask for.
"""

from __future__ import annotations

from pt2onnx.plugin import converter

from ._common import FLOATS, compute, is_inf, is_nan, rank
from ._dims import reduce_over


def _along(op, onnx_op, self, dim):
    def softmax_(x):
        if rank(self) == 0:
            # ONNX Softmax needs an axis: give the 0-d tensor one, then take it away.
            one = getattr(op, onnx_op)(op.Reshape(x, op.constant([1])), axis=0)
            return op.Reshape(one, op.Shape(x))
        result = getattr(op, onnx_op)(x, axis=dim)
        if onnx_op == "LogSoftmax":
            # torch: a slice holding +inf or NaN is NaN throughout (inf - inf, NaN - NaN);
            # onnxruntime's LogSoftmax gives NaN there only and finite or -inf elsewhere.
            top = reduce_over(op, "ReduceMax", x, [dim], keepdims=1)
            nan_in = reduce_over(op, "ReduceMax", op.Cast(is_nan(op, x), to=x.dtype), [dim], keepdims=1)
            poisoned = op.Or(is_inf(op, top, detect_negative=0), op.Greater(nan_in, op.constant(0.0, x.dtype)))
            result = op.Where(poisoned, op.constant(float("nan"), x.dtype), result)
        return result

    return compute(op, softmax_, [self], op.output_dtype, FLOATS)


@converter("aten::_softmax.default")
def _softmax(op, self, dim, half_to_float):
    return _along(op, "Softmax", self, dim)


@converter("aten::_log_softmax.default")
def _log_softmax(op, self, dim, half_to_float):
    return _along(op, "LogSoftmax", self, dim)


@converter("aten::softmax.int")
def softmax(op, self, dim, dtype=None):
    return _along(op, "Softmax", self, dim)


@converter("aten::log_softmax.int")
def log_softmax(op, self, dim, dtype=None):
    return _along(op, "LogSoftmax", self, dim)
