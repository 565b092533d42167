"""torchvision's C++ operators as Python CPU kernels, for tests on machines whose torchvision cannot load its own.

The torchvision wheels on the project's test machines are CUDA builds: their ``_C`` library
does not load beside the CPU torch, ``torch.ops.torchvision.*`` is then undefined and
``import torchvision`` itself fails. :func:`install` defines the operators with torchvision's
own schemas and CPU kernels transcribed from its C++ ones (``torchvision/csrc/ops/cpu``), then
imports torchvision, whose fake (meta) kernels then register as they do with ``_C``. A test
helper only: users' torchvision has the real kernels, and no pack imports this.

``./dev.sh`` installs torchvision (and timm, which imports it) into :data:`SITE`, beside
``.venv``, not in it: installed there, its failing import breaks transformers. :func:`install`
puts that folder on the path.

Call it before the first ``import torchvision``::

    from torchvision_ops import install
    torchvision = install()
"""

from __future__ import annotations

import importlib.util
import math
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch

_SCHEMAS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "roi_align": (
        "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
        "SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor"
    ),
    "roi_pool": (
        "roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
        "SymInt pooled_width) -> (Tensor, Tensor)"
    ),
    "ps_roi_align": (
        "ps_roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
        "SymInt pooled_width, int sampling_ratio) -> (Tensor, Tensor)"
    ),
    "ps_roi_pool": (
        "ps_roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
        "SymInt pooled_width) -> (Tensor, Tensor)"
    ),
    "deform_conv2d": (
        "deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, "
        "SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, "
        "SymInt dilation_w, SymInt groups, SymInt offset_groups, bool use_mask) -> Tensor"
    ),
}
# Ops whose fake kernels torchvision registers only when _C loaded (register_meta);
# nms's it registers always (register_fake), so it must not be registered twice.
_META_FROM_TORCHVISION = {
    "roi_align": "meta_roi_align",
    "roi_pool": "meta_roi_pool",
    "ps_roi_align": "meta_ps_roi_align",
    "ps_roi_pool": "meta_ps_roi_pool",
    "deform_conv2d": "meta_deform_conv2d",
}
_LIBRARIES: list[torch.library.Library] = []
#: Where ./dev.sh installs torchvision and timm.
SITE = Path(__file__).resolve().parents[1] / ".venv" / "torchvision-site"


