"""Creating tensors: arange, full, zeros/ones, *_like, new_*, empty, fill, copy, masked_fill."""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import pt2onnx
from lambda_modules import Binary as Fn2
from lambda_modules import Unary as Fn
from pt2onnx.testing import ALL_DTYPES, assert_exports_like_eager, shapes, tensors

DTYPES = st.sampled_from([getattr(torch, n) for n in ALL_DTYPES])
NUMERIC = st.sampled_from([getattr(torch, n) for n in ALL_DTYPES if n != "bool"])


def _fill_value(dtype, draw):
    if dtype == torch.bool:
        return draw(st.booleans())
    if dtype.is_floating_point:
        return draw(st.sampled_from([0.0, 1.5, -2.25, float("inf")]))
    return draw(st.integers(0, 100))


def test_full_forms_on_a_fixed_input():
    # test_full's draws may leave full_like and new_full without a witness (empty or one-valued inputs).
    model = Fn(lambda t: (torch.full_like(t, 2.5) * t, t.new_full((2, 3), -1.5) + t))
    assert_exports_like_eager(model, (torch.randn(2, 3),), expect_ops=["aten::full_like", "aten::new_full"])


@given(data=st.data(), x=tensors(shapes(max_rank=3, min_side=0, max_side=3), DTYPES), dtype=DTYPES)
def test_full(data, x, dtype):
    value, own_value = _fill_value(dtype, data.draw), _fill_value(x.dtype, data.draw)
    size = data.draw(shapes(max_rank=3, min_side=0, max_side=3))
    model = Fn(
        lambda t: (
            torch.full(size, value, dtype=dtype),
            torch.full_like(t, value, dtype=dtype),
            t.new_full(size, own_value),
        )
    )
    assert_exports_like_eager(model, (x,), expect_ops=["aten::full", "aten::full_like", "aten::new_full"])


@given(data=st.data(), x=tensors(shapes(max_rank=3, min_side=0, max_side=3), DTYPES), dtype=DTYPES)
def test_zeros_and_ones(data, x, dtype):
    size = data.draw(shapes(max_rank=3, min_side=0, max_side=3))
    model = Fn(
        lambda t: (
            torch.zeros(size, dtype=dtype),
            torch.ones(size, dtype=dtype),
            torch.zeros_like(t),
            torch.ones_like(t, dtype=dtype),
            t.new_zeros(size),
            t.new_ones(size, dtype=dtype),
        )
    )
    ops = ["aten::zeros", "aten::ones", "aten::zeros_like", "aten::ones_like", "aten::new_zeros", "aten::new_ones"]
    assert_exports_like_eager(model, (x,), expect_ops=ops)


@given(x=tensors(shapes(max_rank=3, min_side=0, max_side=3), DTYPES))
def test_empty_is_zeros(x):
    # torch leaves empty tensors undefined; the exported model fills them with zeros, so
    # compare after overwriting them with zeros in eager.
    def fn(t):
        return (
            torch.empty(t.shape, dtype=t.dtype).zero_(),
            torch.empty_strided(t.shape, [1] * t.dim(), dtype=t.dtype).zero_(),
            torch.empty_like(t).zero_(),
            t.new_empty(t.shape).zero_(),
        )

    result = assert_exports_like_eager(
        Fn(fn), (x,), expect_ops=["aten::empty", "aten::empty_strided", "aten::new_empty", "aten::empty_like"]
    )
    for out in result.run(x):
        assert not out.any()


@given(data=st.data(), x=tensors(shapes(max_rank=3, min_side=0, max_side=3), DTYPES), dtype=DTYPES)
def test_fill_and_copy(data, x, dtype):
    value = _fill_value(x.dtype, data.draw)
    src = data.draw(tensors(tuple(x.shape[1:]), dtype))
    model = Fn2(
        lambda t, s: (
            t.clone().fill_(value),
            t.clone().fill_(s.flatten()[0] if s.numel() else torch.tensor(value)),
            t.clone().copy_(s),
        )
    )
    assert_exports_like_eager(model, (x, src), expect_ops=["aten::fill.Scalar", "aten::fill.Tensor", "aten::copy"])


@given(data=st.data(), x=tensors(shapes(max_rank=4, min_side=0, max_side=3), DTYPES), tensor_value=st.booleans())
def test_masked_fill(data, x, tensor_value):
    mask_shape = tuple(data.draw(st.sampled_from([1, n])) for n in x.shape)[data.draw(st.integers(0, x.dim())) :]
    mask = data.draw(tensors(mask_shape, torch.bool))
    value = _fill_value(x.dtype, data.draw)
    if tensor_value:
        model = Fn2(lambda t, m: t.masked_fill(m, torch.full((), value, dtype=t.dtype)))
    else:
        model = Fn2(lambda t, m: t.masked_fill(m, value))
    op = "aten::masked_fill.Tensor" if tensor_value else "aten::masked_fill.Scalar"
    assert_exports_like_eager(model, (x, mask), expect_ops=[op])


