"""The pt2onnx plugin: torchvision's operators as ONNX ops, and the detection models' capture preparation.

Entry point ``torchvision``: installing the pack is all an export needs. Each operator
maps to the ONNX op that was made for it (ONNX's detection ops follow the same
Caffe2/Detectron kernels torchvision's do):

==============================  =========================================================
``torchvision::nms``            ``NonMaxSuppression`` (one batch, one class)
``torchvision::roi_align``      ``RoiAlign`` (``half_pixel`` when aligned, else
                                ``output_half_pixel``; opsets 16-21)
``torchvision::roi_pool``       ``MaxRoiPool`` (Fast R-CNN's max pooling; opsets 1-21;
                                declines where the argmax output, for the backward, is read)
``torchvision::ps_roi_align``   ``RoiAlign`` (aligned) over every channel, then each bin's
                                own channel (``Gather`` of the diagonal); opsets 16-21
``torchvision::deform_conv2d``  ``DeformConv`` (opset 19)
==============================  =========================================================

``ps_roi_pool`` (R-FCN's position-sensitive average pooling over integer bins) has no
ONNX op to build on and no converter here yet: an export that meets it stops with the
unsupported-op error. No torchvision model uses it.
"""

from __future__ import annotations

import operator

import torch

from pt2onnx.plugin import CustomOpRegistrar, PreparationRegistrar, hookimpl

from . import patches


def nms(op, dets, scores, iou_threshold):
    """``NonMaxSuppression`` over all the boxes as one class: the kept boxes' indices by decreasing score."""
    boxes = op.Unsqueeze(dets, op.constant([0]))
    class_scores = op.Unsqueeze(scores, op.constant([0, 1]))
    # Every box may be kept: the limit is the number of boxes.
    limit = op.Slice(op.Shape(dets), op.constant([0]), op.constant([1]))
    selected = op.NonMaxSuppression(boxes, class_scores, limit, op.constant([iou_threshold], op.dtype_of(dets)))
    return op.Squeeze(op.Slice(selected, op.constant([2]), op.constant([3]), op.constant([1])), op.constant([1]))


def _split_rois(op, rois):
    """torchvision's ``[K, 5]`` rois (batch index first) as ONNX's boxes ``[K, 4]`` and ``int64`` indices ``[K]``."""
    batch = op.Cast(
        op.Squeeze(op.Slice(rois, op.constant([0]), op.constant([1]), op.constant([1])), op.constant([1])),
        to=op.dtype(torch.int64),
    )
    boxes = op.Slice(rois, op.constant([1]), op.constant([5]), op.constant([1]))
    return boxes, batch


