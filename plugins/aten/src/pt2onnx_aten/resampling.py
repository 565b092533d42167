"""Resampling: upsample_* (Resize), pixel (un)shuffle, grid_sampler (GridSample), col2im (Col2Im)."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

from pt2onnx.plugin import converter

from ._common import FLOAT32_16, FLOATS, D, batched, compute, int_list
from ._dims import shape_of, size, static_dims

_LINEAR = {"mode": "linear"}
_CUBIC = {"mode": "cubic", "cubic_coeff_a": -0.75}


def _input_meta(op):
    return op.node.args[0].meta["val"]


def _follows(op, spatial, scales):
    """Whether torch's output sizes are ``trunc(in * scale)``, as ONNX Resize makes them from scales."""
    inputs, outputs = _input_meta(op).shape[-spatial:], op.output_meta.shape[-spatial:]
    for i, o, f in zip(inputs, outputs, scales):
        expected = [torch.sym_int(torch.sym_float(i) * f)]
        if float(f).is_integer():
            expected.append(i * int(f))  # how torch writes an integer scale's size
        if not any(statically_known_true(o == e) for e in expected):
            return False
    return True


def _scales(op, x, spatial, scales, copies=False):
    """The Resize ``scales`` input: 1 for the leading dims, then torch's scale factors.

    With ``copies`` (torch's linear kernels), a dim whose size the scale leaves unchanged
    (a scale in (1, 2) and a small size) is copied whatever the scale: its factor is 1,
    decided when the model runs for a symbolic size.
    """
    first = op.rank_of(x) - spatial
    parts, run = [], [1.0] * first
    for axis, f in enumerate((float(s) for s in scales), start=first):
        n = static_dims(x)[axis]
        if copies and 1 < f < 2 and n is None:
            n_1d = size(op, x, axis)
            out = op.Cast(op.Mul(op.Cast(n_1d, to=D.DOUBLE), op.constant([f], D.DOUBLE)), to=D.INT64)
            if run:
                parts.append(op.constant(np.array(run, dtype=np.float32)))
                run = []
            parts.append(op.Where(op.Equal(out, n_1d), op.constant([1.0], D.FLOAT), op.constant([f], D.FLOAT)))
            continue
        run.append(1.0 if copies and n is not None and int(n * f) == n else f)
    if run:
        parts.append(op.constant(np.array(run, dtype=np.float32)))
    return parts[0] if len(parts) == 1 else op.Concat(*parts, axis=0)


def _sizes(op, x, spatial, output_size):
    """The Resize ``sizes`` input: the leading dims kept, the spatial ones ``output_size``."""
    return op.Concat(shape_of(op, x, end=-spatial), op.shape_tensor(list(output_size)), axis=0)


def _interpolating(op, spatial, output_size, scales, attrs, align_corners):
    """torch's linear and cubic upsampling as one Resize (half_pixel or align_corners mapping)."""
    attrs = {**attrs, "coordinate_transformation_mode": "align_corners" if align_corners else "half_pixel"}
    # torch's linear kernels copy a dim whose size stays (its cubic kernel maps it by the scale).
    copies = attrs["mode"] == "linear"
    given = [s for s in scales or () if s is not None]
    if given:
        if len(given) == spatial and _follows(op, spatial, given):
            if not copies and not align_corners:
                return lambda x: _cubic_by_scales(op, x, spatial, given, attrs)
            return lambda x: op.Resize(x, None, _scales(op, x, spatial, given, copies), **attrs)
        if not align_corners:  # with align_corners torch maps by the sizes alone
            raise op.unsupported(
                "scales",
                list(scales),
                "torch maps coordinates by these scales to output sizes that are not trunc(input size * scale); "
                "ONNX Resize takes either scales or sizes",
                hint="pass only output_size, or sizes that follow from the scales",
            )
    return lambda x: op.Resize(x, None, None, _sizes(op, x, spatial, output_size), **attrs)


