"""Backward ops of the Core ATen opset that are plain, exact math (they appear in training graphs)."""

from __future__ import annotations

import numpy as np

from pt2onnx.plugin import converter

from ._common import FLOATS, D, as_dtype, compute, kernel_dtype
from ._dims import shape_of


@converter("aten::max_pool2d_with_indices_backward.default", since=16)
def max_pool2d_with_indices_backward(op, grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices):
    # Each output's gradient goes to the input position its max came from (indices are per plane).
    def emit(grad, x):
        plane = op.constant([0, 0, -1]) if op.rank_of(self) == 4 else op.constant([0, -1])
        flat_grad, flat_index = op.Reshape(grad, plane), op.Reshape(indices, plane)
        # Zeros of x's shape that do not depend on x's values (x * 0 is NaN at inf and NaN).
        zeros = op.Reshape(op.Expand(op.constant(0.0, x.dtype), op.Shape(x)), plane)
        summed = op.ScatterElements(zeros, flat_index, flat_grad, axis=-1, reduction="add")
        return op.Reshape(summed, op.Shape(x))

    # onnxruntime's ScatterElements has no float16 kernel with reduction="add".
    return compute(op, emit, [grad_output, self], op.output_dtype, FLOATS - {D.FLOAT16})


def _bin_members(op, size, out):
    """torch's adaptive pooling bins of one spatial dim as an (out, size) bool matrix (bin p
    holds input[floor(p * size / out) : ceil((p + 1) * size / out)]) and each bin's length
    as an (out, 1) int64 column; ``size`` and ``out`` are 1-element int64 Values (symbolic
    or not)."""
    zero, one, first = op.constant(0), op.constant(1), op.constant([0])
    bins = op.Unsqueeze(op.Range(zero, op.Squeeze(out, first), one), op.constant([1]))
    start = op.Div(op.Mul(bins, size), out)
    end = op.Div(op.Sub(op.Add(op.Mul(op.Add(bins, one), size), out), one), out)
    positions = op.Range(zero, op.Squeeze(size, first), one)
    members = op.And(op.GreaterOrEqual(positions, start), op.Less(positions, end))
    return members, op.Sub(end, start)


@converter("aten::_adaptive_avg_pool2d_backward.default")
def adaptive_avg_pool2d_backward(op, grad_output, self):
    # The transpose of the forward's averaging: each input pixel gets grad / bin size of every
    # bin holding it, one spatial dim at a time. Where() picks the members, so a bin's inf or
    # NaN reaches only its own pixels (a 0/1 matrix product would spread 0 * inf = NaN).
    def spread(grad, axis):
        def dim(v):
            return shape_of(op, v, start=axis, end=axis + 1) if axis == -2 else shape_of(op, v, start=axis)

        members, lengths = _bin_members(op, dim(self), dim(grad))
        zero = op.constant(0.0, grad.dtype)
        if axis == -2:  # (..., P, Q) -> (..., P, H, Q), summed over P
            scaled = op.Div(grad, op.Cast(lengths, to=grad.dtype))
            picked = op.Where(op.Unsqueeze(members, op.constant([-1])), op.Unsqueeze(scaled, op.constant([-2])), zero)
            return op.ReduceSum(picked, op.constant([-3]), keepdims=0)
        # (..., H, Q) -> (..., H, Q, W), summed over Q
        scaled = op.Div(grad, op.Cast(op.Transpose(lengths, perm=[1, 0]), to=grad.dtype))
        picked = op.Where(members, op.Unsqueeze(scaled, op.constant([-1])), zero)
        return op.ReduceSum(picked, op.constant([-2]), keepdims=0)

    return compute(op, lambda grad: spread(spread(grad, -2), -1), [grad_output], op.output_dtype, FLOATS)


@converter("aten::embedding_dense_backward.default", since=16)
def embedding_dense_backward(op, grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    if scale_grad_by_freq:
        raise op.unsupported("scale_grad_by_freq", True, "not supported yet", hint="train without scale_grad_by_freq")

    # Sum the gradient rows of every index into its weight row; the padding row gets none.
    def emit(grad):
        rows = op.Reshape(grad, op.Concat(op.constant([-1]), shape_of(op, grad, start=-1), axis=0))
        flat = op.Reshape(indices, op.constant([-1, 1]))
        if padding_idx >= 0:
            # torch skips those rows (a NaN in them must not reach the padding row as 0 * NaN).
            keep = op.Not(op.Equal(flat, op.constant(int(padding_idx))))
            rows = op.Where(keep, rows, op.constant(0.0, grad.dtype))
        shape = op.Concat(op.shape_tensor([num_weights]), shape_of(op, grad, start=-1), axis=0)
        zeros = op.Expand(op.constant(np.zeros((), dtype=grad.dtype.numpy())), shape)
        return op.ScatterND(zeros, flat, rows, reduction="add")

    return compute(op, emit, [grad_output], op.output_dtype, FLOATS)


@converter("aten::native_layer_norm_backward.default")
def native_layer_norm_backward(op, grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    k = len(normalized_shape)
    rank = op.rank_of(input)
    inner, outer = op.constant(list(range(rank - k, rank))), op.constant(list(range(rank - k)))

    def emit(g, x, mu, a, w=None):
        # torch's CPU kernel (layer_norm_backward_frame), in its order of operations:
        #   ds = sum(dy * x * w), db = sum(dy * w) over the normalized dims, scale = 1 / N,
        #   b = (db * mean - ds) * a^3 * scale, c = -b * mean - db * a * scale,
        #   dx = a * dy * w + b * x + c;  dw = sum over rows of dy * (a * x - a * mean);  db = sum dy.
        gw = g if w is None else op.Mul(g, w)
        ds = op.ReduceSum(op.Mul(op.Mul(g, x), w) if w is not None else op.Mul(g, x), inner, keepdims=1)
        db = op.ReduceSum(gw, inner, keepdims=1)
        scale = op.Reciprocal(op.Cast(op.ReduceProd(shape_of(op, x, start=rank - k), keepdims=0), to=x.dtype))
        b = op.Mul(op.Mul(op.Mul(op.Mul(op.Sub(op.Mul(db, mu), ds), a), a), a), scale)
        c = op.Sub(op.Mul(op.Neg(b), mu), op.Mul(op.Mul(db, a), scale))
        grad_input = op.Add(op.Add(op.Mul(op.Mul(a, g), w) if w is not None else op.Mul(a, g), op.Mul(b, x)), c)
        xhat = op.Add(op.Mul(a, x), op.Neg(op.Mul(a, mu)))
        grad_weight = op.ReduceSum(op.Mul(g, xhat), outer, keepdims=0) if rank > k else op.Mul(g, xhat)
        grad_bias = op.ReduceSum(g, outer, keepdims=0) if rank > k else op.Identity(g)
        return grad_input, grad_weight, grad_bias

    dtype = input.dtype  # the first output may be masked out, so not op.output_dtype
    wide = kernel_dtype(op, dtype, FLOATS)
    values = [grad_out, input, mean, rstd] + ([] if weight is None else [weight])
    grads = emit(*[as_dtype(op, v, wide) for v in values])
    return tuple(as_dtype(op, g, dtype) if wanted else None for g, wanted in zip(grads, output_mask))