def roi_align(op, input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
    """``RoiAlign`` in average mode; torchvision's adaptive sampling (ratio <= 0) is ONNX's 0."""
    if op.opset >= 22:
        # RoiAlign-22 only widened its types, but onnxruntime (1.32) has no kernel for it.
        raise op.decline(
            f"onnxruntime has no kernel for RoiAlign at opset {op.opset} (RoiAlign-22); export with opset=21"
        )
    boxes, batch = _split_rois(op, rois)
    return op.RoiAlign(
        input,
        boxes,
        batch,
        mode="avg",
        output_height=pooled_height,
        output_width=pooled_width,
        sampling_ratio=max(sampling_ratio, 0),
        spatial_scale=spatial_scale,
        coordinate_transformation_mode="half_pixel" if aligned else "output_half_pixel",
    )


def ps_roi_align(op, input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio):
    """R-FCN's position-sensitive RoIAlign: ``RoiAlign`` (aligned) over every channel, then each bin's own.

    Bin (ph, pw) of output channel c reads input channel ``(c * PH + ph) * PW + pw``: of the
    pooled ``[K, C, PH, PW]``, seen as ``[K, C_out, PH*PW channels x PH*PW bins]``, the
    diagonal. That pools PH*PW times the bins the op needs, but with ONNX's own RoiAlign.
    """
    bins = pooled_height * pooled_width
    pooled = roi_align(op, input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, True)
    by_channel = op.Reshape(pooled, op.constant([0, -1, bins * bins]))
    diagonal = op.Gather(by_channel, op.constant([b * (bins + 1) for b in range(bins)]), axis=2)
    output = op.Reshape(diagonal, op.constant([0, -1, pooled_height, pooled_width]))
    if sampling_ratio <= 0:
        # torchvision divides by its adaptive grid's sample count, 0 for a roi under one bin
        # wide or high (NaN); RoiAlign divides by at least 1.
        corners = op.Sub(
            op.Mul(op.Slice(rois, op.constant([1]), op.constant([5]), op.constant([1])), spatial_scale), 0.5
        )
        sizes = op.Sub(
            op.Slice(corners, op.constant([2]), op.constant([4]), op.constant([1])),
            op.Slice(corners, op.constant([0]), op.constant([2]), op.constant([1])),
        )
        grid = op.Ceil(op.Div(sizes, op.constant([pooled_width, pooled_height], op.dtype_of(rois))))
        zero = op.Equal(grid, 0.0)
        empty = op.Or(op.Gather(zero, op.constant(0), axis=1), op.Gather(zero, op.constant(1), axis=1))
        nan = op.constant(float("nan"), op.dtype_of(input))
        output = op.Where(op.Unsqueeze(empty, op.constant([1, 2, 3])), nan, output)
    # Which input channel each bin read: (c * PH + ph) * PW + pw, the same for every roi.
    channels = op.Squeeze(op.Slice(op.Shape(input), op.constant([1]), op.constant([2])), op.constant([0]))
    mapping = op.Reshape(
        op.Range(op.constant(0), channels, op.constant(1)), op.constant([1, -1, pooled_height, pooled_width])
    )
    channels = op.Cast(op.Expand(mapping, op.Shape(output)), to=op.dtype(torch.int32))
    return output, channels


def roi_pool(op, input, rois, spatial_scale, pooled_height, pooled_width):
    """``MaxRoiPool``: the same Caffe kernel (rounded roi corners, bins clipped to the map, 0 where empty)."""
    reads = {user.args[1] if user.target is operator.getitem else None for user in op.node.users if user.users}
    if reads - {0}:
        raise op.decline(
            "the argmax output of torchvision::roi_pool (the positions its backward needs) has no ONNX "
            "equivalent; read only the pooled output (RoIPool does)"
        )
    if op.opset >= 22:
        # MaxRoiPool-22 only widened its types, but onnxruntime (1.32) has no kernel for it.
        raise op.decline(
            f"onnxruntime has no kernel for MaxRoiPool at opset {op.opset} (MaxRoiPool-22); export with opset=21"
        )
    pooled = op.MaxRoiPool(input, rois, pooled_shape=[pooled_height, pooled_width], spatial_scale=spatial_scale)
    # Nothing reads the argmax (checked above); an int32 value of its shape keeps the node's
    # outputs whole, and the optimizer removes it as dead.
    return pooled, op.Cast(pooled, to=op.dtype(torch.int32))


def deform_conv2d(
    op,
    input,
    weight,
    offset,
    mask,
    bias,
    stride_h,
    stride_w,
    pad_h,
    pad_w,
    dilation_h,
    dilation_w,
    groups,
    offset_groups,
    use_mask,
):
    """``DeformConv``: ONNX took torchvision's layout (offsets as (y, x) pairs per group and tap)."""
    return op.DeformConv(
        input,
        weight,
        offset,
        bias,
        mask if use_mask else None,
        dilations=[dilation_h, dilation_w],
        group=groups,
        offset_group=offset_groups,
        pads=[pad_h, pad_w, pad_h, pad_w],
        strides=[stride_h, stride_w],
    )


@hookimpl
def pt2onnx_register_custom_ops(register: CustomOpRegistrar) -> None:
    register.expand("torchvision::nms", nms, since=11)
    register.expand("torchvision::roi_align", roi_align, since=16)
    register.expand("torchvision::roi_pool", roi_pool, since=1)
    register.expand("torchvision::ps_roi_align", ps_roi_align, since=16)
    register.expand("torchvision::deform_conv2d", deform_conv2d, since=19)


@hookimpl
def pt2onnx_register_capture_preparations(register: PreparationRegistrar) -> None:
    register.patch("torchvision.detection", patches.detection_patch)