def _cubic_by_scales(op, x, spatial, scales, attrs):
    """Resize by ``scales`` (cubic): torch maps by the scale also where no size changes.

    onnxruntime's Resize copies its input when no size changes, whatever the scales: a
    scale in (1, 2) on a small size (1.2 on 4 pixels) leaves the size, not the pixels, as
    they are in torch. Then the first such dim is resized longer, by enough repeats of
    its last pixel (which torch's clamped reads see) that its size grows, and cut back.
    """
    first = op.rank_of(x) - spatial
    sizes = static_dims(x)[first:]
    keep = [int(n * float(f)) == n if n is not None else None for n, f in zip(sizes, scales)]
    stretched = [k for k, f in enumerate(scales) if 1 < float(f) < 2]
    resize = lambda v: op.Resize(v, None, _scales(op, v, spatial, scales), **attrs)  # noqa: E731
    if not stretched or False in keep:
        return resize(x)
    axis, scale = first + stretched[0], float(scales[stretched[0]])
    pads = [0] * (2 * op.rank_of(x))
    pads[op.rank_of(x) + axis] = math.ceil(1 / (scale - 1))  # (n + pad) * (scale - 1) >= 1
    out = resize(op.Pad(x, op.constant(pads), mode="edge"))
    grown = op.Mul(op.Cast(size(op, x, axis), to=D.DOUBLE), op.constant([scale], D.DOUBLE))
    return op.Slice(out, op.constant([0]), op.Cast(grown, to=D.INT64), op.constant([axis]))


# -- nearest ------------------------------------------------------------------------------
#
# torch's nearest reads input[min(floor(float32(dst) * float32(1 / scale)), in - 1)] (the
# scale factor, or out/in in float32 when none is given); its 2-d kernel alone copies when
# out == in and takes dst >> 1 when out == 2 * in, whatever the scale (torch 2.13: measured
# for 1-, 2- and 3-d, contiguous and channels-last). ONNX Resize maps dst / scale instead:
# the same index for an integer scale, often but not always otherwise (a scale of 1.2 on 4
# pixels in 2-d: torch copies, Resize reads 0, 0, 1, 2). Resize is used where it reads what
# torch reads; elsewhere each dim gathers torch's indices.


def _nearest_index(n_in, n_out, scale, spatial):
    """torch's source indices for static sizes (numpy, in torch's float32 arithmetic)."""
    dst = np.arange(n_out)
    if spatial == 2 and n_out == n_in:
        return dst
    if spatial == 2 and n_out == 2 * n_in:
        return dst >> 1
    step = np.float32(1.0 / scale) if scale else np.float32(n_in) / np.float32(n_out)
    return np.minimum(np.floor(dst.astype(np.float32) * step).astype(np.int64), n_in - 1)


def _resize_index(n_in, n_out):
    """onnxruntime's source indices for Resize to ``n_out`` (nearest, asymmetric, floor)."""
    scale = np.float32(n_out) / np.float32(n_in)
    return np.minimum(np.floor(np.arange(n_out).astype(np.float32) / scale).astype(np.int64), n_in - 1)


def _step(op, n_in, n_out, scale):
    """torch's float32 step from an output index to its source: 1 / scale, else in / out."""
    if scale:
        return op.constant(np.float32(1.0 / scale))
    return op.Div(op.Cast(n_in, to=D.FLOAT), op.Cast(n_out, to=D.FLOAT))


def _nearest_index_value(op, n_in, n_out, scale, spatial):
    """torch's source indices along one dim, computed from its symbolic sizes."""
    f32, i64 = D.FLOAT, D.INT64
    dst = op.Range(op.constant(0), op.Squeeze(n_out), op.constant(1))
    step = _step(op, n_in, n_out, scale)
    index = op.Min(op.Cast(op.Floor(op.Mul(op.Cast(dst, to=f32), step)), to=i64), op.Sub(n_in, op.constant([1])))
    if spatial != 2:
        return index
    halved = op.Div(dst, op.constant(2))
    twice = op.Equal(n_out, op.Mul(n_in, op.constant([2])))
    return op.Where(op.Equal(n_out, n_in), dst, op.Where(twice, halved, index))


