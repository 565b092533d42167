"""Element-wise arithmetic with torch's type promotion, against eager PyTorch through onnxruntime."""

from __future__ import annotations

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from pt2onnx.testing import (
    ALL_DTYPES,
    FLOAT_DTYPES,
    INT_DTYPES,
    assert_exports_like_eager,
    broadcast_shapes,
    dtypes,
    tensors,
)

aten = torch.ops.aten
NUMBER_DTYPES = (*FLOAT_DTYPES, *INT_DTYPES)
scalars = st.one_of(st.integers(-3, 3), st.floats(-3, 3, width=16), st.booleans())


def _accepted(fn, *args):
    """Whether eager torch runs ``fn`` on these arguments (e.g. it refuses bool - bool)."""
    try:
        fn(*args)
    except (RuntimeError, TypeError, ZeroDivisionError):
        return False
    return True


def _float16_holds_the_other(a, b):
    """Beside a float16 operand, the other one's values are exact in float16.

    onnxruntime (1.32) has no float16 kernel for several element-wise ops (Pow, Sub, ...): it
    casts around them to float32 and then merges the model's Cast(int or bfloat16 -> float16)
    with its own Cast(float16 -> float32) into one cast, dropping the rounding to float16 the
    model asks for (an int32 398764591 stays finite where torch and the model make it inf; an
    int16 32767 stays odd where float16 makes it 32768).
    """
    if torch.float16 not in (a.dtype, b.dtype) or a.dtype == b.dtype:
        return True
    other = (b if a.dtype == torch.float16 else a).double()
    rounded = other.to(torch.float16).double()
    return bool(((rounded == other) | (rounded.isnan() & other.isnan())).all())


def _operands(data, shapes_, names, *, nonzero_ints=False):
    a_shape, b_shape = shapes_
    a = data.draw(tensors(a_shape, dtypes(names)))
    b = data.draw(tensors(b_shape, dtypes(names)))
    if nonzero_ints and not b.is_floating_point():
        b = b.masked_fill(b == 0, 1)
    assume(_float16_holds_the_other(a, b))
    return a, b


ARITHMETIC = {"add": torch.add, "sub": torch.sub, "mul": torch.mul}


@pytest.mark.parametrize("name", sorted(ARITHMETIC))
@given(data=st.data(), shapes_=broadcast_shapes(min_side=0))
def test_arithmetic_tensors(name, data, shapes_):
    a, b = _operands(data, shapes_, ALL_DTYPES)
    fn = ARITHMETIC[name]
    assume(_accepted(fn, a, b))
    assert_exports_like_eager(lambda x, y: fn(x, y), (a, b), expect_ops=[f"aten::{name}.Tensor"])


@pytest.mark.parametrize("name", sorted(ARITHMETIC))
@given(x=tensors(dtype=dtypes(ALL_DTYPES)), other=scalars)
def test_arithmetic_scalar(name, x, other):
    fn = getattr(aten, name).Scalar
    assume(_accepted(fn, x, other))
    assert_exports_like_eager(lambda t: fn(t, other), (x,), expect_ops=[f"aten::{name}.Scalar"])


@pytest.mark.parametrize("name", ["add", "sub"])
@given(data=st.data(), shapes_=broadcast_shapes(), alpha=st.sampled_from([2, -1, 0.5]))
def test_arithmetic_alpha(name, data, shapes_, alpha):
    a, b = _operands(data, shapes_, NUMBER_DTYPES)
    if b.dtype == torch.float64:
        # torch fuses a + alpha * b into one multiply-add; no dtype wider than float64 holds
        # alpha * b beyond its range, where inf - 2 * 1.7e308 is inf in torch, NaN unfused.
        b = b.clamp(-torch.finfo(b.dtype).max / 2, torch.finfo(b.dtype).max / 2)
    fn = ARITHMETIC[name]
    assume(_accepted(lambda x, y: fn(x, y, alpha=alpha), a, b))
    assert_exports_like_eager(lambda x, y: fn(x, y, alpha=alpha), (a, b), expect_ops=[f"aten::{name}"])


@given(data=st.data(), shapes_=broadcast_shapes(min_side=0), mode=st.sampled_from([None, "trunc", "floor"]))
def test_div(data, shapes_, mode):
    a, b = _operands(data, shapes_, (*NUMBER_DTYPES, "bool"), nonzero_ints=True)
    if mode == "trunc" and not a.is_floating_point() and a.dtype != torch.bool:
        # torch's truncating division of the dtype's minimum by -1 is a hardware exception
        # (SIGFPE) that kills the process; floor division of it is tested (it wraps).
        a = a.masked_fill(a == torch.iinfo(a.dtype).min, torch.iinfo(a.dtype).min + 1)
    fn = lambda x, y: torch.div(x, y, rounding_mode=mode)  # noqa: E731
    assume(_accepted(fn, a, b))
    assert_exports_like_eager(fn, (a, b), expect_ops=["aten::div"])


