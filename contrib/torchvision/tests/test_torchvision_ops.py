"""torchvision's operators through onnxruntime against torchvision in eager (conftest.py's CPU kernels)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

import pt2onnx
import pt2onnx_torchvision.plugin
from pt2onnx.errors import ConversionError
from pt2onnx.testing import assert_exports_like_eager

from torchvision.ops import deform_conv2d, nms, ps_roi_align, ps_roi_pool, roi_align, roi_pool  # isort: skip  (after conftest.py's install)

PLUGINS = [pt2onnx_torchvision.plugin]
# RoiAlign-22 and MaxRoiPool-22 (opsets 22+) have no onnxruntime kernel: roi_align and roi_pool export at 16-21.
ROI_ALIGN_OPSETS = [16, 21]


class Nms(torch.nn.Module):
    """nms over boxes built valid in the model (x1 <= x2, y1 <= y2), whatever inputs the witness draws."""

    def __init__(self, iou_threshold: float) -> None:
        super().__init__()
        self.iou_threshold = iou_threshold

    def forward(self, corner: torch.Tensor, size: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        boxes = torch.cat([corner, corner + size.abs()], 1)
        return nms(boxes, scores, self.iou_threshold)


@st.composite
def box_sets(draw):
    """Corners, sizes and scores of 1-60 boxes that overlap often; scores without ties."""
    count = draw(st.integers(1, 60))
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    spread = draw(st.sampled_from([5.0, 50.0, 500.0]))
    corner = torch.rand(count, 2, generator=generator) * spread
    size = torch.rand(count, 2, generator=generator) * spread / 2
    scores = torch.randperm(count, generator=generator).float() / count
    return corner, size, scores


@given(boxes=box_sets(), iou_threshold=st.sampled_from([0.0, 0.3, 0.5, 0.7, 1.0]))
def test_nms_keeps_torchvisions_boxes_in_its_order(boxes, iou_threshold):
    result = assert_exports_like_eager(
        Nms(iou_threshold), boxes, plugins=PLUGINS, expect_ops={"torchvision::nms": "pt2onnx_torchvision.plugin"}
    )
    assert [n.op_type for n in result.model_proto.graph.node].count("NonMaxSuppression") == 1


class Rois(torch.nn.Module):
    """``op(x, rois, *args)``, one of torchvision's RoI poolings, over rois built in the model."""

    def __init__(self, op, *args) -> None:
        super().__init__()
        self.op, self.args = op, args

    def forward(self, x: torch.Tensor, batch: torch.Tensor, corner: torch.Tensor, size: torch.Tensor) -> torch.Tensor:
        # The batch index a valid one and x1 <= x2, y1 <= y2, whatever the witness draws.
        index = batch.abs().remainder(x.shape[0]).floor()
        rois = torch.cat([index, corner, corner + size.abs()], 1)
        return self.op(x, rois, *self.args)


@st.composite
def roi_sets(draw):
    """A feature map and rois inside it, across its edges and beyond them."""
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    batch, channels = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    height, width = draw(st.integers(1, 24)), draw(st.integers(1, 24))
    count = draw(st.integers(1, 12))
    scale = draw(st.sampled_from([1.0, 0.5, 0.25, 1 / 16]))
    x = torch.randn(batch, channels, height, width, generator=generator)
    index = torch.randint(0, batch, (count, 1), generator=generator).float()
    extent = torch.tensor([width, height]) / scale
    corner = (torch.rand(count, 2, generator=generator) * 1.4 - 0.2) * extent
    size = torch.rand(count, 2, generator=generator) * extent * draw(st.sampled_from([0.1, 0.6, 1.2]))
    return x, index, corner, size, scale


@pytest.mark.parametrize("opset", ROI_ALIGN_OPSETS)
@given(
    rois=roi_sets(),
    output_size=st.tuples(st.integers(1, 7), st.integers(1, 7)),
    sampling_ratio=st.sampled_from([-1, 0, 1, 2, 3]),
    aligned=st.booleans(),
)
def test_roi_align_is_torchvisions(opset, rois, output_size, sampling_ratio, aligned):
    *inputs, scale = rois
    assert_exports_like_eager(
        Rois(roi_align, output_size, scale, sampling_ratio, aligned),
        tuple(inputs),
        plugins=PLUGINS,
        opset=opset,
        expect_ops={"torchvision::roi_align": "pt2onnx_torchvision.plugin"},
    )


