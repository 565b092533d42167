"""Resampling: upsample_* (Resize), pixel (un)shuffle, grid_sampler (GridSample), col2im (Col2Im)."""

from __future__ import annotations

import numpy as np

from pt2onnx.plugin import converter

from ._common import FLOAT32_16, FLOATS, batched, compute, int_list

_LINEAR = {"mode": "linear"}
_CUBIC = {"mode": "cubic", "cubic_coeff_a": -0.75}


def _resize(op, input, spatial, output_size, scales, attrs, align_corners=None):
    """Resize the last ``spatial`` dims to ``output_size`` or by ``scales`` (torch's mapping)."""
    attrs = dict(attrs)
    if align_corners is not None:
        # torch's linear/cubic map (dst + 0.5) / scale - 0.5 (half_pixel), or the corner pixels.
        attrs["coordinate_transformation_mode"] = "align_corners" if align_corners else "half_pixel"
    else:
        # torch's nearest takes floor(dst / scale): ONNX asymmetric + floor.
        attrs |= {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    sizes = None if output_size is None else list(output_size)
    if scales is not None and all(s is not None for s in scales):
        factors = [float(s) for s in scales]
        # torch maps coordinates with the given scales; its sizes are floor(in * scale).
        if sizes is not None and not _sizes_follow(input, spatial, sizes, factors):
            raise op.unsupported(
                "scales", factors, "ONNX Resize cannot map coordinates by scales that disagree with output_size"
            )
        scale_values = np.array([1.0] * (op.rank_of(input) - spatial) + factors, dtype=np.float32)
        return lambda x: op.Resize(x, None, op.constant(scale_values), **attrs)
    if sizes is None:
        raise op.unsupported("output_size", None, "upsampling needs output_size or scale factors")

    def to_sizes(x):
        return op.Resize(x, None, None, op.Concat(op.Shape(x, end=-spatial), op.shape_tensor(sizes), axis=0), **attrs)

    return to_sizes


def _sizes_follow(input, spatial, sizes, factors):
    """Whether the given sizes are floor(in * scale) (symbolic sizes: assumed, as torch derived them)."""
    inputs = list(input.shape)[-spatial:]
    return all(
        not (isinstance(i, int) and isinstance(o, int)) or int(np.floor(i * f)) == o
        for i, o, f in zip(inputs, sizes, factors)
    )


def _run(op, input, emit):
    return compute(op, emit, [input], op.output_dtype, FLOAT32_16)  # onnxruntime has no float64 Resize


@converter("aten::upsample_nearest1d.vec", "aten::upsample_nearest2d.vec", "aten::upsample_nearest3d.vec")
def upsample_nearest_vec(op, input, output_size, scale_factors):
    spatial = op.rank_of(input) - 2
    return _run(op, input, _resize(op, input, spatial, output_size, scale_factors, {"mode": "nearest"}))


@converter("aten::upsample_linear1d.vec", "aten::upsample_bilinear2d.vec", "aten::upsample_trilinear3d.vec")
def upsample_linear_vec(op, input, output_size, align_corners, scale_factors):
    spatial = op.rank_of(input) - 2
    return _run(op, input, _resize(op, input, spatial, output_size, scale_factors, _LINEAR, align_corners))


@converter("aten::upsample_bicubic2d.vec")
def upsample_bicubic_vec(op, input, output_size, align_corners, scale_factors):
    return _run(op, input, _resize(op, input, 2, output_size, scale_factors, _CUBIC, align_corners))


@converter("aten::upsample_nearest1d.default", "aten::upsample_nearest2d.default", "aten::upsample_nearest3d.default")
def upsample_nearest(op, self, output_size, *scales):
    spatial = op.rank_of(self) - 2
    return _run(op, self, _resize(op, self, spatial, output_size, list(scales) or None, {"mode": "nearest"}))


@converter(
    "aten::upsample_linear1d.default",
    "aten::upsample_bilinear2d.default",
    "aten::upsample_trilinear3d.default",
    "aten::upsample_bicubic2d.default",
)
def upsample_interpolating(op, self, output_size, align_corners, *scales):
    spatial = op.rank_of(self) - 2
    attrs = _CUBIC if "bicubic" in op.node.target._schema.name else _LINEAR
    return _run(op, self, _resize(op, self, spatial, output_size, list(scales) or None, attrs, align_corners))


# -- pixel (un)shuffle -----------------------------------------------------------------


def _rearrange(op, x, factor, shuffle):
    """torch's pixel_(un)shuffle for any number of batch dims, as Reshape/Transpose/Reshape."""
    rank = op.rank_of(x)
    b = rank - 3
    lead, channels = op.Shape(x, end=-3), op.Shape(x, start=-3, end=-2)
    height, width = op.Shape(x, start=-2, end=-1), op.Shape(x, start=-1)
    r, rr = op.constant([factor]), op.constant([factor * factor])
    batch = list(range(b))
    if shuffle:  # (*, C*r*r, H, W) -> (*, C, r, r, H, W) -> (*, C, H, r, W, r)
        c = op.Div(channels, rr)
        split = op.Concat(lead, c, r, r, height, width, axis=0)
        perm = [*batch, b, b + 3, b + 1, b + 4, b + 2]
        merged = op.Concat(lead, c, op.Mul(height, r), op.Mul(width, r), axis=0)
    else:  # (*, C, H*r, W*r) -> (*, C, H, r, W, r) -> (*, C, r, r, H, W)
        h, w = op.Div(height, r), op.Div(width, r)
        split = op.Concat(lead, channels, h, r, w, r, axis=0)
        perm = [*batch, b, b + 2, b + 4, b + 1, b + 3]
        merged = op.Concat(lead, op.Mul(channels, rr), h, w, axis=0)
    return op.Reshape(op.Transpose(op.Reshape(x, split), perm=perm), merged)


@converter("aten::pixel_shuffle.default")
def pixel_shuffle(op, self, upscale_factor):
    if op.rank_of(self) in (3, 4) and op.output_dtype in FLOATS:
        # DepthToSpace's CRD mode is exactly torch's channel order.
        emit = lambda x: op.DepthToSpace(x, blocksize=int(upscale_factor), mode="CRD")  # noqa: E731
        return compute(op, lambda x: batched(op, x, 2, emit), [self], op.output_dtype, FLOATS)
    return _rearrange(op, self, int(upscale_factor), shuffle=True)


@converter("aten::pixel_unshuffle.default")
def pixel_unshuffle(op, self, downscale_factor):
    # SpaceToDepth orders channels as DCR, torch as CRD: rearrange explicitly.
    return _rearrange(op, self, int(downscale_factor), shuffle=False)


# -- grid sampling and col2im -------------------------------------------------------------

_PADDING = {0: "zeros", 1: "border", 2: "reflection"}


@converter("aten::grid_sampler_2d.default", "aten::grid_sampler.default")
def grid_sampler(op, input, grid, interpolation_mode, padding_mode, align_corners):
    if op.rank_of(input) != 4 and op.opset < 20:
        raise op.unsupported(
            "input", "5-D", "GridSample samples volumes from opset 20 on", hint="export with opset>=20"
        )
    # GridSample-20 renamed the modes.
    modes = ("linear", "nearest", "cubic") if op.opset >= 20 else ("bilinear", "nearest", "bicubic")
    attrs = {
        "mode": modes[interpolation_mode],
        "padding_mode": _PADDING[padding_mode],
        "align_corners": int(align_corners),
    }
    kernels = FLOATS if op.opset >= 20 else FLOAT32_16  # GridSample-16 has no float64 kernel
    return compute(op, lambda x, g: op.GridSample(x, g, **attrs), [input, grid], op.output_dtype, kernels)


@converter("aten::col2im.default")
def col2im(op, self, output_size, kernel_size, dilation, padding, stride):
    attrs = {"dilations": int_list(dilation, 2), "pads": int_list(padding, 2) * 2, "strides": int_list(stride, 2)}
    image, block = op.shape_tensor(list(output_size)), op.constant(int_list(kernel_size, 2))

    def emit(x):
        if op.rank_of(self) == 2:  # unbatched (C*kh*kw, L)
            zero = op.constant([0])
            return op.Squeeze(op.Col2Im(op.Unsqueeze(x, zero), image, block, **attrs), zero)
        return op.Col2Im(x, image, block, **attrs)

    return compute(op, emit, [self], op.output_dtype, FLOAT32_16)
