"""Backward ops of the Core ATen opset that are plain, exact math (they appear in training graphs)."""

from __future__ import annotations

import numpy as np

from pt2onnx.plugin import converter

from ._common import FLOATS, as_dtype, compute, kernel_dtype
from .pooling import _bins


@converter("aten::max_pool2d_with_indices_backward.default")
def max_pool2d_with_indices_backward(op, grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices):
    # Each output's gradient goes to the input position its max came from (indices are per plane).
    def emit(grad, x):
        plane = op.constant([0, 0, -1]) if op.rank_of(self) == 4 else op.constant([0, -1])
        flat_grad, flat_index = op.Reshape(grad, plane), op.Reshape(indices, plane)
        zeros = op.Reshape(op.Mul(x, op.constant(0.0, x.dtype)), plane)
        summed = op.ScatterElements(zeros, flat_index, flat_grad, axis=-1, reduction="add")
        return op.Reshape(summed, op.Shape(x))

    return compute(op, emit, [grad_output, self], op.output_dtype, FLOATS)


@converter("aten::_adaptive_avg_pool2d_backward.default")
def adaptive_avg_pool2d_backward(op, grad_output, self):
    sizes, outputs = list(self.shape)[-2:], list(grad_output.shape)[-2:]
    if not all(isinstance(s, int) for s in sizes + outputs):
        raise op.unsupported("self", "symbolic spatial size", "the pooling bins need static sizes")

    # The transpose of the forward's averaging: input pixel gets grad / bin size of every bin holding it.
    def emit(grad):
        matrices = [op.constant(_bins(s, o).astype(grad.dtype.numpy())) for s, o in zip(sizes, outputs)]
        return op.Einsum(grad, *matrices, equation="...pq,ph,qw->...hw")

    return compute(op, emit, [grad_output], op.output_dtype, FLOATS)


@converter("aten::embedding_dense_backward.default")
def embedding_dense_backward(op, grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    if scale_grad_by_freq:
        raise op.unsupported("scale_grad_by_freq", True, "not supported yet", hint="train without scale_grad_by_freq")

    # Sum the gradient rows of every index into its weight row; the padding row gets none.
    def emit(grad):
        rows = op.Reshape(grad, op.Concat(op.constant([-1]), op.Shape(grad, start=-1), axis=0))
        flat = op.Reshape(indices, op.constant([-1, 1]))
        if padding_idx >= 0:
            keep = op.Cast(op.Not(op.Equal(flat, op.constant(int(padding_idx)))), to=grad.dtype)
            rows = op.Mul(rows, keep)
        shape = op.Concat(op.shape_tensor([num_weights]), op.Shape(grad, start=-1), axis=0)
        zeros = op.Expand(op.constant(np.zeros((), dtype=grad.dtype.numpy())), shape)
        return op.ScatterND(zeros, flat, rows, reduction="add")

    return compute(op, emit, [grad_output], op.output_dtype, FLOATS)


@converter("aten::native_layer_norm_backward.default")
def native_layer_norm_backward(op, grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    k = len(normalized_shape)
    rank = op.rank_of(input)
    inner, outer = op.constant(list(range(rank - k, rank))), op.constant(list(range(rank - k)))

    def emit(g, x, mu, r, w=None):
        xhat = op.Mul(op.Sub(x, mu), r)
        gw = g if w is None else op.Mul(g, w)
        # d/dx of (x - mean) * rstd: rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) over the normalized dims
        centered = op.Sub(gw, op.ReduceMean(gw, inner, keepdims=1))
        grad_input = op.Mul(r, op.Sub(centered, op.Mul(xhat, op.ReduceMean(op.Mul(gw, xhat), inner, keepdims=1))))
        grad_weight = op.ReduceSum(op.Mul(g, xhat), outer, keepdims=0) if rank > k else op.Mul(g, xhat)
        grad_bias = op.ReduceSum(g, outer, keepdims=0) if rank > k else op.Identity(g)
        return grad_input, grad_weight, grad_bias

    dtype = input.dtype  # the first output may be masked out, so not op.output_dtype
    wide = kernel_dtype(op, dtype, FLOATS)
    values = [grad_out, input, mean, rstd] + ([] if weight is None else [weight])
    grads = emit(*[as_dtype(op, v, wide) for v in values])
    return tuple(as_dtype(op, g, dtype) if wanted else None for g, wanted in zip(grads, output_mask))
