"""Padding: constant_pad_nd, reflection_pad*, replication_pad*, pad."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given
from hypothesis import strategies as st

from lambda_modules import Unary as Fn
from pt2onnx.testing import ALL_DTYPES, FLOAT_DTYPES, assert_exports_like_eager, shapes, tensors

DTYPES = st.sampled_from([getattr(torch, n) for n in ALL_DTYPES])


@given(data=st.data(), x=tensors(shapes(min_rank=1, max_rank=4, max_side=3), DTYPES))
def test_constant_pad_nd(data, x):
    pairs = data.draw(st.integers(1, x.dim()))
    pad = []
    for d in range(pairs):
        n = x.shape[x.dim() - 1 - d]
        # Negative pads crop, but never more than the dim has.
        begin = data.draw(st.integers(-n // 2, 2))
        pad += [begin, data.draw(st.integers(-(n + min(begin, 0)) // 2, 2))]
    value = data.draw(st.sampled_from([0, 1, -2.5]))
    value = value if x.dtype.is_floating_point else abs(int(value)) if x.dtype != torch.bool else bool(value)
    model = Fn(lambda t: torch.constant_pad_nd(t, pad, value))
    assert_exports_like_eager(model, (x,), expect_ops=["aten::constant_pad_nd"])


# Each (mode, k) is its own test, not a draw: drawn, a seed could leave one op untried (seed
# 2522411036 drew no 2-D pad in 30 examples, and the suite's prover failed).
@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("mode", ["reflection", "replication"])
@given(data=st.data())
def test_reflection_and_replication_pads(data, k, mode):
    batch = data.draw(st.sampled_from([(2,), (1, 2)]))
    shape = batch + tuple(data.draw(st.lists(st.integers(2, 4), min_size=k, max_size=k)))
    x = data.draw(tensors(shape, st.sampled_from([getattr(torch, n) for n in FLOAT_DTYPES])))
    pad = [data.draw(st.integers(0, shape[len(shape) - 1 - i // 2] - 1)) for i in range(2 * k)]
    fn = getattr(torch.ops.aten, f"{mode}_pad{k}d")
    assert_exports_like_eager(Fn(lambda t: fn(t, pad)), (x,), expect_ops=[f"aten::{mode}_pad{k}d"])


@given(data=st.data(), mode=st.sampled_from(["constant", "reflect", "replicate", "circular"]))
def test_pad(data, mode):
    x = data.draw(tensors(shapes(min_rank=3, max_rank=3, min_side=2, max_side=4), st.sampled_from([torch.float32])))
    pad = [data.draw(st.integers(0, 1)) for _ in range(2)]
    kwargs = {"value": 1.5} if mode == "constant" else {}
    model = Fn(lambda t: F.pad(t, pad, mode=mode, **kwargs))
    assert_exports_like_eager(model, (x,), expect_ops=["aten::pad"])


@given(data=st.data(), k=st.integers(1, 3), x_dtype=DTYPES)
def test_replication_pad_that_crops(data, k, x_dtype):
    # Negative pads crop; where the crop leaves nothing of a dim, torch replicates its
    # edge element still (width 4 padded by (-4, 5): five copies of the last element).
    batch = data.draw(st.sampled_from([(2,), (1, 2)]))
    shape = batch + tuple(data.draw(st.lists(st.integers(1, 4), min_size=k, max_size=k)))
    x = data.draw(tensors(shape, x_dtype))
    pad = []
    for i in range(k):
        n = shape[-1 - i]
        begin = data.draw(st.integers(-n - 1, 3))
        pad += [begin, data.draw(st.integers(-n - 1, 3))]
        assume(n + pad[-2] + pad[-1] > 0)  # torch refuses an empty output
    model = Fn(lambda t: F.pad(t, pad, mode="replicate"))
    try:
        model(x)
    except RuntimeError:
        assume(False)  # a crop torch's kernel refuses for this rank
    assert_exports_like_eager(model, (x,), expect_ops=["aten::pad"])


def test_replication_pad_whose_crop_leaves_nothing():
    x = torch.arange(8.0).reshape(1, 2, 4)
    assert_exports_like_eager(Fn(lambda t: F.pad(t, (-4, 5), mode="replicate")), (x,), expect_ops=["aten::pad"])


@pytest.mark.parametrize("opset", [None, 14])
@given(data=st.data())
def test_circular_pad_crops_then_wraps(opset, data):
    # Slice and Concat, so any opset; negative pads crop before the other side wraps, as in
    # torch; an empty batch stays empty (onnxruntime's Pad "wrap" fails on it).
    x = data.draw(tensors(shapes(min_rank=3, max_rank=4, min_side=3, max_side=5), "float32"))
    x = x[: data.draw(st.integers(0, x.shape[0]))]
    dims = data.draw(st.integers(max(x.dim() - 2, 1), x.dim() - 1))
    pad = [data.draw(st.integers(-2, 2)) for _ in range(2 * dims)]
    # torch wraps around at most once: a pad larger than what the crop leaves is refused
    # (or, for some ranks, reads overlapping memory).
    for i in range(dims):
        begin, end = pad[2 * i], pad[2 * i + 1]
        left = x.shape[-1 - i] - max(-begin, 0) - max(-end, 0)
        assume(left > 0 and max(begin, end) <= left)
    model = Fn(lambda t: F.pad(t, pad, mode="circular"))
    assert_exports_like_eager(model, (x,), opset=opset, expect_ops=["aten::pad"], dynamic=x.shape[0] > 1)


def test_padding_of_dynamic_sizes_at_opset_14():
    seq = torch.export.Dim("seq", min=3)
    model = Fn(lambda t: F.pad(F.pad(t, [1, 2], mode="reflect"), [2, 0, 0, 1], value=-1.0))
    assert_exports_like_eager(
        model,
        (torch.randn(1, 2, 4),),
        dynamic_shapes=({2: seq},),
        other_inputs=[((torch.randn(1, 2, 9),), {})],
        opset=14,
        expect_ops=["aten::pad"],
    )
