"""What torchvision's detection models need around ``torch.export``: their data-dependent Python.

After non-maximum suppression the number of boxes is data: torch.export gives it an
unbacked size, and any Python that turns a size into an ``int`` or branches on it stops
capture (``GuardOnDataDependentSymNode``). torchvision's detection code does that in
four places; while capture runs, each is replaced by code that computes the same values
with tensor ops (the originals are torchvision's, BSD-3-Clause; each replacement says
how it differs):

* ``ops.boxes.batched_nms`` chooses between two algorithms by ``boxes.numel() > 4000``
  and returns early on no boxes: always the coordinate trick here (one ``nms`` over
  boxes offset by class), which the 4000 test picks for small inputs anyway. The two
  keep the same boxes; among equal scores their order may differ.
* ``ops.poolers._multiscale_roi_align`` sizes its result with ``len(rois)``: here it
  pools every level's rois and scatters them back by level, as torchvision's own
  tracing (torch.onnx) path does.
* ``models.detection.roi_heads.paste_masks_in_image`` resizes each mask to its box's
  size in a Python loop (sizes that are data): here every pixel of the image samples
  its box's mask bilinearly, as ``F.interpolate(..., mode="bilinear")`` would.
* ``models.detection.roi_heads.heatmaps_to_keypoints`` resizes each roi's heatmaps to
  the roi's size in a Python loop: here the loop is ``torch.ops.higher_order.map``
  (exported as one ``Scan``), whose body may resize to a size that is data.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

#: Where torchvision's detection models live; a model holding one of them is prepared.
DETECTION_MODULE = "torchvision.models.detection"


def batched_nms(boxes: Tensor, scores: Tensor, idxs: Tensor, iou_threshold: float) -> Tensor:
    """torchvision's ``_batched_nms_coordinate_trick`` without its early return on no boxes.

    The offset is computed from the largest coordinate or 0, whichever is larger: the
    same as torchvision's for boxes clipped to an image, and defined for no boxes.
    """
    from torchvision.ops.boxes import nms

    max_coordinate = torch.cat([boxes.flatten(), boxes.new_zeros(1)]).max()
    offsets = idxs.to(boxes) * (max_coordinate + torch.tensor(1).to(boxes))
    return nms(boxes + offsets[:, None], scores, iou_threshold)


def multiscale_roi_align(
    x_filtered: list[Tensor],
    boxes: list[Tensor],
    output_size: list[int],
    sampling_ratio: int,
    scales: list[float] | None,
    mapper: Any,
) -> Tensor:
    """torchvision's ``_multiscale_roi_align``, merging the levels by scatter as its tracing path does."""
    from torchvision.ops.poolers import _convert_to_roi_format, _onnx_merge_levels
    from torchvision.ops.roi_align import roi_align

    if scales is None or mapper is None:
        raise ValueError("scales and mapper should not be None")
    rois = _convert_to_roi_format(boxes)
    if len(x_filtered) == 1:
        return roi_align(
            x_filtered[0], rois, output_size=output_size, spatial_scale=scales[0], sampling_ratio=sampling_ratio
        )
    levels = mapper(boxes)
    per_level = []
    for level, (feature, scale) in enumerate(zip(x_filtered, scales, strict=True)):
        in_level = torch.where(levels == level)[0]
        pooled = roi_align(
            feature, rois[in_level], output_size=output_size, spatial_scale=scale, sampling_ratio=sampling_ratio
        )
        per_level.append(pooled.to(x_filtered[0].dtype))
    return _onnx_merge_levels(levels, per_level)


def _bilinear_source(size: Tensor, positions: Tensor, input_size: int) -> tuple[Tensor, Tensor, Tensor]:
    """Where ``F.interpolate(bilinear, align_corners=False)`` from ``input_size`` to ``size`` reads output ``positions``.

    ``size [R, 1]``, ``positions [R, P]`` (integers, any range): the lower source index,
    the upper one and the upper one's weight, as ``upsample_bilinear2d``'s CPU kernel.
    """
    scale = input_size / size.to(torch.float32)
    source = ((positions.to(torch.float32) + 0.5) * scale - 0.5).clamp(min=0)
    low = source.to(torch.int64).clamp(max=input_size - 1)
    high = (low + 1).clamp(max=input_size - 1)
    return low, high, source - low