def test_roi_align_at_an_opset_onnxruntime_cannot_run_says_which_to_take():
    x, index, corner, size = torch.randn(1, 2, 8, 8), torch.zeros(3, 1), torch.rand(3, 2) * 4, torch.rand(3, 2) * 4
    with pytest.raises(ConversionError, match=r"no kernel for RoiAlign at opset 22 .*export with opset=21"):
        pt2onnx.export(Rois(roi_align, (2, 2), 1.0, 0, True), (x, index, corner, size), plugins=PLUGINS, opset=22)


@pytest.mark.parametrize("opset", ROI_ALIGN_OPSETS)
@given(rois=roi_sets(), output_size=st.tuples(st.integers(1, 7), st.integers(1, 7)))
def test_roi_pool_is_torchvisions(opset, rois, output_size):
    *inputs, scale = rois
    assert_exports_like_eager(
        Rois(roi_pool, output_size, scale),
        tuple(inputs),
        plugins=PLUGINS,
        opset=opset,
        expect_ops={"torchvision::roi_pool": "pt2onnx_torchvision.plugin"},
    )


@given(
    rois=roi_sets(),
    output_size=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    sampling_ratio=st.sampled_from([-1, 0, 1, 2]),
    seed=st.integers(0, 2**31 - 1),
)
def test_ps_roi_align_is_torchvisions(rois, output_size, sampling_ratio, seed):
    opset = 21  # its RoiAlign is proven at both ends of 16-21 above
    x, *others, scale = rois
    # Position-sensitive: channels_out x PH x PW input channels, each its own values.
    channels = x.shape[1] * output_size[0] * output_size[1]
    x = torch.randn(x.shape[0], channels, *x.shape[2:], generator=torch.Generator().manual_seed(seed))
    assert_exports_like_eager(
        Rois(ps_roi_align, output_size, scale, sampling_ratio),
        (x, *others),
        plugins=PLUGINS,
        opset=opset,
        expect_ops={"torchvision::ps_roi_align": "pt2onnx_torchvision.plugin"},
    )


def test_ps_roi_align_of_a_roi_under_one_bin_is_nan_as_torchvisions():
    x = torch.randn(1, 8, 6, 6)
    batch, corner = torch.zeros(2, 1), torch.tensor([[1.0, 1.0], [2.0, 2.0]])
    size = torch.tensor([[0.0, 3.0], [3.0, 3.0]])  # the first roi has no width: torchvision's 0 / 0
    result = assert_exports_like_eager(
        Rois(ps_roi_align, (2, 2), 1.0, 0), (x, batch, corner, size), plugins=PLUGINS, opset=21
    )
    assert result.run(x, batch, corner, size)[0].isnan().all()


