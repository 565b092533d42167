"""Pooling."""

from __future__ import annotations

from pt2onnx.plugin import converter

from ._common import int_list


def _pool_attrs(op, self, kernel_size, stride, padding, dilation, ceil_mode):
    spatial = len(int_list(kernel_size, 1)) if not isinstance(kernel_size, int) else op.rank_of(self) - 2
    kernel = int_list(kernel_size, spatial)
    pads = int_list(padding, spatial)
    return {
        "kernel_shape": kernel,
        "strides": int_list(stride, spatial) if stride else kernel,
        "pads": pads + pads,
        "dilations": int_list(dilation, spatial),
        "ceil_mode": int(bool(ceil_mode)),
    }


@converter("aten::max_pool1d.default", "aten::max_pool2d.default", "aten::max_pool3d.default")
def max_pool(op, self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return op.MaxPool(self, **_pool_attrs(op, self, kernel_size, stride, padding, dilation, ceil_mode))


@converter("aten::max_pool2d_with_indices.default", "aten::max_pool3d_with_indices.default")
def max_pool_with_indices(op, self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    attrs = _pool_attrs(op, self, kernel_size, stride, padding, dilation, ceil_mode)
    out, flat_indices = op.MaxPool(self, _outputs=2, **attrs)
    # ONNX flattens indices over the whole tensor, torch per (batch, channel) plane.
    spatial = len(attrs["kernel_shape"])
    plane = op.ReduceProd(op.Shape(self, start=-spatial), keepdims=1)
    return out, op.Mod(flat_indices, plane)


@converter(
    "aten::adaptive_avg_pool2d.default",
    "aten::adaptive_avg_pool1d.default",
    "aten::adaptive_avg_pool3d.default",
    "aten::_adaptive_avg_pool2d.default",
)
def adaptive_avg_pool(op, self, output_size):
    if any(int(s) != 1 for s in output_size):
        raise op.unsupported(
            "output_size", list(output_size), "only global pooling (output size 1) is supported so far"
        )
    return op.GlobalAveragePool(self)
