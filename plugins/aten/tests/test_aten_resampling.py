"""Resampling against eager: interpolate modes/align_corners/sizes vs scales, pixel (un)shuffle, grid_sample, fold."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from lambda_modules import Variadic as Call
from pt2onnx import export
from pt2onnx.errors import UnsupportedArgumentError
from pt2onnx.testing import assert_exports_like_eager, dtypes, tensors

ATOL = {torch.float16: 2e-2, torch.bfloat16: 1e-1}


def _check(model, args, expect, **options):
    dtype = args[0].dtype
    return assert_exports_like_eager(
        model, args, atol=ATOL.get(dtype), rtol=ATOL.get(dtype), expect_ops=[expect], **options
    )


MODES = {1: ["nearest", "linear"], 2: ["nearest", "bilinear", "bicubic"], 3: ["nearest", "trilinear"]}
# Every (spatial, mode) pair, each a test of its own so that every overload is exported.
SPATIAL_MODES = [(spatial, mode) for spatial, modes in MODES.items() for mode in modes]
OPS = {
    "nearest": "upsample_nearest{}d",
    "linear": "upsample_linear1d",
    "bilinear": "upsample_bilinear2d",
    "bicubic": "upsample_bicubic2d",
    "trilinear": "upsample_trilinear3d",
}


# Interpolating modes weigh neighbours: torch's kernels multiply every tap, also one of
# weight 0 (inf * 0 and NaN * 0 are NaN), onnxruntime's Resize and GridSample skip some, so
# NaN and inf reach other outputs; and they add the weighted taps in another order (near
# the dtype's limit one order overflows, cancelling large values leave rounding errors
# beyond the tolerance). So their inputs are moderate values, zeros and subnormals.
# Nearest only copies: any value.
INTERPOLATED = {"low": -3, "high": 3, "edge_values": ("zero", "subnormal")}
NEAREST_DTYPES = ("float32", "float16", "bfloat16", "float64", "uint8")


@pytest.mark.parametrize(("spatial", "mode"), SPATIAL_MODES)
@given(
    data=st.data(),
    dtype=dtypes(("float32", "float16", "bfloat16")),
    by_scale=st.booleans(),
    align_corners=st.booleans(),
    opset=st.sampled_from([14, 26]),
)
def test_interpolate(spatial, mode, data, dtype, by_scale, align_corners, opset):
    sizes = [data.draw(st.integers(1, 5)) for _ in range(spatial)]
    if mode == "nearest":
        dtype = data.draw(dtypes(NEAREST_DTYPES))
        x = data.draw(tensors((2, 2, *sizes), dtype))
    else:
        x = data.draw(tensors((2, 2, *sizes), dtype, **INTERPOLATED))
    options = {} if mode == "nearest" else {"align_corners": align_corners}
    if by_scale:
        # 1.2 and 2.2 reach torch's 2-d nearest copying (out == in) and halving (out == 2 * in).
        factors = [0.5, 0.7, 1.0, 1.2, 1.5, 2.0, 2.2, 3.0]
        options["scale_factor"] = [data.draw(st.sampled_from(factors)) for _ in range(spatial)]
        if any(int(s * f) == 0 for s, f in zip(sizes, options["scale_factor"])):
            options["scale_factor"] = [2.0] * spatial
    else:
        options["size"] = [data.draw(st.integers(1, 7)) for _ in range(spatial)]
    model = Call(lambda x: F.interpolate(x, mode=mode, **options))
    _check(model, (x,), "aten::" + OPS[mode].format(spatial), opset=opset)


@pytest.mark.parametrize(("spatial", "mode"), SPATIAL_MODES)
@given(data=st.data(), align_corners=st.booleans(), with_scales=st.booleans())
def test_upsample_default_overloads(spatial, mode, data, align_corners, with_scales):
    sizes = [data.draw(st.integers(1, 4)) for _ in range(spatial)]
    x = data.draw(tensors((1, 2, *sizes), torch.float32, **INTERPOLATED))
    factors = [data.draw(st.sampled_from([1, 2, 3])) for _ in range(spatial)]
    scales = [float(f) for f in factors] if with_scales else [None] * spatial
    fn = getattr(torch.ops.aten, OPS[mode].format(spatial)).default

    def upsample(x):
        # The sizes follow from the input's (symbolic) sizes, as in the graphs torch decomposes to.
        out = [x.shape[2 + d] * f for d, f in enumerate(factors)]
        return fn(x, out, *scales) if mode == "nearest" else fn(x, out, align_corners, *scales)

    _check(Call(upsample), (x,), "aten::" + OPS[mode].format(spatial))


@pytest.mark.parametrize("mode", ["nearest", "linear", "linear_align_corners"])
def test_upsample_to_a_fixed_size_by_scale_from_a_dynamic_size(mode):
    # Output size 6 and scale 1.5 from an input of any length: torch maps coordinates by the
    # scale. Nearest gathers torch's indices; Resize cannot map linear by a scale to other sizes.
    ops = torch.ops.aten
    fns = {
        "nearest": lambda x: ops.upsample_nearest1d.default(x, [6], 1.5),
        "linear": lambda x: ops.upsample_linear1d.default(x, [6], False, 1.5),
        "linear_align_corners": lambda x: ops.upsample_linear1d.default(x, [6], True, 1.5),
    }
    length = (({2: torch.export.Dim("length", min=2)},),)
    x = torch.randn(1, 2, 4)
    others = [((torch.randn(1, 2, n),), {}) for n in (2, 3, 7, 12)]
    expect = "aten::upsample_nearest1d" if mode == "nearest" else "aten::upsample_linear1d"
    if mode == "linear":
        with pytest.raises(UnsupportedArgumentError, match="either scales or sizes"):
            _check(Call(fns[mode]), (x,), expect, dynamic_shapes=length)
        return
    _check(Call(fns[mode]), (x,), expect, dynamic_shapes=length, other_inputs=others)


@pytest.mark.parametrize("shuffle", [True, False], ids=["shuffle", "unshuffle"])
def test_pixel_shuffle_on_a_fixed_input(shuffle):
    # test_pixel_shuffle's draws may leave a direction without a witness (empty images): this has one.
    x = torch.randn(1, 4, 2, 3) if shuffle else torch.randn(1, 1, 4, 6)
    fn, expect = (F.pixel_shuffle, "aten::pixel_shuffle") if shuffle else (F.pixel_unshuffle, "aten::pixel_unshuffle")
    assert_exports_like_eager(Call(lambda t: fn(t, 2)), (x,), expect_ops=[expect])


@given(
    data=st.data(),
    dtype=dtypes(("float32", "float16", "float64", "int64")),
    batch_dims=st.integers(0, 2),
    factor=st.integers(1, 3),
    shuffle=st.booleans(),
)
def test_pixel_shuffle(data, dtype, batch_dims, factor, shuffle):
    batch = [data.draw(st.integers(1, 2)) for _ in range(batch_dims)]
    # Empty heights and widths too (a 0 in Reshape's target copies the input's dim unless allowzero).
    c, h, w = data.draw(st.integers(1, 2)), data.draw(st.integers(0, 3)), data.draw(st.integers(0, 3))
    if not shuffle and 0 in (h, w):
        # torch's eager unshuffle returns an empty input unchanged, its meta function (the
        # exported program's shapes) unshuffles it: they agree only for a factor of 1.
        factor = 1
    if shuffle:
        x = data.draw(tensors((*batch, c * factor * factor, h, w), dtype))
        model, expect = Call(lambda x: F.pixel_shuffle(x, factor)), "aten::pixel_shuffle"
    else:
        x = data.draw(tensors((*batch, c, h * factor, w * factor), dtype))
        model, expect = Call(lambda x: F.pixel_unshuffle(x, factor)), "aten::pixel_unshuffle"
    _check(model, (x,), expect)


def test_pixel_unshuffle_of_an_empty_image():
    # Thorough OpInfo: (1, 1, 0, 1) by 1; Reshape's target [1, 1, 0, 1] copied dim 2 (1) for the 0.
    model = Call(lambda x: F.pixel_unshuffle(x, 1))
    _check(model, (torch.randn(1, 1, 0, 1),), "aten::pixel_unshuffle")


@given(
    data=st.data(),
    dtype=dtypes(("float32", "float16", "float64")),
    mode=st.sampled_from(["bilinear", "nearest", "bicubic"]),
    padding_mode=st.sampled_from(["zeros", "border", "reflection"]),
    align_corners=st.booleans(),
    core=st.booleans(),
    opset=st.sampled_from([16, 26]),  # GridSample is ONNX's from opset 16
)
def test_grid_sample(data, dtype, mode, padding_mode, align_corners, core, opset):
    if dtype == torch.float64:
        opset = 26  # GridSample runs float64 from opset 20 on
    if dtype == torch.float16 and mode in ("nearest", "bicubic"):
        # torch computes float16 coordinates partly in float16: one rounded onto a half-pixel
        # boundary picks a neighbouring pixel that a float32 (or float16) kernel does not, and
        # bicubic's weights carry the rounding past float16's tolerance (0.023 against 0.02,
        # seed 3242519060). The export's float16 is checked against the exact result below.
        dtype = torch.float32
    x = data.draw(tensors((2, 2, data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))), dtype, **INTERPOLATED))
    # Coordinates are positions around [-1, 1]: torch turns a NaN, infinite or huge one into
    # a pixel index by a float-to-int conversion C++ leaves undefined (NaN, 0 or an edge pixel).
    grid_shape = (2, data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)), 2)
    grid = data.draw(tensors(grid_shape, dtype, low=-1.2, high=1.2, edge_values=("zero", "subnormal")))
    if core:
        modes = {"bilinear": 0, "nearest": 1, "bicubic": 2}
        pads = {"zeros": 0, "border": 1, "reflection": 2}
        model = Call(lambda x, g: torch.ops.aten.grid_sampler_2d(x, g, modes[mode], pads[padding_mode], align_corners))
        expect = "aten::grid_sampler_2d"
    else:
        model = Call(lambda x, g: F.grid_sample(x, g, mode, padding_mode, align_corners))
        expect = "aten::grid_sampler"
    _check(model, (x, grid), expect, opset=opset)


@given(data=st.data(), dtype=dtypes(("float32", "float16")), batched=st.booleans())
def test_col2im(data, dtype, batched):
    kernel = [data.draw(st.integers(1, 3)) for _ in range(2)]
    dilation = [data.draw(st.integers(1, 2)) for _ in range(2)]
    padding = [data.draw(st.integers(0, 1)) for _ in range(2)]
    stride = [data.draw(st.integers(1, 2)) for _ in range(2)]
    size = [data.draw(st.integers((k - 1) * d + 1, (k - 1) * d + 4)) for k, d in zip(kernel, dilation)]
    blocks = 1
    for s, k, d, p, st_ in zip(size, kernel, dilation, padding, stride):
        blocks *= (s + 2 * p - d * (k - 1) - 1) // st_ + 1
    c = data.draw(st.integers(1, 2))
    # Overlapping blocks are summed, in another order than torch's: moderate values (see INTERPOLATED).
    x = data.draw(tensors(((2,) if batched else ()) + (c * kernel[0] * kernel[1], blocks), dtype, **INTERPOLATED))
    model = Call(lambda x: F.fold(x, size, kernel, dilation, padding, stride))
    _check(model, (x,), "aten::col2im")


@pytest.mark.parametrize(
    ("mode", "padding", "align_corners", "reach", "ours_below", "torchs_above"),
    [
        ("bilinear", "reflection", False, 2.0, 1e-3, 1e-2),
        ("bicubic", "zeros", True, 1.2, 2e-3, 1e-2),  # 9.4e-4 and 1.8e-2
    ],
)
def test_float16_grid_sample_is_closer_to_exact_than_torchs(
    mode, padding, align_corners, reach, ours_below, torchs_above
):
    """torch's CPU kernel computes float16 coordinates in float16; the export, in float32.
    With coordinates out to +-``reach``, torch's result strays beyond float16's tolerance
    from the exact one, the export's does not: OpInfo's grown sample lists it (LATER_FAILURES)."""
    torch.manual_seed(0)
    x, grid = (torch.rand(3, 4, 6, 6) * 4 - 2).half(), (torch.rand(3, 6, 6, 2) * 2 * reach - reach).half()
    model = Call(lambda x, g: F.grid_sample(x, g, mode, padding, align_corners))
    exact = model(x.double(), grid.double())
    exported = export(model, (x, grid)).run(x, grid).double()
    eager = model(x, grid).double()
    assert (exported - exact).abs().max() < ours_below
    assert (eager - exact).abs().max() > torchs_above


def test_grid_sample_in_float64_below_opset_20_names_the_opset_that_runs_it():
    x, grid = torch.randn(1, 1, 3, 3, dtype=torch.float64), torch.rand(1, 2, 2, 2, dtype=torch.float64) * 2 - 1
    model = Call(lambda x, g: F.grid_sample(x, g, align_corners=False))
    with pytest.raises(UnsupportedArgumentError, match="opset>=20"):
        export(model, (x, grid), opset=16)
    _check(model, (x, grid), "aten::grid_sampler", opset=20)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@given(data=st.data(), by_scale=st.booleans())
def test_antialiased_interpolate(mode, data, by_scale):
    # torchvision's Resize(antialias=True): down- and upscaling, by sizes or by scales, of
    # dynamic sizes (one Resize). float32 only: torch has no half kernel, onnxruntime no
    # float64 Resize (a clear error).
    dtype = torch.float32
    # Output width 2 or more: torch's kernel is wrong for outputs one pixel wide (a clear error, below).
    sizes = [data.draw(st.integers(1, 12)), data.draw(st.integers(2, 12))]
    x = data.draw(tensors((2, 2, *sizes), dtype, **INTERPOLATED))
    if by_scale:
        # Factors that give the output sizes exactly (others are a clear error, below).
        factors = [data.draw(st.sampled_from([1.0, 2.0, 3.0])) for _ in range(2)]
        options = {"scale_factor": factors}
    else:
        options = {"size": [data.draw(st.integers(1, 12)), data.draw(st.integers(2, 12))]}
    model = Call(lambda x: F.interpolate(x, mode=mode, antialias=True, **options))
    _check(model, (x,), f"aten::_upsample_{mode}2d_aa", opset=18)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@given(data=st.data(), by_scale=st.booleans(), align_corners=st.booleans(), dtype=dtypes(("float32", "float64")))
def test_antialiased_interpolate_of_static_sizes_weighs_as_torch(mode, data, by_scale, align_corners, dtype):
    # Static sizes resample by two MatMuls with torch's own weights, which OpenVINO runs
    # right (it ignores Resize's antialias): align_corners, any scale and float64 export too.
    sizes = [data.draw(st.integers(1, 12)), data.draw(st.integers(2, 12))]
    x = data.draw(tensors((2, 2, *sizes), dtype, **INTERPOLATED))
    if by_scale:
        factors = [data.draw(st.sampled_from([0.5, 0.7, 1.0, 1.5, 2.0, 3.0])) for _ in range(2)]
        if int(sizes[0] * factors[0]) < 1 or int(sizes[1] * factors[1]) < 2:
            factors = [2.0, 2.0]
        options = {"scale_factor": factors}
    else:
        options = {"size": [data.draw(st.integers(1, 12)), data.draw(st.integers(2, 12))]}
    model = Call(lambda x: F.interpolate(x, mode=mode, antialias=True, align_corners=align_corners, **options))
    result = _check(model, (x,), f"aten::_upsample_{mode}2d_aa", opset=18, dynamic=False)
    assert "Resize" not in {n.op_type for n in result.model.graph}


class _ResizedTable(torch.nn.Module):
    """A ViT's position embeddings: a table of fixed size resized to the input's (dynamic) grid."""

    def __init__(self, table, mode):
        super().__init__()
        self.table, self.mode = torch.nn.Parameter(table), mode

    def forward(self, x):
        grid = (x.shape[-2], x.shape[-1])
        return x + F.interpolate(self.table, size=grid, mode=self.mode, antialias=True)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@given(data=st.data())
def test_a_static_table_resized_to_dynamic_sizes_weighs_as_torch(mode, data):
    # The weights are computed in the graph from the output size, for OpenVINO (which ignores
    # Resize's antialias): checked at the example's grid and at other sizes, down and up.
    # float32 only: torch has no half kernel.
    table_size, grid = (data.draw(st.integers(1, 16)), data.draw(st.integers(2, 16))), data.draw(st.integers(2, 20))
    table = data.draw(tensors((1, 2, *table_size), torch.float32, **INTERPOLATED))
    x = data.draw(tensors((1, 2, grid, data.draw(st.integers(2, 20))), torch.float32, **INTERPOLATED))
    result = _check(_ResizedTable(table, mode), (x,), f"aten::_upsample_{mode}2d_aa", opset=18)
    assert "Resize" not in {n.op_type for n in result.model.graph}


def test_antialiased_downsampling_of_large_static_sizes_keeps_resize():
    # 96 x 64 pixels an axis: past the size where MatMuls cost more than Resize in onnxruntime.
    model = Call(lambda x: F.interpolate(x, size=(64, 64), mode="bilinear", antialias=True))
    result = _check(model, (torch.rand(1, 3, 96, 96),), "aten::_upsample_bilinear2d_aa", opset=18, dynamic=False)
    assert "Resize" in {n.op_type for n in result.model.graph}


def test_antialiased_interpolate_of_dynamic_sizes_with_align_corners_is_a_clear_error():
    model = Call(lambda x: F.interpolate(x, size=(3, 3), mode="bilinear", antialias=True, align_corners=True))
    with pytest.raises(UnsupportedArgumentError, match="align_corners=False"):
        export(model, (torch.randn(1, 2, 8, 8),), dynamic_shapes="auto")


def test_antialiased_resampling_to_one_pixel_wide_is_a_clear_error():
    # torch gives every row the same value here (0.49, 0.49, 0.49 from 0.49 and 0.30);
    # onnxruntime interpolates (0.49, 0.39, 0.30), as torch does on the transposed image.
    model = Call(lambda x: F.interpolate(x, size=(3, 1), mode="bilinear", antialias=True))
    x = torch.tensor([0.4896, 0.2960]).reshape(1, 1, 2, 1)
    assert model(x).flatten().unique().numel() == 1
    with pytest.raises(UnsupportedArgumentError, match="one pixel wide"):
        export(model, (x,))


def test_antialiased_resampling_of_dynamic_sizes_by_inexact_scales_is_a_clear_error():
    # 0.7 of 3 rows is 2.1: torch maps by 0.7, the output has 2 rows.
    model = Call(lambda x: F.interpolate(x, scale_factor=(0.7, 1.5), mode="bilinear", antialias=True))
    with pytest.raises(UnsupportedArgumentError, match="scales other than output size / input size"):
        export(model, (torch.randn(1, 2, 3, 4),), dynamic_shapes="auto")