@given(
    x=tensors(dtype=dtypes(NUMBER_DTYPES)),
    other=st.sampled_from([2, -3, 0.5, -1.5, 0.1]),
    mode=st.sampled_from([None, "trunc", "floor"]),
)
def test_div_scalar(x, other, mode):
    if mode is None:
        fn = lambda t: aten.div.Scalar(t, other)  # noqa: E731
    else:
        fn = lambda t: aten.div.Scalar_mode(t, other, rounding_mode=mode)  # noqa: E731
    assume(_accepted(fn, x))
    assert_exports_like_eager(fn, (x,), expect_ops=["aten::div"])


@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
def test_div_scalar_of_a_fixed_tensor(mode):
    # Each overload converted in every run: the property test above may draw only inputs a
    # witness cannot tell (empty tensors), which prove nothing.
    x = torch.tensor([-7.5, -3.0, -0.5, 0.0, 2.5, 9.0])
    if mode is None:
        fn = lambda t: aten.div.Scalar(t, -1.5)  # noqa: E731
    else:
        fn = lambda t: aten.div.Scalar_mode(t, -1.5, rounding_mode=mode)  # noqa: E731
    assert_exports_like_eager(fn, (x,), expect_ops=["aten::div"])


@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_an_empty_tensor_by_a_divisor_that_casts_to_zero(mode):
    # Found by test_div (seed 1769192062): int32's minimum, promoted to int8 beside the int8
    # tensor, is 0; torch divides nothing, onnxruntime raised "Integer division by zero".
    a, b = torch.zeros(0, dtype=torch.int8), torch.tensor(-(2**31), dtype=torch.int32)
    assert_exports_like_eager(lambda x, y: torch.div(x, y, rounding_mode=mode), (a, b), expect_ops=["aten::div"])


def test_floor_division_of_floats_rounds_like_torch():
    # floor(1 / 0.1) is 10, but torch (like Python) says 1 // 0.1 == 9.
    x = torch.tensor([1.0, -1.0, 7.5, 0.3], dtype=torch.float64)
    y = torch.tensor([0.1, 0.1, -2.5, 0.1], dtype=torch.float64)
    assert_exports_like_eager(lambda a, b: torch.div(a, b, rounding_mode="floor"), (x, y))


def test_truncating_division_of_bfloat16_truncates_the_rounded_quotient():
    # Thorough OpInfo: -68 / 1.390625 = -48.899 rounds to -49 in bfloat16 before torch
    # truncates it (-48 unrounded); 40 / 0.91015625 = 43.948 to 44.
    x = torch.tensor([-68.0, 40.0, 30.0, 115.0, 7.0], dtype=torch.bfloat16)
    y = torch.tensor([1.390625, 0.91015625, -0.09228515625, -2.5625, 2.0], dtype=torch.bfloat16)
    assert (x.float() / y.float()).trunc().tolist() != torch.div(x, y, rounding_mode="trunc").float().tolist()
    assert_exports_like_eager(lambda a, b: torch.div(a, b, rounding_mode="trunc"), (x, y))


@given(data=st.data(), shapes_=broadcast_shapes(min_side=0), other=st.sampled_from([None, 2, -3, 0.5, -1.5]))
def test_floor_divide(data, shapes_, other):
    # torch.floor_divide (``//`` on tensors) rounds toward negative infinity, as div(rounding_mode="floor").
    a, b = _operands(data, shapes_, NUMBER_DTYPES, nonzero_ints=True)
    args = (a, b) if other is None else (a,)
    fn = torch.floor_divide if other is None else (lambda x: aten.floor_divide.Scalar(x, other))
    assume(_accepted(fn, *args))
    overload = "aten::floor_divide.default" if other is None else "aten::floor_divide.Scalar"
    assert_exports_like_eager(lambda *xs: fn(*xs), args, expect_ops={overload: "aten"})