@pytest.mark.parametrize("tensor_value", [True, False], ids=["tensor", "scalar"])
def test_masked_fill_of_a_filled_tensor(tensor_value):
    # Both overloads converted in every run: the property test above draws many empty inputs,
    # which prove nothing (a seed drew no other for masked_fill.Tensor).
    x, mask = torch.randn(3, 4), torch.tensor([True, False, True, False])
    value = torch.tensor(-2.5) if tensor_value else -2.5
    model = Fn2(lambda t, m: t.masked_fill(m, value))
    op = "aten::masked_fill.Tensor" if tensor_value else "aten::masked_fill.Scalar"
    assert_exports_like_eager(model, (x, mask), expect_ops=[op])


def test_attention_mask_of_dynamic_length():
    seq = torch.export.Dim("seq")
    model = Fn(lambda t: t.masked_fill(torch.ones(t.shape[-1], t.shape[-1], dtype=torch.bool).triu(1), float("-inf")))
    assert_exports_like_eager(
        model,
        (torch.randn(2, 4, 4),),
        dynamic_shapes=({1: seq, 2: seq},),
        other_inputs=[((torch.randn(2, 7, 7),), {})],
        expect_ops=["aten::masked_fill", "aten::ones"],
    )


@given(
    data=st.data(),
    start=st.integers(-5, 5),
    length=st.integers(0, 8),
    step=st.integers(1, 3),
    dtype=st.sampled_from([None, torch.int64, torch.int32, torch.float32, torch.float64, torch.float16]),
    floats=st.booleans(),
)
def test_arange(data, start, length, step, dtype, floats):
    if floats:
        start, step = start + 0.5, step / 2
        dtype = dtype if dtype is None or dtype.is_floating_point else torch.float32
    end = start + length * step
    model = Fn(
        lambda t: (
            torch.arange(start, end, step, dtype=dtype),
            torch.arange(end, start, -step, dtype=dtype),
            torch.arange(start, end, dtype=dtype),
            torch.arange(abs(end), dtype=dtype),
        )
    )
    assert_exports_like_eager(
        model, (torch.zeros(1),), expect_ops=["aten::arange.start_step", "aten::arange.start", "aten::arange.default"]
    )


@given(
    start=st.floats(-6, 6),
    count=st.integers(0, 8),
    # torch's capture refuses a step that truncates to 0 (its CPU kernel runs it for narrow dtypes)
    step=st.floats(-3, 3).filter(lambda s: abs(s) >= 1),
    jitter=st.floats(0, 0.99),
    dtype=st.sampled_from([torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]),
)
def test_integer_arange_with_float_bounds_truncates_them_as_torch(start, count, step, jitter, dtype):
    # XLNet's relative positions: torch.arange(beg, end, -1.0, dtype=torch.int64). torch
    # truncates the bounds; int64 counts from the truncated ones, narrower dtypes from the floats.
    end = start + (count + jitter) * step
    if dtype == torch.uint8:
        start, end, step = abs(start), abs(start) + abs(end - start), abs(step)  # torch refuses negative bounds
    model = Fn(lambda t: torch.arange(start, end, step, dtype=dtype))
    assert_exports_like_eager(model, (torch.zeros(1),), expect_ops=["aten::arange.start_step"])


def test_integer_arange_of_a_dynamic_length_with_a_float_step():
    seq = torch.export.Dim("seq", min=4)  # torch's 0/1 specialization guards the int32 range's length >= 2
    model = Fn(
        lambda t: (
            torch.arange(t.shape[0], -1, -1.0, dtype=torch.int64),
            torch.arange(0.5, t.shape[0], 1.5, dtype=torch.int32),
        )
    )
    assert_exports_like_eager(
        model,
        (torch.randn(5),),
        dynamic_shapes=({0: seq},),
        other_inputs=[((torch.randn(12),), {})],
        expect_ops=["aten::arange.start_step"],
    )


def test_arange_to_a_dynamic_length_at_opset_14():
    seq = torch.export.Dim("seq", min=3)
    model = Fn(lambda t: (torch.arange(t.shape[0]), torch.arange(1, t.shape[0] + 1, 2, dtype=torch.float32)))
    assert_exports_like_eager(
        model,
        (torch.randn(5),),
        dynamic_shapes=({0: seq},),
        other_inputs=[((torch.randn(12),), {})],
        opset=14,
        expect_ops=["aten::arange"],
    )


