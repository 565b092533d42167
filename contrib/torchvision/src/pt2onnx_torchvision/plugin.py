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
``torchvision::ps_roi_pool``    four ``Gather`` reads per bin of a float64 integral image
                                (``CumSum``): ONNX has no average RoI pooling (opset 11)
``torchvision::deform_conv2d``  ``DeformConv`` (opset 19)
==============================  =========================================================
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
    return output, _channel_mapping(op, input, output, pooled_height, pooled_width)


def _channel_mapping(op, input, output, pooled_height, pooled_width):
    """Which input channel each bin of a position-sensitive pooling read: ``(c * PH + ph) * PW + pw``
    (the second output, for the backward), the same for every roi."""
    mapping = op.Reshape(
        op.Range(op.constant(0), _dim(op, input, 1), op.constant(1)),
        op.constant([1, -1, pooled_height, pooled_width]),
    )
    return op.Cast(op.Expand(mapping, op.Shape(output)), to=op.dtype(torch.int32))


def _dim(op, value, axis):
    """``value``'s size at ``axis``, a scalar INT64."""
    return op.Gather(op.Shape(value), op.constant(axis))


def ps_roi_pool(op, input, rois, spatial_scale, pooled_height, pooled_width):
    """R-FCN's position-sensitive average pooling: sums over whole-pixel bins from an integral image.

    ONNX has no average RoI pooling. Each bin's sum is four reads of the input's 2-D cumulative
    sum (in float64, so the differences lose nothing a float32 sum keeps): bin (ph, pw) of
    output channel c, of input channel ``(c * PH + ph) * PW + pw``. The bins are torchvision's
    CPU kernel's: rounded roi corners, at least 1x1, clipped to the map less its last row and
    column; 0 where empty.
    """
    int64, float64 = op.dtype(torch.int64), op.dtype(torch.float64)
    scaled = op.Mul(op.Slice(rois, op.constant([1]), op.constant([5]), op.constant([1])), spatial_scale)
    corners = op.Mul(op.Sign(scaled), op.Floor(op.Add(op.Abs(scaled), 0.5)))  # C's round: halves away from 0
    starts = op.Slice(corners, op.constant([0]), op.constant([2]), op.constant([1]))  # [K, (x, y)]
    ends = op.Slice(corners, op.constant([2]), op.constant([4]), op.constant([1]))
    bins = op.Div(op.Max(op.Sub(ends, starts), 1.0), op.constant([pooled_width, pooled_height], op.dtype_of(rois)))
    height, width = _dim(op, input, 2), _dim(op, input, 3)

    def edges(axis, count, limit):
        """Each bin's first and end pixel along one axis, ``[K, count]`` INT64, clipped to ``limit - 1``."""
        size = op.Gather(bins, op.constant([axis]), axis=1)  # [K, 1]
        start = op.Cast(op.Gather(starts, op.constant([axis]), axis=1), to=int64)
        lows = op.Floor(op.Mul(size, op.constant(list(range(count)), op.dtype_of(rois))))
        highs = op.Ceil(op.Mul(size, op.constant(list(range(1, count + 1)), op.dtype_of(rois))))
        last = op.Sub(limit, 1)
        return tuple(op.Min(op.Max(op.Add(op.Cast(v, to=int64), start), 0), last) for v in (lows, highs))

    rows, row_ends = (op.Unsqueeze(v, op.constant([1, 3])) for v in edges(1, pooled_height, height))  # [K,1,PH,1]
    cols, col_ends = (op.Unsqueeze(v, op.constant([1, 2])) for v in edges(0, pooled_width, width))  # [K,1,1,PW]

    # integral[n, c, i, j]: the sum of input[n, c, :i, :j], read flat.
    sums = op.CumSum(op.CumSum(op.Cast(input, to=float64), op.constant(2)), op.constant(3))
    integral = op.Reshape(op.Pad(sums, op.constant([0, 0, 1, 1, 0, 0, 0, 0])), op.constant([-1]))
    batch = op.Cast(op.Slice(rois, op.constant([0]), op.constant([1]), op.constant([1])), to=int64)
    channels = _dim(op, input, 1)
    channel = op.Reshape(
        op.Range(op.constant(0), channels, op.constant(1)), op.constant([1, -1, pooled_height, pooled_width])
    )
    plane = op.Add(op.Mul(op.Unsqueeze(batch, op.constant([2, 3])), channels), channel)  # [K, C_out, PH, PW]

    def at(row, col):
        return op.Gather(integral, op.Add(op.Mul(op.Add(op.Mul(plane, op.Add(height, 1)), row), op.Add(width, 1)), col))

    total = op.Add(op.Sub(op.Sub(at(row_ends, col_ends), at(rows, col_ends)), at(row_ends, cols)), at(rows, cols))
    area = op.Mul(op.Sub(row_ends, rows), op.Sub(col_ends, cols))  # [K, 1, PH, PW]
    mean = op.Div(total, op.Cast(op.Max(area, 1), to=float64))
    output = op.Cast(op.Where(op.Greater(area, 0), mean, 0.0), to=op.dtype_of(input))
    return output, _channel_mapping(op, input, output, pooled_height, pooled_width)


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
    register.expand("torchvision::ps_roi_pool", ps_roi_pool, since=11)
    register.expand("torchvision::deform_conv2d", deform_conv2d, since=19)


@hookimpl
def pt2onnx_register_capture_preparations(register: PreparationRegistrar) -> None:
    register.patch("torchvision.detection", patches.detection_patch)
