"""Convolutions."""

from __future__ import annotations

from pt2onnx.plugin import converter

from ._common import int_list


def _conv(op, input, weight, bias, stride, padding, dilation, groups):
    spatial = op.rank_of(weight) - 2
    attrs = {
        "strides": int_list(stride, spatial),
        "dilations": int_list(dilation, spatial),
        "group": int(groups),
    }
    if isinstance(padding, str):
        if padding == "valid":
            attrs["pads"] = [0] * (2 * spatial)
        elif padding == "same":
            attrs["auto_pad"] = "SAME_UPPER"
        else:
            raise op.unsupported("padding", padding, "expected 'same', 'valid' or ints")
    else:
        pads = int_list(padding, spatial)
        attrs["pads"] = pads + pads
    inputs = [input, weight] if bias is None else [input, weight, bias]
    return op.Conv(*inputs, **attrs)


@converter(
    "aten::conv1d.default",
    "aten::conv2d.default",
    "aten::conv3d.default",
    "aten::conv1d.padding",
    "aten::conv2d.padding",
    "aten::conv3d.padding",
)
def conv(op, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv(op, input, weight, bias, stride, padding, dilation, groups)


@converter("aten::convolution.default")
def convolution(op, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    if transposed:
        spatial = op.rank_of(weight) - 2
        pads = int_list(padding, spatial)
        attrs = {
            "strides": int_list(stride, spatial),
            "dilations": int_list(dilation, spatial),
            "pads": pads + pads,
            "output_padding": int_list(output_padding, spatial),
            "group": int(groups),
        }
        inputs = [input, weight] if bias is None else [input, weight, bias]
        return op.ConvTranspose(*inputs, **attrs)
    return _conv(op, input, weight, bias, stride, padding, dilation, groups)