@pytest.mark.parametrize("other", [2, -3, 0.5, -1.5])
def test_floor_divide_by_a_scalar_on_a_fixed_input(other):
    # test_floor_divide's draws may leave floor_divide.Scalar without a witness (empty or
    # one-valued inputs; seed 404 did at 10 examples): this input has one.
    x = torch.tensor([[7.0, -7.0, 5.5], [3.0, -2.25, 9.0]])
    assert_exports_like_eager(
        lambda t: aten.floor_divide.Scalar(t, other), (x,), expect_ops={"aten::floor_divide.Scalar": "aten"}
    )


@given(data=st.data(), shapes_=broadcast_shapes(min_side=0))
def test_pow_tensors(data, shapes_):
    a_shape, b_shape = shapes_
    a = data.draw(tensors(a_shape, dtypes(NUMBER_DTYPES), low=-3, high=3))
    b = data.draw(tensors(b_shape, dtypes(NUMBER_DTYPES), low=0, high=3))
    assume(_accepted(torch.pow, a, b))
    assume(_float16_holds_the_other(a, b))
    assert_exports_like_eager(lambda x, y: torch.pow(x, y), (a, b), expect_ops=["aten::pow.Tensor_Tensor"])


@given(
    x=tensors(dtype=dtypes(NUMBER_DTYPES), low=0, high=3),
    exponent=st.sampled_from([2, 3, 0, 0.5, -1, 1.5]),
    scalar_base=st.booleans(),
)
def test_pow_scalar(x, exponent, scalar_base):
    def fn(t):
        return torch.pow(abs(exponent) + 1, t) if scalar_base else torch.pow(t, exponent)

    assume(_accepted(fn, x))
    assert_exports_like_eager(fn, (x,), expect_ops=["aten::pow"])


def _quotient_overflows(a, b):
    """Whether a finite ``a / b`` overflows: torch's vectorized float fmod and remainder are
    NaN there while its scalar path (a tensor's tail) is exact, so eager depends on the length."""
    a = torch.as_tensor(a)
    if not (a.is_floating_point() or torch.as_tensor(b).is_floating_point()):
        return False
    wide = torch.float64 if a.dtype == torch.float64 else torch.float32
    a, b = a.to(wide), torch.as_tensor(b).to(wide)
    return bool((torch.isinf(a / b) & torch.isfinite(a) & torch.isfinite(b)).any())


@pytest.mark.parametrize("fn", [torch.remainder, torch.fmod], ids=["remainder", "fmod"])
@given(data=st.data(), shapes_=broadcast_shapes(min_side=0))
def test_remainder_fmod(fn, data, shapes_):
    # Python's sign (remainder: the divisor's) and C's (fmod: the dividend's).
    a, b = _operands(data, shapes_, NUMBER_DTYPES, nonzero_ints=True)
    assume(_accepted(fn, a, b) and not _quotient_overflows(a, b))
    assert_exports_like_eager(lambda x, y: fn(x, y), (a, b), expect_ops=[f"aten::{fn.__name__}"])


@pytest.mark.parametrize("fn", [aten.remainder.Scalar, aten.fmod.Scalar], ids=["remainder", "fmod"])
@given(x=tensors(dtype=dtypes(NUMBER_DTYPES)), other=st.sampled_from([2, -3, 1.5, -0.7]))
def test_remainder_fmod_scalar(fn, x, other):
    assume(_accepted(fn, x, other) and not _quotient_overflows(x, other))
    assert_exports_like_eager(lambda t: fn(t, other), (x,), expect_ops=[fn.name()])


@pytest.mark.parametrize("fn", [torch.maximum, torch.minimum], ids=["maximum", "minimum"])
@given(data=st.data(), shapes_=broadcast_shapes(min_side=0))
def test_maximum_minimum(fn, data, shapes_):
    # NaN on either side gives NaN, as in torch.
    a, b = _operands(data, shapes_, ALL_DTYPES)
    assume(_accepted(fn, a, b))
    assert_exports_like_eager(lambda x, y: fn(x, y), (a, b), expect_ops=[f"aten::{fn.__name__}"])


@given(
    x=tensors(dtype=dtypes(NUMBER_DTYPES)),
    low=st.one_of(st.none(), st.integers(-2, 1), st.floats(-2, 1, width=16)),
    high=st.one_of(st.none(), st.integers(-1, 2), st.floats(-1, 2, width=16)),
)
def test_clamp(x, low, high):
    assume(low is not None or high is not None)
    fn = lambda t: torch.clamp(t, low, high)  # noqa: E731
    assume(_accepted(fn, x))
    assert_exports_like_eager(fn, (x,), expect_ops=["aten::clamp.default"])