def nms(dets: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """Greedy NMS as ``nms_kernel_impl``: by decreasing score (stable), drop IoU > threshold."""
    if dets.numel() == 0:
        return torch.empty((0,), dtype=torch.long)
    x1, y1, x2, y2 = dets.unbind(1)
    areas = (x2 - x1) * (y2 - y1)
    order = scores.sort(stable=True, descending=True).indices
    suppressed = torch.zeros(dets.size(0), dtype=torch.bool)
    keep = []
    for i in order.tolist():
        if suppressed[i]:
            continue
        keep.append(i)
        w = (torch.minimum(x2[i], x2) - torch.maximum(x1[i], x1)).clamp(min=0)
        h = (torch.minimum(y2[i], y2) - torch.maximum(y1[i], y1)).clamp(min=0)
        inter = w * h
        suppressed |= inter / (areas[i] + areas - inter) > iou_threshold
    return torch.tensor(keep, dtype=torch.long)


def _bilinear(feature: torch.Tensor, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Sample ``feature [k, C, H, W]`` at ``y [k, PH, IY]`` x ``x [k, PW, IX]`` as roi_align's C++.

    Returns ``[k, PH, PW, IY, IX, C]``; samples more than one pixel outside the map are 0.
    """
    height, width = feature.shape[-2:]
    inside = ((y >= -1.0) & (y <= height))[:, :, None, :, None] & ((x >= -1.0) & (x <= width))[:, None, :, None, :]
    y, x = y.clamp(min=0), x.clamp(min=0)
    y_low, x_low = y.long(), x.long()
    y_edge, x_edge = y_low >= height - 1, x_low >= width - 1
    y_high = torch.where(y_edge, height - 1, y_low + 1)
    y_low = torch.where(y_edge, height - 1, y_low)
    y = torch.where(y_edge, y_low.to(y.dtype), y)
    x_high = torch.where(x_edge, width - 1, x_low + 1)
    x_low = torch.where(x_edge, width - 1, x_low)
    x = torch.where(x_edge, x_low.to(x.dtype), x)
    ly, lx = y - y_low, x - x_low
    hy, hx = 1.0 - ly, 1.0 - lx
    rows = torch.arange(feature.size(0))[:, None, None, None, None]

    def at(yi: torch.Tensor, xi: torch.Tensor) -> torch.Tensor:
        return feature[rows, :, yi[:, :, None, :, None], xi[:, None, :, None, :]]

    def weight(wy: torch.Tensor, wx: torch.Tensor) -> torch.Tensor:
        return (wy[:, :, None, :, None] * wx[:, None, :, None, :] * inside)[..., None]

    return (
        weight(hy, hx) * at(y_low, x_low)
        + weight(hy, lx) * at(y_low, x_high)
        + weight(ly, hx) * at(y_high, x_low)
        + weight(ly, lx) * at(y_high, x_high)
    )


def roi_align(
    features: torch.Tensor,
    rois: torch.Tensor,
    spatial_scale: float,
    pooled_height: int,
    pooled_width: int,
    sampling_ratio: int,
    aligned: bool,
) -> torch.Tensor:
    """``roi_align_forward_kernel_impl``: the average of a (per roi adaptive) grid of bilinear samples per bin."""
    channels = features.size(1)
    output = features.new_zeros((rois.size(0), channels, pooled_height, pooled_width))
    offset = 0.5 if aligned else 0.0
    for start in range(0, rois.size(0), 16):
        chunk = rois[start : start + 16]
        feature = features[chunk[:, 0].long()]
        x1, y1, x2, y2 = (chunk[:, 1:] * spatial_scale - offset).unbind(1)
        roi_w, roi_h = x2 - x1, y2 - y1
        if not aligned:
            roi_w, roi_h = roi_w.clamp(min=1.0), roi_h.clamp(min=1.0)
        bin_h, bin_w = roi_h / pooled_height, roi_w / pooled_width
        if sampling_ratio > 0:
            grid_h = torch.full_like(roi_h, sampling_ratio)
            grid_w = torch.full_like(roi_w, sampling_ratio)
        else:
            grid_h, grid_w = torch.ceil(roi_h / pooled_height), torch.ceil(roi_w / pooled_width)
        iy = torch.arange(max(int(grid_h.max()), 1), dtype=features.dtype)
        ix = torch.arange(max(int(grid_w.max()), 1), dtype=features.dtype)
        ph = torch.arange(pooled_height, dtype=features.dtype)
        pw = torch.arange(pooled_width, dtype=features.dtype)
        y = y1[:, None, None] + ph[None, :, None] * bin_h[:, None, None] + (iy + 0.5) * (bin_h / grid_h)[:, None, None]
        x = x1[:, None, None] + pw[None, :, None] * bin_w[:, None, None] + (ix + 0.5) * (bin_w / grid_w)[:, None, None]
        samples = _bilinear(feature, y, x)
        used = (iy[None, :] < grid_h[:, None])[:, None, None, :, None] & (ix[None, :] < grid_w[:, None])[
            :, None, None, None, :
        ]
        total = (samples * used[..., None]).sum((3, 4))  # [k, PH, PW, C]
        count = (grid_h * grid_w).clamp(min=1)
        output[start : start + 16] = total.permute(0, 3, 1, 2) / count[:, None, None, None]
    return output


def _bilinear_one(feature: torch.Tensor, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``bilinear_interpolate`` of ps_roi_align's C++ at each (y, x): ``feature [H, W]``, 0 more than a pixel outside."""
    height, width = feature.shape
    inside = (y >= -1.0) & (y <= height) & (x >= -1.0) & (x <= width)
    y, x = y.clamp(min=0), x.clamp(min=0)
    y_low, x_low = y.long(), x.long()
    y_edge, x_edge = y_low >= height - 1, x_low >= width - 1
    y_low, x_low = torch.where(y_edge, height - 1, y_low), torch.where(x_edge, width - 1, x_low)
    y_high, x_high = torch.where(y_edge, y_low, y_low + 1), torch.where(x_edge, x_low, x_low + 1)
    y, x = torch.where(y_edge, y_low.to(y.dtype), y), torch.where(x_edge, x_low.to(x.dtype), x)
    ly, lx = y - y_low, x - x_low
    hy, hx = 1.0 - ly, 1.0 - lx
    value = (
        hy * hx * feature[y_low, x_low]
        + hy * lx * feature[y_low, x_high]
        + ly * hx * feature[y_high, x_low]
        + ly * lx * feature[y_high, x_high]
    )
    return torch.where(inside, value, 0.0)


def ps_roi_align(
    features: torch.Tensor,
    rois: torch.Tensor,
    spatial_scale: float,
    pooled_height: int,
    pooled_width: int,
    sampling_ratio: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``ps_roi_align_forward_kernel_impl``, loop for loop: bin (ph, pw) of output channel c averages
    a grid of bilinear samples of input channel (c * PH + ph) * PW + pw; an empty grid is 0 / 0."""
    channels_out = features.size(1) // (pooled_height * pooled_width)
    shape = (rois.size(0), channels_out, pooled_height, pooled_width)
    output, mapping = features.new_zeros(shape), torch.zeros(shape, dtype=torch.int32)
    for n, roi in enumerate(rois):
        batch = int(roi[0])
        start_w, start_h, end_w, end_h = (roi[1:] * spatial_scale - 0.5).unbind()
        roi_w, roi_h = end_w - start_w, end_h - start_h
        bin_h, bin_w = roi_h / pooled_height, roi_w / pooled_width
        grid_h = sampling_ratio if sampling_ratio > 0 else int(torch.ceil(roi_h / pooled_height))
        grid_w = sampling_ratio if sampling_ratio > 0 else int(torch.ceil(roi_w / pooled_width))
        count = torch.tensor(float(grid_h * grid_w), dtype=features.dtype)
        c_in = 0
        for c_out in range(channels_out):
            for ph in range(pooled_height):
                for pw in range(pooled_width):
                    iy = torch.arange(max(grid_h, 0), dtype=features.dtype)
                    ix = torch.arange(max(grid_w, 0), dtype=features.dtype)
                    y = ph * bin_h + start_h + (iy + 0.5) * bin_h / grid_h
                    x = pw * bin_w + start_w + (ix + 0.5) * bin_w / grid_w
                    samples = _bilinear_one(features[batch, c_in], y[:, None], x[None, :])
                    output[n, c_out, ph, pw] = samples.sum() / count
                    mapping[n, c_out, ph, pw] = c_in
                    c_in += 1
    return output, mapping


def ps_roi_pool(
    features: torch.Tensor, rois: torch.Tensor, spatial_scale: float, pooled_height: int, pooled_width: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``ps_roi_pool_forward_kernel_impl`` (CPU), loop for loop: bin (ph, pw) of output channel c is the
    mean of input channel (c * PH + ph) * PW + pw over the bin's whole pixels, clipped to the map
    less its last row and column (as the CPU kernel clips, unlike the CUDA one); 0 where empty."""
    height, width = features.shape[-2:]
    channels_out = features.size(1) // (pooled_height * pooled_width)
    shape = (rois.size(0), channels_out, pooled_height, pooled_width)
    output, mapping = features.new_zeros(shape), torch.zeros(shape, dtype=torch.int32)
    for n, roi in enumerate(rois):
        batch = int(roi[0])
        start_w, start_h, end_w, end_h = (_round_half_away(float(v * spatial_scale)) for v in roi[1:])
        bin_h = torch.tensor(max(end_h - start_h, 1), dtype=features.dtype) / pooled_height
        bin_w = torch.tensor(max(end_w - start_w, 1), dtype=features.dtype) / pooled_width
        c_in = 0
        for c_out in range(channels_out):
            for ph in range(pooled_height):
                for pw in range(pooled_width):
                    hstart = min(max(int(torch.floor(ph * bin_h)) + start_h, 0), height - 1)
                    hend = min(max(int(torch.ceil((ph + 1) * bin_h)) + start_h, 0), height - 1)
                    wstart = min(max(int(torch.floor(pw * bin_w)) + start_w, 0), width - 1)
                    wend = min(max(int(torch.ceil((pw + 1) * bin_w)) + start_w, 0), width - 1)
                    if hend > hstart and wend > wstart:
                        area = (hend - hstart) * (wend - wstart)
                        output[n, c_out, ph, pw] = features[batch, c_in, hstart:hend, wstart:wend].sum() / area
                    mapping[n, c_out, ph, pw] = c_in
                    c_in += 1
    return output, mapping


def _round_half_away(value: float) -> int:
    """C's ``round``: halves away from zero (Python's rounds them to even)."""
    return int(math.copysign(math.floor(abs(value) + 0.5), value))


def roi_pool(
    features: torch.Tensor, rois: torch.Tensor, spatial_scale: float, pooled_height: int, pooled_width: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``roi_pool_forward_kernel_impl``: the maximum of each bin of the rounded roi (0 for an empty bin)."""
    height, width = features.shape[-2:]
    output = features.new_zeros((rois.size(0), features.size(1), pooled_height, pooled_width))
    argmax = torch.full(output.shape, -1, dtype=torch.int32)
    for n, roi in enumerate(rois.tolist()):
        batch = int(roi[0])
        # C++'s round: halves away from zero (Python's round takes them to even).
        x1, y1, x2, y2 = (int(math.copysign(math.floor(abs(v * spatial_scale) + 0.5), v)) for v in roi[1:])
        bin_h = max(y2 - y1 + 1, 1) / pooled_height
        bin_w = max(x2 - x1 + 1, 1) / pooled_width
        for ph in range(pooled_height):
            hstart = min(max(math.floor(ph * bin_h) + y1, 0), height)
            hend = min(max(math.ceil((ph + 1) * bin_h) + y1, 0), height)
            for pw in range(pooled_width):
                wstart = min(max(math.floor(pw * bin_w) + x1, 0), width)
                wend = min(max(math.ceil((pw + 1) * bin_w) + x1, 0), width)
                if hend <= hstart or wend <= wstart:
                    continue
                patch = features[batch, :, hstart:hend, wstart:wend].flatten(1)
                best = patch.max(1)
                output[n, :, ph, pw] = best.values
                rows, cols = best.indices // (wend - wstart) + hstart, best.indices % (wend - wstart) + wstart
                argmax[n, :, ph, pw] = (rows * width + cols).int()
    return output, argmax


def deform_conv2d(
    features: torch.Tensor,
    weight: torch.Tensor,
    offset: torch.Tensor,
    mask: torch.Tensor,
    bias: torch.Tensor,
    stride_h: int,
    stride_w: int,
    pad_h: int,
    pad_w: int,
    dilation_h: int,
    dilation_w: int,
    groups: int,
    offset_groups: int,
    use_mask: bool,
) -> torch.Tensor:
    """``deform_conv2d_forward_kernel``: each kernel tap samples the input bilinearly at its offset
    position (0 outside), times its mask, then a grouped convolution of those columns."""
    batch, channels, height, width = features.shape
    out_channels, _, kernel_h, kernel_w = weight.shape
    taps = kernel_h * kernel_w
    out_h = (height + 2 * pad_h - (dilation_h * (kernel_h - 1) + 1)) // stride_h + 1
    out_w = (width + 2 * pad_w - (dilation_w * (kernel_w - 1) + 1)) // stride_w + 1
    shifts = offset.view(batch, offset_groups, taps, 2, out_h, out_w)
    tap_y = (torch.arange(kernel_h) * dilation_h).repeat_interleave(kernel_w).to(features.dtype)
    tap_x = (torch.arange(kernel_w) * dilation_w).repeat(kernel_h).to(features.dtype)
    row = (torch.arange(out_h) * stride_h - pad_h).to(features.dtype)
    col = (torch.arange(out_w) * stride_w - pad_w).to(features.dtype)
    y = row[:, None] + tap_y[:, None, None] + shifts[:, :, :, 0]  # [B, G, K, oh, ow]
    x = col[None, :] + tap_x[:, None, None] + shifts[:, :, :, 1]
    inside = (y > -1) & (y < height) & (x > -1) & (x < width)
    y_low, x_low = y.floor(), x.floor()
    ly, lx = y - y_low, x - x_low
    # One zero row/column around the input: corners at -1 or at height/width read 0, as the C++ does.
    padded = torch.nn.functional.pad(features, (1, 1, 1, 1)).view(batch, offset_groups, -1, height + 2, width + 2)
    b = torch.arange(batch)[:, None, None, None, None]
    g = torch.arange(offset_groups)[None, :, None, None, None]

    def at(yi: torch.Tensor, xi: torch.Tensor) -> torch.Tensor:
        rows = (yi.long() + 1).clamp(0, height + 1)
        cols = (xi.long() + 1).clamp(0, width + 1)
        return padded[b, g, :, rows, cols]  # [B, G, K, oh, ow, C/G]

    sampled = (
        ((1 - ly) * (1 - lx))[..., None] * at(y_low, x_low)
        + ((1 - ly) * lx)[..., None] * at(y_low, x_low + 1)
        + (ly * (1 - lx))[..., None] * at(y_low + 1, x_low)
        + (ly * lx)[..., None] * at(y_low + 1, x_low + 1)
    )
    sampled = sampled * inside[..., None]
    if use_mask:
        sampled = sampled * mask.view(batch, offset_groups, taps, out_h, out_w)[..., None]
    columns = sampled.permute(0, 1, 5, 2, 3, 4).reshape(batch, groups, channels // groups, taps, out_h, out_w)
    kernels = weight.view(groups, out_channels // groups, channels // groups, taps)
    output = torch.einsum("bgckyx,gock->bgoyx", columns, kernels).reshape(batch, out_channels, out_h, out_w)
    return output + bias[None, :, None, None]


def _has_ops() -> bool:
    return True


def _missing(name: str) -> Callable[..., None]:
    def kernel(*args: object) -> None:
        raise NotImplementedError(f"tests/torchvision_ops.py has no CPU kernel for torchvision::{name}")

    return kernel


def _own_operators_load() -> bool:
    """Whether torchvision's ``_C`` library loads here (it registers the real operators if so).

    Asked before ``import torchvision``: defining the stand-ins first would clash with ``_C``'s
    own definitions when it does load. A library that fails to load registers nothing.
    """
    if hasattr(torch.ops.torchvision, "nms"):
        return True
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return False
    library = next(Path(spec.submodule_search_locations[0]).glob("_C.*"), None)
    if library is None:
        return False
    try:
        torch.ops.load_library(str(library))
    except OSError:
        return False
    return True


def install() -> ModuleType:
    """Define ``torch.ops.torchvision`` with CPU kernels (once) and return the imported torchvision."""
    if SITE.is_dir() and str(SITE) not in sys.path:
        sys.path.append(str(SITE))
    if "torchvision" in sys.modules:
        return sys.modules["torchvision"]
    if _own_operators_load():  # nothing to stand in for
        import torchvision

        return torchvision
    library = torch.library.Library("torchvision", "DEF")
    _LIBRARIES.append(library)
    kernels = {
        "nms": nms,
        "roi_align": roi_align,
        "roi_pool": roi_pool,
        "ps_roi_align": ps_roi_align,
        "ps_roi_pool": ps_roi_pool,
        "deform_conv2d": deform_conv2d,
    }
    for name, schema in _SCHEMAS.items():
        library.define(schema)
        library.impl(name, kernels.get(name, _missing(name)), "CPU")
    import torchvision
    import torchvision._meta_registrations as metas
    import torchvision.extension

    # torchvision.ops check this before calling torch.ops.torchvision (and else take slower paths);
    # some imported it by name.
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("torchvision") and hasattr(module, "_has_ops"):
            module._has_ops = _has_ops
    for name, meta in _META_FROM_TORCHVISION.items():
        library.impl(name, getattr(metas, meta), "Meta")
    return torchvision
