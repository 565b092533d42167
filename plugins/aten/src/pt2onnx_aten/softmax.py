"""Softmax and log-softmax along one dim.

The input is cast to the output dtype first, which is what ``half_to_float`` and ``dtype=``
ask for.
"""

from __future__ import annotations

from pt2onnx.plugin import converter

from ._common import FLOATS, compute, rank


def _along(op, onnx_op, self, dim):
    def softmax_(x):
        if rank(self) == 0:
            # ONNX Softmax needs an axis: give the 0-d tensor one, then take it away.
            one = getattr(op, onnx_op)(op.Reshape(x, op.constant([1])), axis=0)
            return op.Reshape(one, op.Shape(x))
        return getattr(op, onnx_op)(x, axis=dim)

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