@given(data=st.data(), shapes_=broadcast_shapes(3), which=st.sampled_from(["both", "min", "max"]))
def test_clamp_tensor(data, shapes_, which):
    x, low, high = (data.draw(tensors(s, dtypes(NUMBER_DTYPES))) for s in shapes_)
    low, high = (low if which != "max" else None), (high if which != "min" else None)
    fn = lambda t, lo, hi: torch.clamp(t, lo, hi)  # noqa: E731
    assume(_accepted(fn, x, low, high))
    assert_exports_like_eager(fn, (x, low, high), expect_ops=["aten::clamp.Tensor"])


@given(data=st.data(), shapes_=broadcast_shapes(3, min_side=0))
def test_where(data, shapes_):
    condition = data.draw(tensors(shapes_[0], torch.bool))
    a = data.draw(tensors(shapes_[1], dtypes(ALL_DTYPES)))
    b = data.draw(tensors(shapes_[2], dtypes(ALL_DTYPES)))
    assert_exports_like_eager(lambda c, x, y: torch.where(c, x, y), (condition, a, b), expect_ops=["aten::where.self"])


@pytest.mark.parametrize("name", ["add", "mul", "div", "pow", "remainder", "maximum", "where"])
def test_binary_opset14_dynamic(name):
    fns = {
        "add": lambda x, y: x + y * 2,
        "mul": lambda x, y: x * y,
        "div": lambda x, y: torch.div(x, y, rounding_mode="floor"),
        "pow": lambda x, y: x.abs() ** y,
        "remainder": lambda x, y: torch.remainder(x, y),
        "maximum": lambda x, y: torch.maximum(x, y),
        "where": lambda x, y: torch.where(x > 0, x, y),
    }
    batch = torch.export.Dim("batch")
    x, y = torch.randn(4, 3), torch.rand(1, 3) + 0.5
    assert_exports_like_eager(
        fns[name],
        (x, y),
        other_inputs=[((torch.randn(9, 3), y), {})],
        dynamic_shapes=({0: batch}, None),
        opset=14,
        expect_ops=[f"aten::{name}"],
    )


@pytest.mark.parametrize("fn", [torch.maximum, torch.minimum])
def test_a_wider_scalar_tensor_is_rounded_to_the_result_dtype_first(fn):
    # torch casts the 0-d int32 operand to the int16 result dtype (wrapping) before comparing;
    # onnxruntime's Max has no int16 kernel, so the comparison runs in int32 after that cast.
    big, small = torch.tensor(1246203733, dtype=torch.int32), torch.tensor([-1, 5, -30000], dtype=torch.int16)
    assert_exports_like_eager(lambda a, b: fn(a, b), (big, small), expect_ops=[f"aten::{fn.__name__}"], dynamic=False)


def test_integer_pow_below_opset_18_takes_the_odd_bits_by_mod():
    base, exponent = torch.tensor([2, -3, 1, -1, 5]), torch.tensor([3, 5, -2, -3, 0])
    for opset in (14, 18):
        assert_exports_like_eager(lambda x, y: torch.pow(x, y), (base, exponent), opset=opset, expect_ops=["aten::pow"])


@pytest.mark.parametrize("name", ["add", "sub"])
def test_alpha_times_other_beyond_the_dtypes_range_as_torch_rounds_it(name):
    # torch fuses float32 a + alpha * b (thorough profile, seed 777: inf - 2 * 3.4e38 is inf,
    # not NaN). float16/bfloat16 sub of these values differs in onnxruntime, not examined yet.
    big = torch.finfo(torch.float32).max
    a = torch.tensor([float("inf"), -float("inf"), big, 0.0])
    b = torch.tensor([big, -big, big, big / 2])
    fn = ARITHMETIC[name]
    assert_exports_like_eager(lambda x, y: fn(x, y, alpha=2), (a, b), dynamic=False)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", ["add", "sub"])
def test_alpha_times_other_beyond_a_half_dtypes_range_is_inf_before_the_sum(name, dtype):
    # torch rounds alpha * other to float16/bfloat16 first: -inf + 2 * max is NaN, and
    # -max + 2 * (max / 1.5) is inf, where float32 arithmetic would give -inf and a finite value.
    big = torch.finfo(dtype).max
    a = torch.tensor([float("-inf"), -big, big, 1.0, 3.0, float("nan")], dtype=dtype)
    b = torch.tensor([big, big / 1.5, -big / 1.5, big, 1.0, 1.0], dtype=dtype)
    fn = ARITHMETIC[name]
    b = -b if name == "sub" else b
    assert_exports_like_eager(lambda x, y: fn(x, y, alpha=2), (a, b), expect_ops=[f"aten::{name}"])
