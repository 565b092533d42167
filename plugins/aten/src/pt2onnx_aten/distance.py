"""Distances (cdist, pdist) and native_dropout's inference form."""

from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir

from pt2onnx.plugin import converter

from ._common import FLOATS, compute


def _norm(op, diff, p, axis):
    """The p-norm of ``diff`` over ``axis`` (p = 0 counts non-zeros, p = inf takes the max)."""
    axes = op.constant([axis])
    if p == 0:
        nonzero = op.Cast(op.Not(op.Equal(diff, op.constant(0.0, diff.dtype))), to=diff.dtype)
        return op.ReduceSum(nonzero, axes, keepdims=0)
    magnitude = op.Abs(diff)
    if math.isinf(p):
        return op.ReduceMax(magnitude, axes, keepdims=0)
    if p == 1:
        return op.ReduceSum(magnitude, axes, keepdims=0)
    if p == 2:
        return op.Sqrt(op.ReduceSum(op.Mul(diff, diff), axes, keepdims=0))
    powered = op.Pow(magnitude, op.constant(float(p), diff.dtype))
    return op.Pow(op.ReduceSum(powered, axes, keepdims=0), op.constant(1.0 / p, diff.dtype))


def _pairwise(op, x1, x2, p):
    # (*, P, 1, M) - (*, 1, R, M) -> (*, P, R, M), reduced over M.
    diff = op.Sub(op.Unsqueeze(x1, op.constant([-2])), op.Unsqueeze(x2, op.constant([-3])))
    return _norm(op, diff, p, -1)


@converter("aten::_cdist_forward.default", "aten::cdist.default")
def cdist(op, x1, x2, p=2.0, compute_mode=None):
    # compute_mode only picks torch's algorithm (matmul or direct); both give these distances.
    return compute(op, lambda a, b: _pairwise(op, a, b, p), [x1, x2], op.output_dtype, FLOATS)


@converter("aten::_pdist_forward.default", "aten::pdist.default")
def pdist(op, self, p=2.0):
    def emit(x):
        dist = _pairwise(op, x, x, p)
        # Pairs i < j in row-major order, as torch lists them.
        n = op.Squeeze(op.Shape(x, start=0, end=1))
        index = op.Range(op.constant(0), n, op.constant(1))
        upper = op.Less(op.Unsqueeze(index, op.constant([1])), op.Unsqueeze(index, op.constant([0])))
        return op.GatherND(dist, op.Transpose(op.NonZero(upper), perm=[1, 0]))

    return compute(op, emit, [self], op.output_dtype, FLOATS)


@converter("aten::native_dropout.default")
def native_dropout(op, input, p, train):
    keep_all = op.Expand(op.constant(True), op.Shape(input))
    if train is False or p == 0:
        return op.Identity(input), keep_all
    if p == 1:
        # Everything is dropped: deterministic.
        zeros = op.ConstantOfShape(op.Shape(input), value=ir.tensor(np.zeros((1,), dtype=input.dtype.numpy())))
        return zeros, op.Not(keep_all)
    raise op.unsupported("train", train, "dropout in training mode is random", hint="call model.eval()")