class PsRoiAlignChannels(torch.nn.Module):
    """Both outputs: the pooled values and the input channel each bin read."""

    def forward(self, x: torch.Tensor, rois: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.ops.torchvision.ps_roi_align(x, rois, 0.5, 2, 3, 2)


def test_ps_roi_aligns_channel_mapping_is_torchvisions():
    rois = torch.tensor([[0.0, 1.0, 2.0, 9.0, 7.0], [1.0, 0.0, 0.0, 4.0, 12.0], [0.0, 3.0, 3.0, 4.0, 5.0]])
    assert_exports_like_eager(PsRoiAlignChannels(), (torch.randn(2, 12, 8, 8), rois), plugins=PLUGINS, opset=21)


@given(rois=roi_sets(), output_size=st.tuples(st.integers(1, 3), st.integers(1, 3)), seed=st.integers(0, 2**31 - 1))
def test_ps_roi_pool_is_torchvisions(rois, output_size, seed):
    x, *others, scale = rois
    channels = x.shape[1] * output_size[0] * output_size[1]
    x = torch.randn(x.shape[0], channels, *x.shape[2:], generator=torch.Generator().manual_seed(seed))
    assert_exports_like_eager(
        Rois(ps_roi_pool, output_size, scale),
        (x, *others),
        plugins=PLUGINS,
        expect_ops={"torchvision::ps_roi_pool": "pt2onnx_torchvision.plugin"},
    )


class PsRoiPoolChannels(torch.nn.Module):
    def forward(self, x: torch.Tensor, rois: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.ops.torchvision.ps_roi_pool(x, rois, 0.5, 3, 2)


def test_ps_roi_pools_bins_and_channel_mapping_are_torchvisions():
    # Corners at .5 after scaling (C's round takes them away from 0), one roi past the map, one inside a pixel.
    rois = torch.tensor([[0.0, 1.0, 3.0, 9.0, 7.0], [1.0, -5.0, 0.0, 40.0, 40.0], [0.0, 3.0, 3.0, 3.4, 3.4]])
    assert_exports_like_eager(PsRoiPoolChannels(), (torch.randn(2, 24, 8, 8), rois), plugins=PLUGINS)


class RoiPoolPositions(torch.nn.Module):
    """Reads roi_pool's argmax, the positions of the maxima (what its backward takes)."""

    def forward(self, x: torch.Tensor, rois: torch.Tensor) -> torch.Tensor:
        return torch.ops.torchvision.roi_pool(x, rois, 1.0, 2, 2)[1]


def test_roi_pools_argmax_output_is_refused_by_name():
    rois = torch.tensor([[0.0, 0.0, 0.0, 4.0, 4.0]])
    with pytest.raises(ConversionError, match="argmax output of torchvision::roi_pool"):
        pt2onnx.export(RoiPoolPositions(), (torch.randn(1, 2, 8, 8), rois), plugins=PLUGINS, opset=21)


class DeformConv(torch.nn.Module):
    def __init__(self, weight, bias, stride, padding, dilation, masked) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(weight)
        self.bias = None if bias is None else torch.nn.Parameter(bias)
        self.options = {"stride": stride, "padding": padding, "dilation": dilation}
        self.masked = masked

    def forward(self, x: torch.Tensor, offset: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return deform_conv2d(x, offset, self.weight, self.bias, mask=mask if self.masked else None, **self.options)


@st.composite
def deform_convs(draw):
    """A deformable convolution of drawn groups, kernel, stride, padding and dilation, with offsets
    that move samples across pixels and off the input."""
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    groups, offset_groups = draw(st.sampled_from([(1, 1), (1, 2), (2, 1), (2, 2)]))
    in_channels, out_channels = 2 * draw(st.integers(1, 3)), 2 * draw(st.integers(1, 2))
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride, padding, dilation = (tuple(draw(st.integers(low, 2)) for _ in "hw") for low in (1, 0, 1))
    height, width = draw(st.integers(4, 10)), draw(st.integers(4, 10))
    out_h = (height + 2 * padding[0] - (dilation[0] * (kernel[0] - 1) + 1)) // stride[0] + 1
    out_w = (width + 2 * padding[1] - (dilation[1] * (kernel[1] - 1) + 1)) // stride[1] + 1
    assume(out_h > 0 and out_w > 0)  # torchvision's kernel refuses an empty output
    taps = kernel[0] * kernel[1]
    x = torch.randn(draw(st.integers(1, 2)), in_channels, height, width, generator=generator)
    spread = draw(st.sampled_from([0.5, 3.0]))
    offset = torch.randn(x.shape[0], 2 * offset_groups * taps, out_h, out_w, generator=generator) * spread
    mask = torch.rand(x.shape[0], offset_groups * taps, out_h, out_w, generator=generator)
    weight = torch.randn(out_channels, in_channels // groups, *kernel, generator=generator)
    bias = torch.randn(out_channels, generator=generator) if draw(st.booleans()) else None
    model = DeformConv(weight, bias, stride, padding, dilation, masked=draw(st.booleans()))
    return model, (x, offset, mask)


@given(case=deform_convs())
def test_deform_conv2d_is_torchvisions(case):
    model, inputs = case
    assert_exports_like_eager(
        model,
        inputs,
        plugins=PLUGINS,
        dynamic=False,
        expect_ops={"torchvision::deform_conv2d": "pt2onnx_torchvision.plugin"},
    )