@given(
    start=st.floats(-100, 100),
    end=st.floats(-100, 100),
    steps=st.integers(0, 60),
    dtype=st.sampled_from(
        [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int8, torch.uint8]
    ),
    tensor_bounds=st.booleans(),
    dynamic_steps=st.booleans(),
)
def test_linspace(start, end, steps, dtype, tensor_bounds, dynamic_steps):
    if dtype == torch.uint8:
        start, end = abs(start), abs(end)  # torch refuses to convert a negative bound to uint8
    if tensor_bounds:
        model = Fn2(lambda a, b: torch.linspace(a, b, steps, dtype=dtype))
        args = (torch.tensor(start), torch.tensor(end))
    elif dynamic_steps and steps >= 2:
        # steps from an input's size: a symbolic length.
        model = Fn2(lambda a, b: torch.linspace(start, end, a.shape[0], dtype=dtype))
        args = (torch.zeros(steps), torch.zeros(1))
    else:
        model = Fn2(lambda a, b: torch.linspace(start, end, steps, dtype=dtype))
        args = (torch.zeros(1), torch.zeros(1))
    # torch's half linspace rounds after each operation, in an order that depends on the
    # CPU's vector width; the export rounds once: they agree within 1.2 units in the last
    # place of the larger bound (measured over 300 draws), 2 allowed.
    atol = (
        2 * torch.finfo(dtype).eps * max(abs(start), abs(end), 1) if dtype in (torch.float16, torch.bfloat16) else None
    )
    assert_exports_like_eager(model, args, atol=atol, expect_ops=["aten::linspace"])


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8])
def test_integer_linspace_counts_from_the_integers_of_its_bounds(dtype):
    # Thorough OpInfo: torch counts 4.3 from 4 (its decomposition from 4.3) and truncates each value.
    model = Fn2(lambda a, b: (torch.linspace(4.3, -3, 50, dtype=dtype), torch.linspace(-3.7, 4.9, 5, dtype=dtype)))
    assert_exports_like_eager(model, (torch.zeros(1), torch.zeros(1)), expect_ops=["aten::linspace"])


def test_integer_linspace_rounds_a_value_on_an_integer_as_torch_does():
    # 1 to -33 in 51 steps: step 25 is -16 exactly, and torch's fused multiply-add gives
    # -15.999999999999998, truncated to -15 (rounded twice: -16.0, -16).
    model = Fn2(lambda a, b: torch.linspace(1, -33, 51, dtype=torch.int64))
    result = assert_exports_like_eager(model, (torch.zeros(1), torch.zeros(1)), expect_ops=["aten::linspace"])
    assert result.run(torch.zeros(1), torch.zeros(1))[25] == -15


class _Linspace(torch.nn.Module):
    def __init__(self, steps, dtype):
        super().__init__()
        self.steps, self.dtype = steps, dtype

    def forward(self, start, end):
        return torch.linspace(start, end, self.steps, dtype=self.dtype)


@pytest.mark.parametrize(
    ("dtype", "draws"), [(torch.int64, 30), (torch.int32, 10), (torch.int16, 10), (torch.int8, 10), (torch.uint8, 10)]
)
def test_integer_linspace_matches_eager_on_random_bounds(dtype, draws):
    # 5% of these differed by one where a value lands on an integer (300 int64 cases: 11)
    # before the export rounded as torch's fused multiply-add does. One export per number
    # of steps, the bounds as inputs; int64 bounds reach 2**40 (exact below 2**53 / steps).
    rng = random.Random(24)
    info = torch.iinfo(dtype)
    for steps in [2, 3, 7, 16, 33, 50, 51, 99, 128, 300]:
        result = pt2onnx.export(_Linspace(steps, dtype), (torch.tensor(0), torch.tensor(10)))
        for _ in range(draws):
            bound = rng.choice([100, 10**4, 2**31, 2**40]) if dtype == torch.int64 else info.max
            low, high = max(info.min, -bound), min(info.max, bound)
            args = (torch.tensor(rng.randint(low, high)), torch.tensor(rng.randint(low, high)))
            expected, got = _Linspace(steps, dtype)(*args), result.run(*args)
            assert torch.equal(got, expected), f"linspace({args[0]}, {args[1]}, {steps}): {got} != {expected}"


def test_linspace_from_a_tensor_and_a_number():
    # The mixed overloads: a 0-d tensor bound beside a Python number.
    model = Fn2(lambda a, b: (torch.linspace(a, 7.5, 9), torch.linspace(-2.0, b, 6)))
    args = (torch.tensor(1.25), torch.tensor(3.0))
    expect = ["aten::linspace.Tensor_Scalar", "aten::linspace.Scalar_Tensor"]
    assert_exports_like_eager(model, args, expect_ops=expect)
