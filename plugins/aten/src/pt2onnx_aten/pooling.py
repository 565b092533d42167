"""Pooling: max (with torch's indices), average, adaptive average."""

from __future__ import annotations

import math

import numpy as np

from pt2onnx.plugin import converter

from ._common import FLOAT32_16, FLOATS, as_dtype, batched, compute, int_list, kernel_dtype


def _spatial(op):
    # The op name says it: max_pool2d -> 2; the kernel may be one int for every dim.
    name = op.node.target._schema.name
    return int(next(c for c in reversed(name) if c.isdigit()))


def _window(op, kernel_size, stride, padding, dilation=1):
    spatial = _spatial(op)
    kernel = int_list(kernel_size, spatial)
    return spatial, {
        "kernel_shape": kernel,
        "strides": int_list(stride, spatial) if stride else kernel,  # torch: stride=[] means the kernel
        "pads": int_list(padding, spatial) * 2,
        "dilations": int_list(dilation, spatial),
    }


@converter("aten::max_pool1d.default", "aten::max_pool2d.default", "aten::max_pool3d.default")
def max_pool(op, self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    spatial, attrs = _window(op, kernel_size, stride, padding, dilation)
    attrs["ceil_mode"] = int(ceil_mode)
    return compute(
        op, lambda x: batched(op, x, spatial, lambda xb: op.MaxPool(xb, **attrs)), [self], op.output_dtype, FLOATS
    )


@converter("aten::max_pool2d_with_indices.default", "aten::max_pool3d_with_indices.default")
def max_pool_with_indices(op, self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    spatial, attrs = _window(op, kernel_size, stride, padding, dilation)
    attrs["ceil_mode"] = int(ceil_mode)

    def pool(x):
        out, flat = op.MaxPool(x, _outputs=2, **attrs)
        # ONNX numbers indices over the whole tensor, torch within each (batch, channel) plane.
        return out, op.Mod(flat, op.ReduceProd(op.Shape(x, start=-spatial), keepdims=1))

    # bfloat16 is pooled in float32: exact, a max only picks.
    dtype = op.output_dtype
    wide = kernel_dtype(op, dtype, FLOATS)
    out, indices = batched(op, as_dtype(op, self, wide), spatial, pool)
    return (out if wide == dtype else op.Cast(out, to=dtype)), indices


@converter("aten::avg_pool1d.default", "aten::avg_pool2d.default", "aten::avg_pool3d.default")
def avg_pool(
    op, self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None
):
    spatial, attrs = _window(op, kernel_size, stride, padding)
    del attrs["dilations"]
    attrs |= {"ceil_mode": int(ceil_mode), "count_include_pad": int(count_include_pad)}
    if divisor_override is not None:
        _check_full_windows(op, self, spatial, attrs, ceil_mode)
        attrs["count_include_pad"] = 1
    kernel = math.prod(attrs["kernel_shape"])

    def pool(x):
        out = op.AveragePool(x, **attrs)
        if divisor_override is None:
            return out
        # Every window holds the whole kernel (padding counted), so sum = mean * kernel size.
        return op.Mul(out, op.constant(kernel / divisor_override, x.dtype))

    return compute(op, lambda x: batched(op, x, spatial, pool), [self], op.output_dtype, FLOAT32_16)


def _check_full_windows(op, self, spatial, attrs, ceil_mode):
    if not ceil_mode:
        return
    sizes = list(self.shape)[-spatial:]
    for size, k, s, p in zip(sizes, attrs["kernel_shape"], attrs["strides"], attrs["pads"]):
        if not isinstance(size, int) or (size + 2 * p - k) % s != 0:
            raise op.unsupported(
                "divisor_override",
                None,
                "with ceil_mode, a last window that sticks out of the padded input sums fewer elements "
                "than the kernel holds; ONNX AveragePool cannot divide that sum by a fixed divisor",
            )


def _bins(size, out):
    """torch's adaptive pooling matrix: row i averages input[floor(i*size/out) : ceil((i+1)*size/out)]."""
    matrix = np.zeros((out, size))
    for i in range(out):
        start, end = (i * size) // out, -((-(i + 1) * size) // out)
        matrix[i, start:end] = 1.0 / (end - start)
    return matrix


@converter(
    "aten::adaptive_avg_pool1d.default",
    "aten::adaptive_avg_pool2d.default",
    "aten::adaptive_avg_pool3d.default",
    "aten::_adaptive_avg_pool2d.default",
    "aten::_adaptive_avg_pool3d.default",
)
def adaptive_avg_pool(op, self, output_size):
    spatial = _spatial(op)
    outputs = int_list(output_size, spatial)
    sizes = list(self.shape)[-spatial:]
    if all(o == 1 for o in outputs):
        return compute(op, lambda x: batched(op, x, spatial, op.GlobalAveragePool), [self], op.output_dtype, FLOAT32_16)
    if not all(isinstance(s, int) for s in sizes):
        raise op.unsupported(
            "self", "symbolic spatial size", "adaptive pooling to a size other than 1 needs static input sizes"
        )
    if all(s % o == 0 for s, o in zip(sizes, outputs)):
        kernel = [s // o for s, o in zip(sizes, outputs)]
        attrs = {"kernel_shape": kernel, "strides": kernel}
        return compute(
            op,
            lambda x: batched(op, x, spatial, lambda xb: op.AveragePool(xb, **attrs)),
            [self],
            op.output_dtype,
            FLOAT32_16,
        )
    # Overlapping bins of unequal sizes: one Einsum with torch's averaging matrix per dim.
    letters = "dhw"[-spatial:]
    outs = "pqr"[-spatial:]
    equation = f"...{letters}," + ",".join(f"{o}{i}" for o, i in zip(outs, letters)) + f"->...{outs}"

    def pool(x):
        matrices = [op.constant(_bins(s, o).astype(x.dtype.numpy())) for s, o in zip(sizes, outputs)]
        return op.Einsum(x, *matrices, equation=equation)

    return compute(op, pool, [self], op.output_dtype, FLOATS)