def _nearest(op, x, spatial, output_size, scales):
    """``x`` resampled like torch's nearest (see above) to ``output_size`` or by ``scales``."""
    scales = list(scales) if scales is not None else [None] * spatial
    in_sizes = static_dims(x)[-spatial:]
    if output_size is not None:
        out_sizes = list(output_size)
    else:  # .vec with scale factors: torch's sizes are trunc(in * scale), in float64
        out_sizes = [int(n * float(f)) if n is not None else None for n, f in zip(in_sizes, scales)]
    first = op.rank_of(x) - spatial
    # Resize copies exactly in float32 (bfloat16 through it); other dtypes gather.
    resizable = x.dtype in (D.FLOAT, D.FLOAT16, D.BFLOAT16)
    attrs = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    if all(isinstance(n, int) for n in (*in_sizes, *out_sizes)):
        indices = [_nearest_index(i, o, s, spatial) for i, o, s in zip(in_sizes, out_sizes, scales)]
        if resizable and all(np.array_equal(t, _resize_index(i, o)) for t, i, o in zip(indices, in_sizes, out_sizes)):
            return _run(op, x, lambda v: op.Resize(v, None, None, _sizes(op, v, spatial, out_sizes), **attrs))
        for axis, (index, n_in) in enumerate(zip(indices, in_sizes), start=first):
            assert n_in is not None  # every size is static here
            if not np.array_equal(index, np.arange(n_in)):
                x = op.Gather(x, op.constant(index), axis=axis)
        return x
    integers = all(s is not None and float(s).is_integer() and s >= 1 for s in scales)
    if resizable and integers and (output_size is None or _follows(op, spatial, scales)):
        # An integer scale k: out = k * in, and torch and Resize both read floor(dst / k).
        return _run(op, x, lambda v: op.Resize(v, None, _scales(op, v, spatial, scales), **attrs))
    source = x
    for axis, scale in enumerate(scales, start=first):
        in_1d = size(op, source, axis)
        if output_size is not None:
            out_1d = op.shape_tensor([output_size[axis - first]])
        else:
            out_1d = op.Cast(op.Mul(op.Cast(in_1d, to=D.DOUBLE), op.constant([float(scale)], D.DOUBLE)), to=D.INT64)
        x = op.Gather(x, _nearest_index_value(op, in_1d, out_1d, scale, spatial), axis=axis)
    return x


def _run(op, input, emit):
    return compute(op, emit, [input], op.output_dtype, FLOAT32_16)  # onnxruntime has no float64 Resize


@converter("aten::upsample_nearest1d.vec", "aten::upsample_nearest2d.vec", "aten::upsample_nearest3d.vec")
def upsample_nearest_vec(op, input, output_size, scale_factors):
    spatial = op.rank_of(input) - 2
    return _nearest(op, input, spatial, output_size, scale_factors)


@converter("aten::upsample_linear1d.vec", "aten::upsample_bilinear2d.vec", "aten::upsample_trilinear3d.vec")
def upsample_linear_vec(op, input, output_size, align_corners, scale_factors):
    spatial = op.rank_of(input) - 2
    return _run(op, input, _interpolating(op, spatial, output_size, scale_factors, _LINEAR, align_corners))


@converter("aten::upsample_bicubic2d.vec")
def upsample_bicubic_vec(op, input, output_size, align_corners, scale_factors):
    return _run(op, input, _interpolating(op, 2, output_size, scale_factors, _CUBIC, align_corners))


@converter("aten::upsample_nearest1d.default", "aten::upsample_nearest2d.default", "aten::upsample_nearest3d.default")
def upsample_nearest(op, self, output_size, *scales):
    return _nearest(op, self, op.rank_of(self) - 2, output_size, list(scales) or None)


@converter(
    "aten::upsample_linear1d.default",
    "aten::upsample_bilinear2d.default",
    "aten::upsample_trilinear3d.default",
    "aten::upsample_bicubic2d.default",
)
def upsample_interpolating(op, self, output_size, align_corners, *scales):
    spatial = op.rank_of(self) - 2
    attrs = _CUBIC if "bicubic" in op.node.target._schema.name else _LINEAR
    return _run(op, self, _interpolating(op, spatial, output_size, list(scales) or None, attrs, align_corners))