def paste_masks_in_image(masks: Tensor, boxes: Tensor, img_shape: tuple[int, int], padding: int = 1) -> Tensor:
    """torchvision's ``paste_masks_in_image`` for every mask at once (no loop over a data-dependent count)."""
    from torchvision.models.detection.roi_heads import expand_boxes, expand_masks

    masks, scale = expand_masks(masks, padding=padding)
    boxes = expand_boxes(boxes, scale).to(dtype=torch.int64)
    im_h, im_w = img_shape
    side = masks.shape[-1]
    x0, y0, x1, y1 = boxes[:, 0:1], boxes[:, 1:2], boxes[:, 2:3], boxes[:, 3:4]
    width, height = (x1 - x0 + 1).clamp(min=1), (y1 - y0 + 1).clamp(min=1)
    cols = torch.arange(im_w, device=masks.device)[None, :] - x0  # [R, W]: the column in the resized mask
    rows = torch.arange(im_h, device=masks.device)[None, :] - y0  # [R, H]
    x_low, x_high, x_weight = _bilinear_source(width, cols, side)
    y_low, y_high, y_weight = _bilinear_source(height, rows, side)
    inside = ((rows >= 0) & (rows < height))[:, :, None] & ((cols >= 0) & (cols < width))[:, None, :]
    mask = masks[:, 0]
    index = torch.arange(mask.shape[0], device=masks.device)[:, None, None]

    def at(y: Tensor, x: Tensor) -> Tensor:
        return mask[index, y[:, :, None], x[:, None, :]]

    wx, wy = x_weight[:, None, :], y_weight[:, :, None]
    top = (1 - wx) * at(y_low, x_low) + wx * at(y_low, x_high)
    bottom = (1 - wx) * at(y_high, x_low) + wx * at(y_high, x_high)
    pasted = (1 - wy) * top + wy * bottom
    return torch.where(inside, pasted, torch.zeros((), dtype=pasted.dtype))[:, None]


def _roi_keypoints(maps: Tensor, roi: Tensor) -> tuple[Tensor, Tensor]:
    """One roi's keypoints (``[N, 3]``) and their scores (``[N]``), as torchvision's loop body."""
    from torch.nn import functional as F

    num_keypoints = maps.shape[0]
    width, height = (roi[2] - roi[0]).clamp(min=1), (roi[3] - roi[1]).clamp(min=1)
    map_width, map_height = int(width.ceil().item()), int(height.ceil().item())
    torch._check(map_width >= 1)
    torch._check(map_height >= 1)
    roi_map = F.interpolate(maps[:, None], size=(map_height, map_width), mode="bicubic", align_corners=False)
    flat = roi_map.reshape(num_keypoints, -1)
    position = flat.argmax(dim=1)
    x_int = position % map_width
    y_int = torch.div(position - x_int, map_width, rounding_mode="floor")
    x = (x_int.float() + 0.5) * (width / map_width) + roi[0]
    y = (y_int.float() + 0.5) * (height / map_height) + roi[1]
    keypoints = torch.stack([x, y, torch.ones_like(x)], 1)
    return keypoints, flat.gather(1, position[:, None])[:, 0]


def _pair_keypoints(pair: tuple[Tensor, Tensor], *unused: Any) -> tuple[Tensor, Tensor]:
    return _roi_keypoints(*pair)


def heatmaps_to_keypoints(maps: Tensor, rois: Tensor) -> tuple[Tensor, Tensor]:
    """torchvision's ``heatmaps_to_keypoints`` with its loop over rois as ``torch.ops.higher_order.map``.

    Each roi's heatmaps are resized to the roi's own size, a size that is data: inside
    ``map``'s body torch.export allows it, and the export is one ``Scan`` whose body
    resizes to that iteration's size.
    """
    from torch._higher_order_ops.map import map as map_over_rois

    # map refuses to map over nothing (and non-strict capture stops on that test of an unbacked
    # size): one more roi, of size 1, makes the count at least 1; its result is dropped.
    maps = torch.cat([maps, maps.new_zeros((1, *maps.shape[1:]))])
    rois = torch.cat([rois, torch.tensor([[0.0, 0.0, 1.0, 1.0]], dtype=rois.dtype, device=rois.device)])
    keypoints, scores = map_over_rois(_pair_keypoints, (maps, rois))
    return keypoints[:-1], scores[:-1]


def _replacements() -> list[tuple[Any, str, Any]]:
    import torchvision.models.detection.roi_heads as roi_heads
    import torchvision.models.detection.transform as transform
    import torchvision.ops.boxes as boxes
    import torchvision.ops.poolers as poolers

    return [
        (boxes, "batched_nms", batched_nms),
        (poolers, "_multiscale_roi_align", multiscale_roi_align),
        (roi_heads, "paste_masks_in_image", paste_masks_in_image),
        (transform, "paste_masks_in_image", paste_masks_in_image),  # imported there by name
        (roi_heads, "heatmaps_to_keypoints", heatmaps_to_keypoints),
    ]


@contextlib.contextmanager
def _replaced(replacements: list[tuple[Any, str, Any]]) -> Iterator[None]:
    originals = [(module, name, getattr(module, name)) for module, name, _ in replacements]
    try:
        for module, name, replacement in replacements:
            setattr(module, name, replacement)
        yield
    finally:
        for module, name, original in originals:
            setattr(module, name, original)


def detection_patch(model: torch.nn.Module) -> contextlib.AbstractContextManager[None] | None:
    """The detection code's replacements while ``model`` is captured, if it holds a torchvision detector."""
    if DETECTION_MODULE not in sys.modules:
        return None
    if not any(type(module).__module__.startswith(DETECTION_MODULE) for module in model.modules()):
        return None
    return _replaced(_replacements())
