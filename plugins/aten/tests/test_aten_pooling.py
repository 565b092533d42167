"""Pooling against eager: kernel/stride/padding/dilation/ceil_mode, torch's indices, adaptive bins."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from lambda_modules import Unary as Call
from pt2onnx.testing import assert_exports_like_eager, dtypes, tensors

# Averages of mixed-sign values: torch adds a window's values in one order, onnxruntime's
# kernels (and the adaptive pooling's mean of per-dim means) in another. Near the dtype's
# limit a partial sum overflows in one order only, and cancelling large values leave a
# rounding error beyond the output's tolerance: averaging tests draw moderate values
# (NaN, inf, zeros and subnormals still, whose sums no order changes).
MODERATE = {"low": -3, "high": 3, "edge_values": ("nan", "inf", "zero", "subnormal")}


@st.composite
def windows(draw, spatial, dilation=True):
    kernel = [draw(st.integers(1, 3)) for _ in range(spatial)]
    stride = draw(st.just([]) | st.lists(st.integers(1, 3), min_size=spatial, max_size=spatial))
    dil = [draw(st.integers(1, 2)) if dilation else 1 for _ in range(spatial)]
    padding = [draw(st.integers(0, k // 2)) for k in kernel]
    sizes = [draw(st.integers((k - 1) * d + 1, (k - 1) * d + 4)) for k, d in zip(kernel, dil)]
    return kernel, stride, padding, dil, sizes, draw(st.booleans())


# Max pooling's exact NaN and -inf cost run time on every input, so the default export
# (nonfinite="onnx") gives onnxruntime's MaxPool there (issue #27): it is checked on finite
# inputs (and the infinities MaxPool with indices keeps), torch's exact form under
# nonfinite="torch" on every edge value.
FINITE = ("zero", "subnormal", "extreme")
INFINITIES = (float("inf"), -float("inf"))
NAN_AND_INFINITIES = (float("nan"), *INFINITIES)


def _distinct(draw, shape, dtype, edges=NAN_AND_INFINITIES):
    # Distinct values (exact in float16 too), so the position of each max is unique, but for
    # some NaN and infinities: torch's index is the window's last NaN, else its first max.
    n = 1
    for s in shape:
        n *= s
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    values = torch.randperm(n, generator=generator).reshape(shape).to(torch.float64) - n / 2
    edges = draw(st.lists(st.sampled_from(edges), max_size=n))
    positions = torch.randperm(n, generator=generator)[: len(edges)]
    values.view(-1)[positions] = torch.tensor(edges, dtype=torch.float64)
    return values.to(dtype)


@given(
    data=st.data(),
    spatial=st.integers(1, 3),
    dtype=dtypes(("float32", "float16", "float64", "bfloat16")),
    nonfinite=st.sampled_from(["onnx", "torch"]),
)
def test_max_pool(data, spatial, dtype, nonfinite):
    kernel, stride, padding, dilation, sizes, ceil_mode = data.draw(windows(spatial))
    # The default form on finite inputs, torch's exact form on every edge value.
    edges = FINITE if nonfinite == "onnx" else True
    x = data.draw(tensors((2, 2, *sizes), dtype, edge_values=edges))
    fn = [F.max_pool1d, F.max_pool2d, F.max_pool3d][spatial - 1]
    model = Call(lambda x: fn(x, kernel, stride, padding, dilation, ceil_mode))
    assert_exports_like_eager(model, (x,), expect_ops=[f"aten::max_pool{spatial}d"], nonfinite=nonfinite)


@pytest.mark.parametrize("spatial", [1, 2, 3])
def test_every_max_pool_overload(spatial):
    # Each converted in every run, whatever test_max_pool draws: at 10 examples a seed may draw
    # no 3-D window (3 of 20 draws were 3-D with seed 444), and nothing else proves max_pool3d.
    fn = [F.max_pool1d, F.max_pool2d, F.max_pool3d][spatial - 1]
    x = torch.randn(2, 3, *[6] * spatial)
    model = Call(lambda t: fn(t, 3, 2, 1))
    assert_exports_like_eager(model, (x,), expect_ops={f"aten::max_pool{spatial}d": "aten"})


@given(
    data=st.data(),
    spatial=st.integers(2, 3),
    dtype=dtypes(("float32", "float16", "float64")),
    unbatched=st.booleans(),
    nonfinite=st.sampled_from(["onnx", "torch"]),
)
def test_max_pool_with_indices(data, spatial, dtype, unbatched, nonfinite):
    kernel, stride, padding, dilation, sizes, ceil_mode = data.draw(windows(spatial))
    # The default form keeps the infinities; only torch's exact form is checked on NaN.
    edges = INFINITIES if nonfinite == "onnx" else NAN_AND_INFINITIES
    x = _distinct(data.draw, (2, 3, *sizes), dtype, edges)
    x = x[0] if unbatched else x
    fn = [F.max_pool2d, F.max_pool3d][spatial - 2]
    model = Call(lambda x: fn(x, kernel, stride, padding, dilation, ceil_mode, return_indices=True))
    assert_exports_like_eager(model, (x,), expect_ops=[f"aten::max_pool{spatial}d_with_indices"], nonfinite=nonfinite)


def _window_of_nan(pool, dtype):
    # One window holding a NaN, where onnxruntime 1.32's kernels give the largest other value:
    # max_pool1d skips a NaN anywhere, MaxPool with indices one that is not first in its window.
    nan = float("nan")
    if pool == "max":
        return Call(lambda t: F.max_pool1d(t, 4)), torch.tensor([[[nan, 1.0, 2.0, 3.0]]], dtype=dtype)
    return Call(lambda t: F.max_pool2d(t, 2, return_indices=True)), torch.tensor(
        [[[[1.0, nan], [3.0, 2.0]]]], dtype=dtype
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)  # bfloat16: pooled in float32
@pytest.mark.parametrize("pool", ["max", "max_with_indices"])
def test_max_pool_is_the_plain_op_by_default_and_the_report_says_where_it_differs(pool, dtype):
    model, x = _window_of_nan(pool, dtype)
    result = assert_exports_like_eager(model, (torch.randn_like(x),))  # finite: exact
    # One MaxPool, no guard: no If, no test for NaN, no second pass (the dynamic sizes' Shape stays).
    ops = [n.op_type for n in result.model.graph]
    assert ops.count("MaxPool") == 1 and not {"If", "IsNaN", "IsInf", "ReduceSum", "Where"} & set(ops), ops
    [deviation] = result.report.nonfinite_deviations
    assert deviation.op == ("aten::max_pool1d.default" if pool == "max" else "aten::max_pool2d_with_indices.default")
    assert deviation.plugin == "aten" and deviation.count == 1
    assert "a window holding a NaN may give the largest of its other values" in deviation.deviation
    assert "## Non-finite deviations" in result.report.to_markdown()

    # The deviation, as the report says: the window's largest other value (and its index).
    expected = model(x)
    got = result.run(x)
    if pool == "max":
        assert torch.isnan(expected).all() and float(got.item()) == 3.0
    else:
        assert torch.isnan(expected[0]).all() and expected[1].item() == 1
        assert float(got[0].item()) == 3.0 and int(got[1].item()) == 2

    exact = assert_exports_like_eager(model, (x,), nonfinite="torch")
    assert exact.report.nonfinite_deviations == []
    assert {"If" if pool == "max" else "IsNaN"} <= {n.op_type for n in exact.model.graph}


@given(
    data=st.data(),
    spatial=st.integers(1, 3),
    dtype=dtypes(("float32", "float16", "bfloat16")),
    count_include_pad=st.booleans(),
)
def test_avg_pool(data, spatial, dtype, count_include_pad):
    kernel, stride, padding, _, sizes, ceil_mode = data.draw(windows(spatial, dilation=False))
    if spatial == 3:
        dtype = torch.float32  # torch's avg_pool3d has no float16/bfloat16 CPU kernel
    x = data.draw(tensors((2, 2, *sizes), dtype, **MODERATE))
    fn = [F.avg_pool1d, F.avg_pool2d, F.avg_pool3d][spatial - 1]
    model = Call(lambda x: fn(x, kernel, stride, padding, ceil_mode, count_include_pad))
    assert_exports_like_eager(model, (x,), expect_ops=[f"aten::avg_pool{spatial}d"])


@given(data=st.data(), spatial=st.integers(2, 3), divisor=st.integers(1, 5))
def test_avg_pool_divisor_override(data, spatial, divisor):
    kernel, stride, padding, _, sizes, ceil_mode = data.draw(windows(spatial, dilation=False))
    x = data.draw(tensors((1, 2, *sizes), torch.float32, **MODERATE))
    fn = [F.avg_pool2d, F.avg_pool3d][spatial - 2]
    model = Call(lambda x: fn(x, kernel, stride, padding, ceil_mode, True, divisor))
    assert_exports_like_eager(model, (x,), expect_ops=[f"aten::avg_pool{spatial}d"])


def test_avg_pool_divisor_override_with_a_partial_ceil_window():
    # The last window of 5 (kernel 2, stride 2, ceil_mode) holds one element: its sum is
    # divided by 3 too, not by the 1 that AveragePool counts.
    model = Call(lambda x: F.avg_pool2d(x, 2, 2, 0, True, True, 3))
    assert_exports_like_eager(model, (torch.randn(1, 1, 5, 5),), expect_ops=["aten::avg_pool2d"])


@pytest.mark.parametrize("pool", ["avg", "max"])
@given(data=st.data(), spatial=st.integers(1, 2))
def test_a_ceil_mode_kernel_longer_than_its_input_pools_the_whole_axis(pool, data, spatial):
    # ALIGN's pooler: a kernel of 2560 over an 18x18 map, one window clipped to the input.
    # The export cuts the kernel to the axis: OpenVINO refuses one longer than its input.
    sizes = [data.draw(st.integers(1, 5)) for _ in range(spatial)]
    kernel = [n + data.draw(st.integers(0, 4)) for n in sizes]
    stride = [k - n + data.draw(st.integers(1, 3)) for k, n in zip(kernel, sizes)]  # one window an axis
    # Max pooling's NaN is onnxruntime's by default (above): finite values for it.
    values = MODERATE if pool == "avg" else {"low": -3, "high": 3, "edge_values": FINITE}
    x = data.draw(tensors((2, 3, *sizes), torch.float32, **values))
    fns = {"avg": [F.avg_pool1d, F.avg_pool2d], "max": [F.max_pool1d, F.max_pool2d]}
    fn = fns[pool][spatial - 1]
    options = {"ceil_mode": True} if pool == "avg" else {"ceil_mode": True, "padding": 0}
    model = Call(lambda x: fn(x, kernel, stride, **options))
    result = assert_exports_like_eager(model, (x,), dynamic=False)
    pools = [n for n in result.model.graph if n.op_type in ("AveragePool", "MaxPool")]
    assert pools and all(k <= n for p in pools for k, n in zip(p.attributes["kernel_shape"].as_ints(), sizes))


@given(data=st.data(), spatial=st.integers(1, 2))
def test_a_dynamic_map_shorter_than_its_ceil_mode_kernel_pools_to_its_mean(data, spatial):
    # ALIGN's pooler with the map dynamic: the program also takes maps longer than the kernel,
    # so the kernel stays; maps that fit in it are pooled to their mean instead (OpenVINO
    # refuses the AveragePool there), longer ones by the AveragePool. Both kinds are checked.
    sizes = [data.draw(st.integers(2, 5)) for _ in range(spatial)]
    kernel = [n + data.draw(st.integers(1, 4)) for n in sizes]
    stride = [k + data.draw(st.integers(0, 2)) for k in kernel]
    x = data.draw(tensors((2, 3, *sizes), torch.float32, **MODERATE))
    fn = [F.avg_pool1d, F.avg_pool2d][spatial - 1]
    model = Call(lambda x: fn(x, kernel, stride, ceil_mode=True))
    within = torch.randn(2, 3, *(k - 1 for k in kernel))
    longer = torch.randn(2, 3, *(2 * s + 1 for s in stride))
    result = assert_exports_like_eager(
        model, (x,), other_inputs=[((within,), {}), ((longer,), {})], expect_ops=[f"aten::avg_pool{spatial}d"]
    )
    assert [n.op_type for n in result.model.graph if n.op_type == "If"] == ["If"]


@given(
    data=st.data(),
    spatial=st.integers(1, 3),
    dtype=dtypes(("float32", "float16", "bfloat16", "float64")),
    core=st.booleans(),
)
def test_adaptive_avg_pool(data, spatial, dtype, core):
    sizes = [data.draw(st.integers(1, 7)) for _ in range(spatial)]
    outputs = [data.draw(st.sampled_from([1, s, max(s // 2, 1), data.draw(st.integers(1, 5))])) for s in sizes]
    x = data.draw(tensors((2, 2, *sizes), dtype, **MODERATE))
    if core and spatial > 1:
        fn = [torch.ops.aten._adaptive_avg_pool2d, torch.ops.aten._adaptive_avg_pool3d][spatial - 2]
        expected = f"aten::_adaptive_avg_pool{spatial}d"
    else:
        fn = [F.adaptive_avg_pool1d, F.adaptive_avg_pool2d, F.adaptive_avg_pool3d][spatial - 1]
        expected = f"aten::adaptive_avg_pool{spatial}d"
    model = Call(lambda x: fn(x, outputs))
    assert_exports_like_eager(model, (x,), expect_ops=[expected])


@pytest.mark.parametrize("spatial, core", [(1, False), (2, False), (3, False), (2, True), (3, True)])
def test_every_adaptive_avg_pool_overload(spatial, core):
    # Each overload converted in every run, whatever the property test above draws (a seed
    # that never drew F.adaptive_avg_pool3d left it unproven).
    if core:
        fn = [torch.ops.aten._adaptive_avg_pool2d, torch.ops.aten._adaptive_avg_pool3d][spatial - 2]
        expected = f"aten::_adaptive_avg_pool{spatial}d"
    else:
        fn = [F.adaptive_avg_pool1d, F.adaptive_avg_pool2d, F.adaptive_avg_pool3d][spatial - 1]
        expected = f"aten::adaptive_avg_pool{spatial}d"
    x = torch.randn(2, 3, *[7] * spatial)
    model = Call(lambda t: fn(t, [3] * spatial))
    assert_exports_like_eager(model, (x,), expect_ops={expected: "aten"})


def test_pooling_at_opset_14():
    model = torch.nn.Sequential(
        torch.nn.MaxPool2d(3, 2, 1, ceil_mode=True),
        torch.nn.AvgPool2d(2, ceil_mode=True),
        torch.nn.AdaptiveAvgPool2d(3),
    )
    assert_exports_like_eager(model, (torch.randn(2, 3, 13, 11),), opset=14)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_max_pool_takes_the_exact_branch_for_every_input_that_needs_it(dtype):
    # nonfinite="torch": one export; inputs whose sum is finite pool once, the others (a NaN, a window of only
    # -inf, a -inf beside +inf, finite values whose sum overflows) take the exact branch.
    big = torch.finfo(dtype).max
    x = torch.arange(32, dtype=dtype).reshape(1, 2, 4, 4)
    cases = {}
    cases["nan"] = x.clone().index_put_(
        (torch.tensor(0), torch.tensor(0), torch.tensor(1), torch.tensor(2)), torch.tensor(float("nan"), dtype=dtype)
    )
    cases["-inf window"] = x.clone()
    cases["-inf window"][0, 1, :2, :2] = float("-inf")
    cases["both infinities"] = cases["-inf window"].clone()
    cases["both infinities"][0, 0, 3, 3] = float("inf")
    cases["overflowing sum"] = torch.full_like(x, big)
    inputs = [((v,), {}) for v in cases.values()]
    model = Call(lambda t: F.max_pool2d(t, 2))
    result = assert_exports_like_eager(model, (x,), other_inputs=inputs, nonfinite="torch")
    assert [n.op_type for n in result.model.graph].count("If") == 1


@pytest.mark.parametrize("opset", [14, 21, 22])
@pytest.mark.parametrize("pool", ["max", "max_with_indices", "avg"])
def test_a_ceil_mode_window_starting_in_the_padding_is_dropped_at_every_opset(pool, opset):
    # Length 2, kernel 1, stride 2: torch and onnxruntime give 1 window; ONNX's shape
    # inference before opset 22 declares 2 (found by the thorough profile at opset 14).
    fn = {
        "max": lambda t: F.max_pool1d(t, 1, 2, ceil_mode=True),
        "max_with_indices": lambda t: F.max_pool2d(t, (1, 1), (2, 2), ceil_mode=True, return_indices=True),
        "avg": lambda t: F.avg_pool1d(t, 1, 2, ceil_mode=True),
    }[pool]
    x = torch.randn(2, 2, 2, 2) if pool == "max_with_indices" else torch.randn(2, 2, 2)
    # Static sizes: the declared shape is the one ONNX's inference got wrong.
    result = assert_exports_like_eager(Call(fn), (x,), opset=opset, dynamic=False)
    assert all(list(output.shape)[-1] == 1 for output in result.model.graph.outputs)