# ONNX Resize-18's antialias with exclude_outside is torch's antialiased filter (PIL's):
# equal to within 1.5e-6 over down- and upscaling (bilinear, and bicubic with a = -0.5).
_ANTIALIASED = {"antialias": 1, "exclude_outside": 1}
# Static sizes up to this (input x output pixels on each axis) resample by two MatMuls with
# torch's own weights instead: OpenVINO ignores Resize's antialias (docs/runtime_issues.md), and
# MatMuls this small cost no more than Resize in onnxruntime (64 to 16 pixels: 0.01 against 0.02 ms;
# 256 to 224: 1.5 ms against 0.6 ms, 1024 to 224: 25 against 3).
_WEIGHTS_UP_TO = 64 * 64
# An input of static sizes up to this many pixels an axis resized to dynamic sizes does too,
# with the weights computed at run time from the output size.
_WEIGHTS_INPUT_UP_TO = 64


@converter("aten::_upsample_bilinear2d_aa.default", "aten::_upsample_bicubic2d_aa.default", since=18)
def upsample_antialiased(op, self, output_size, align_corners, *scales):
    (height, width), out_sizes = _input_meta(op).shape[-2:], op.output_meta.shape[-2:]
    if statically_known_true(out_sizes[1] == 1) and not statically_known_true(height == out_sizes[0]):
        raise op.unsupported(
            "output_size",
            "one pixel wide",
            "torch's antialiased kernel resamples the height wrongly for an output one pixel wide "
            "(a torch defect: its result on the transposed image differs, up to 0.2 on unit values); "
            "onnxruntime resamples it as torch does the transposed image, so the export would differ from eager",
            hint="transpose the image so the single pixel is its height, or resize without antialias",
        )
    sizes = (height, width, *out_sizes)
    exact = [
        f is None
        or (float(f).is_integer() and statically_known_true(o == n * int(f)))
        or (isinstance(n, int) and isinstance(o, int) and float(f) * n == o)
        for n, o, f in zip((height, width), out_sizes, scales)
    ]
    if all(isinstance(n, int) for n in sizes):
        small = height * out_sizes[0] <= _WEIGHTS_UP_TO and width * out_sizes[1] <= _WEIGHTS_UP_TO
        if small or align_corners or not all(exact):
            rows, columns = _antialiased_weights(
                op.node.target, height, width, out_sizes[0], out_sizes[1], align_corners, scales
            )
            return compute(op, lambda x: _weighted(op, x, rows, columns), [self], op.output_dtype, FLOATS)
    if align_corners:
        raise op.unsupported(
            "align_corners",
            True,
            "onnxruntime's antialiased Resize maps align_corners otherwise than torch (up to 1.1 apart on unit values)",
            hint="use align_corners=False, torchvision's default, or static image sizes",
        )
    if not all(exact):
        # torch maps coordinates by the scale; onnxruntime's antialiased Resize by scales
        # differs from torch's (0.05 on unit values at scale 1.5): only out / in is exported.
        raise op.unsupported(
            "scales",
            list(scales),
            "antialiased resampling of dynamic sizes by scales other than output size / input size",
            hint="pass size= instead of scale_factor=, scale factors that divide the sizes exactly, or static sizes",
        )
    bicubic = "bicubic" in op.node.target._schema.name
    small_input = all(isinstance(n, int) and n <= _WEIGHTS_INPUT_UP_TO for n in (height, width))
    if small_input and not all(isinstance(o, int) for o in out_sizes):
        # A small table resized to the image's dynamic grid (a ViT's position embeddings):
        # torch's weights computed at run time, for OpenVINO. Static sizes past _WEIGHTS_UP_TO
        # keep Resize, as above.
        def weighted(x):
            rows, columns = (
                _antialiased_weights_of_sizes(op, n, o, bicubic, x.dtype) for n, o in zip((height, width), output_size)
            )
            return op.MatMul(rows, op.MatMul(x, op.Transpose(columns, perm=[1, 0])))

        return compute(op, weighted, [self], op.output_dtype, FLOATS)
    attrs = {"mode": "cubic", "cubic_coeff_a": -0.5} if bicubic else {"mode": "linear"}
    return _run(op, self, _interpolating(op, 2, output_size, None, attrs | _ANTIALIASED, False))


