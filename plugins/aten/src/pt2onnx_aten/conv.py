"""Convolutions and transposed convolutions (1d/2d/3d, batched or not)."""

from __future__ import annotations

from pt2onnx.plugin import converter

from ._common import FLOAT32_16, batched, compute, int_list
from ._dims import ints, shape_of


def _run(op, input, weight, bias, emit):
    """``emit(x, w, b)`` on a batched input, in a dtype onnxruntime's Conv kernels run."""
    spatial = op.rank_of(weight) - 2
    values = [input, weight] if bias is None else [input, weight, bias]

    def in_kernel_dtype(x, w, b=None):
        return batched(op, x, spatial, lambda xb: emit(xb, w, b))

    return compute(op, in_kernel_dtype, values, op.output_dtype, FLOAT32_16)


def _same_pads(weight, dilation):
    """Conv's pads for torch's ``padding='same'`` (stride 1); None where the kernel size is
    known only when the model runs (a weight passed as an input)."""
    kernel = list(weight.shape)[2:]
    if not all(isinstance(k, int) for k in kernel):
        return None
    total = [d * (k - 1) for d, k in zip(dilation, kernel)]
    # torch puts the odd element of the padding at the end, like ONNX SAME_UPPER.
    return [t // 2 for t in total] + [t - t // 2 for t in total]


def _pad_same(op, x, w, dilation):
    """``x`` padded as ``padding='same'`` pads it, for a kernel size known only at run time.

    An explicit Pad, not ``auto_pad=SAME_UPPER``: onnxscript's pad rewrite fails on a Conv
    whose kernel size is symbolic (onnxscript 0.7)."""
    total = op.Mul(op.Sub(shape_of(op, w, start=2), ints(op, [1])), ints(op, dilation))
    begin = op.Div(total, ints(op, [2]))
    lead = ints(op, [0, 0])
    return op.Pad(x, op.Concat(lead, begin, lead, op.Sub(total, begin), axis=0))


def _conv(op, input, weight, bias, stride, padding, dilation, groups):
    spatial = op.rank_of(weight) - 2
    dilations = int_list(dilation, spatial)
    pad_first = False
    if isinstance(padding, str):
        if padding == "valid":
            pads = [0] * (2 * spatial)
        elif padding == "same":
            pads = _same_pads(weight, dilations)
            if pads is None:
                pad_first, pads = True, [0] * (2 * spatial)
        else:
            raise op.unsupported("padding", padding, "expected 'same', 'valid' or ints")
    else:
        pads = int_list(padding, spatial) * 2
    attrs = {"strides": int_list(stride, spatial), "dilations": dilations, "pads": pads, "group": int(groups)}

    def emit(x, w, b):
        x = _pad_same(op, x, w, dilations) if pad_first else x
        return op.Conv(*[v for v in (x, w, b) if v is not None], **attrs)

    return _run(op, input, weight, bias, emit)


def _conv_transpose(op, input, weight, bias, stride, padding, output_padding, groups, dilation):
    spatial = op.rank_of(weight) - 2
    strides, pads, out_pads = int_list(stride, spatial), int_list(padding, spatial), int_list(output_padding, spatial)
    attrs = {"strides": strides, "dilations": int_list(dilation, spatial), "group": int(groups)}
    if all(o < s for o, s in zip(out_pads, strides)):
        attrs |= {"pads": pads * 2, "output_padding": out_pads}
        return _run(
            op, input, weight, bias, lambda x, w, b: op.ConvTranspose(*[v for v in (x, w, b) if v is not None], **attrs)
        )
    # onnxruntime refuses output_padding >= stride (torch allows it below the dilation too).
    # Trim the end padding instead, and where the output reaches past the full result, pad
    # with zeros (no kernel tap lands there) before adding the bias.
    attrs["pads"] = pads + [max(p - o, 0) for p, o in zip(pads, out_pads)]
    extra = [max(o - p, 0) for p, o in zip(pads, out_pads)]

    def emit(x, w, b):
        y = op.ConvTranspose(x, w, **attrs)
        if any(extra):
            y = op.Pad(y, op.constant([0] * (spatial + 2) + [0, 0] + extra))
        if b is not None:
            y = op.Add(y, op.Reshape(b, op.constant([-1] + [1] * spatial)))
        return y

    return _run(op, input, weight, bias, emit)


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


@converter("aten::conv_transpose1d.default", "aten::conv_transpose2d.input", "aten::conv_transpose3d.input")
def conv_transpose(op, input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_transpose(op, input, weight, bias, stride, padding, output_padding, groups, dilation)


@converter("aten::convolution.default")
def convolution(op, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    if transposed:
        return _conv_transpose(op, input, weight, bias, stride, padding, output_padding, groups, dilation)
    return _conv(op, input, weight, bias, stride, padding, dilation, groups)