def _antialiased_weights_of_sizes(op, n_in, n_out, bicubic, dtype):
    """torch's antialiased resampling of an axis as an ``(out, in)`` matrix, computed in the graph.

    torch's ``_compute_indices_min_size_weights_aa`` (align_corners=False, scale in / out),
    all rows at once: output ``i`` weighs inputs ``j`` in ``[xmin, xmax)`` around its center
    by the filter (triangle or Keys cubic, a = -0.5) widened by the scale when it shrinks,
    normalized to sum 1. Computed in float64, as the static sizes' matrices are.
    """
    f64 = D.DOUBLE
    n_in_f, n_out_f = (op.Cast(op.shape_tensor([n]), to=f64) for n in (n_in, n_out))
    scale = op.Div(n_in_f, n_out_f)
    shrinks = op.GreaterOrEqual(scale, op.constant([1.0], f64))
    half = op.constant([2.0 if bicubic else 1.0], f64)  # half the filter's width at scale 1
    support = op.Where(shrinks, op.Mul(half, scale), half)
    invscale = op.Where(shrinks, op.Reciprocal(scale), op.constant([1.0], f64))
    point_five = op.constant([0.5], f64)

    def positions(n):
        return op.Cast(op.Range(op.constant(0), op.Squeeze(op.shape_tensor([n])), op.constant(1)), to=f64)

    center = op.Unsqueeze(op.Mul(scale, op.Add(positions(n_out), point_five)), op.constant([1]))  # (out, 1)
    j = op.Unsqueeze(positions(n_in), op.constant([0]))  # (1, in)
    xmin = op.Max(op.Floor(op.Add(op.Sub(center, support), point_five)), op.constant([0.0], f64))
    xmax = op.Min(op.Floor(op.Add(op.Add(center, support), point_five)), n_in_f)
    inside = op.And(op.GreaterOrEqual(j, xmin), op.Less(j, xmax))
    t = op.Abs(op.Mul(op.Add(op.Sub(j, center), point_five), invscale))
    weights = op.Where(
        inside, _cubic_filter(op, t) if bicubic else op.Relu(op.Sub(op.constant(1.0, f64), t)), op.constant(0.0, f64)
    )
    total = op.ReduceSum(weights, op.constant([1]), keepdims=1)
    normalized = op.Where(op.Equal(total, op.constant(0.0, f64)), weights, op.Div(weights, total))
    return op.Cast(normalized, to=dtype)


def _cubic_filter(op, t):
    """Keys' cubic with a = -0.5 at ``|x| = t`` (torch's antialiased bicubic, PIL's)."""
    a = -0.5

    def c(v):
        return op.constant(v, D.DOUBLE)

    near = op.Add(op.Mul(op.Mul(op.Sub(op.Mul(c(a + 2), t), c(a + 3)), t), t), c(1.0))
    far = op.Sub(op.Mul(op.Add(op.Mul(op.Sub(op.Mul(c(a), t), c(5 * a)), t), c(8 * a)), t), c(4 * a))
    return op.Where(op.Less(t, c(1.0)), near, op.Where(op.Less(t, c(2.0)), far, c(0.0)))


def _antialiased_weights(kernel, height, width, out_height, out_width, align_corners, scales):
    """torch's antialiased resampling of each axis as a matrix ``(out, in)``, None where it is the identity.

    The filter is separable: ``kernel(x) == rows @ x @ columns.T``. Each matrix is torch's
    kernel run (in float64) on the basis images of its axis, two pixels along the other axis,
    which the kernel copies: align_corners and any scales come out as torch maps them.
    """
    scale_h, scale_w = [*scales, None, None][:2]
    eye_h = torch.eye(height, dtype=torch.float64).reshape(height, 1, height, 1).expand(-1, -1, -1, 2)
    rows = kernel(eye_h.contiguous(), [out_height, 2], align_corners, scale_h, None)[:, 0, :, 0].T.numpy()
    eye_w = torch.eye(width, dtype=torch.float64).reshape(width, 1, 1, width).expand(-1, -1, 2, -1)
    columns = kernel(eye_w.contiguous(), [2, out_width], align_corners, None, scale_w)[:, 0, 0, :].T.numpy()
    return tuple(None if m.shape[0] == m.shape[1] and np.array_equal(m, np.eye(len(m))) else m for m in (rows, columns))


def _weighted(op, x, rows, columns):
    """``rows @ x @ columns.T`` over the last two axes of ``x``."""
    if columns is not None:
        x = op.MatMul(x, op.constant(np.ascontiguousarray(columns.T).astype(x.dtype.numpy())))
    if rows is not None:
        x = op.MatMul(op.constant(rows.astype(x.dtype.numpy())), x)
    return x


# -- pixel (un)shuffle -----------------------------------------------------------------


def _rearrange(op, x, factor, shuffle):
    """torch's pixel_(un)shuffle for any number of batch dims, as Reshape/Transpose/Reshape."""
    rank = op.rank_of(x)
    b = rank - 3
    lead, channels = shape_of(op, x, end=-3), shape_of(op, x, start=-3, end=-2)
    height, width = shape_of(op, x, start=-2, end=-1), shape_of(op, x, start=-1)
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
    # allowzero: every size is spelled out, so a 0 is an empty dim, not "copy the input's".
    return op.Reshape(op.Transpose(op.Reshape(x, split, allowzero=1), perm=perm), merged, allowzero=1)


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


@converter("aten::grid_sampler_2d.default", "aten::grid_sampler.default", since=16)
def grid_sampler(op, input, grid, interpolation_mode, padding_mode, align_corners):
    """ONNX has ``GridSample`` from opset 16 (below it, an export re-traces the program with
    torch's decomposition of grid_sampler_2d: gathers of every corner)."""
    if op.rank_of(input) != 4 and op.opset < 20:
        raise op.unsupported("input", "5-D", "GridSample samples volumes from opset 20 on", since=20)
    # GridSample-20 renamed the modes.
    modes = ("linear", "nearest", "cubic") if op.opset >= 20 else ("bilinear", "nearest", "bicubic")
    attrs = {
        "mode": modes[interpolation_mode],
        "padding_mode": _PADDING[padding_mode],
        "align_corners": int(align_corners),
    }
    # GridSample-16 has no float64 kernel in onnxruntime, and float32 would round the input.
    if op.output_dtype == D.DOUBLE and op.opset < 20:
        raise op.unsupported("input", "float64", "onnxruntime runs GridSample in float64 from opset 20 on", since=20)
    # float16 is sampled in float32: closer to exact than torch's CPU kernel, which rounds the
    # coordinates to float16 (test_float16_grid_sample_is_closer_to_exact_than_torchs).
    kernels = frozenset({D.FLOAT, D.DOUBLE})
    return compute(op, lambda x, g: op.GridSample(x, g, **attrs), [input, grid], op.output_dtype, kernels)


@converter("aten::col2im.default", since=18)
def col2im(op, self, output_size, kernel_size, dilation, padding, stride):
    """ONNX has ``Col2Im`` from opset 18 (below it, an export re-traces the program with
    torch's decomposition of col2im, where it can)."""
    attrs = {"dilations": int_list(dilation, 2), "pads": int_list(padding, 2) * 2, "strides": int_list(stride, 2)}
    image, block = op.shape_tensor(list(output_size)), op.constant(int_list(kernel_size, 2))

    def emit(x):
        if op.rank_of(self) == 2:  # unbatched (C*kh*kw, L)
            zero = op.constant([0])
            return op.Squeeze(op.Col2Im(op.Unsqueeze(x, zero), image, block, **attrs), zero)
        return op.Col2Im(x, image, block, **attrs)

    return compute(op, emit, [self], op.output_dtype, FLOAT32_16)
