"""Python operators on symbolic sizes, through models whose dynamic dims feed arithmetic."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from pt2onnx.testing import assert_exports_like_eager

Dim = torch.export.Dim


def _check(model, sizes, expect_ops, *, opset=None):
    """Export at the first size (dim 0 dynamic), verify at every size."""
    first, *rest = (torch.arange(n * 6, dtype=torch.float32).reshape(n, 6) for n in sizes)
    assert_exports_like_eager(
        model,
        (first,),
        other_inputs=[((x,), {}) for x in rest],
        dynamic_shapes=({0: Dim.DYNAMIC},),
        opset=opset,
        expect_ops=expect_ops,
    )


@given(sizes=st.lists(st.integers(2, 12), min_size=2, max_size=2, unique=True), k=st.integers(2, 3))
def test_int_arithmetic(sizes, k):
    def model(x):
        n = x.shape[0]
        # (n // 2 + n % 2) * k - n, plus n back through a negation.
        total = (n // 2 + n % 2) * k - n - (-n)
        return x.new_zeros(total, 2) + x[: n // 2 + 1].sum()

    _check(model, sizes, ["operator::floordiv", "operator::mod", "operator::mul"])


@pytest.mark.parametrize("opset", [None, 18])
def test_view_half_batch(opset):
    _check(lambda x: x.view(x.shape[0] // 2, -1), [4, 10, 6], ["operator::floordiv"], opset=opset)


@given(sizes=st.lists(st.integers(2, 12), min_size=2, max_size=2, unique=True))
def test_float_arithmetic(sizes):
    def model(x):
        n = x.shape[0]
        half = math.ceil(n / 2) + math.floor(n / 3) + int(math.sqrt(n))
        return x.new_ones(half) * torch.sym_float(n)

    _check(model, sizes, ["operator::truediv", "math::ceil"])


@given(sizes=st.lists(st.integers(2, 12), min_size=2, max_size=2, unique=True))
def test_comparisons_and_logic(sizes):
    def model(x):
        n = x.shape[0]
        flags = [
            n == 4,
            n != 5,
            n < 6,
            n <= 7,
            n > 3,
            n >= 8,
            torch.sym_not(n == 4),
            (n > 3) & (n < 9),
            (n < 3) | (n > 9),
        ]
        bits = torch.stack([torch.scalar_tensor(f, dtype=torch.int64) for f in flags])
        extra = torch.sym_max(n, 5) + torch.sym_min(n, 3) + torch.sym_ite(n > 6, n, n - 1)
        return bits, x.new_ones(extra)

    _check(
        model,
        sizes,
        [
            "operator::eq",
            "operator::ge",
            "torch::sym_max",
            "torch::sym_min",
            "torch::sym_not",
            "torch::sym_ite",
            "operator::and_",
            "operator::or_",
        ],
    )


@given(sizes=st.lists(st.integers(2, 6), min_size=2, max_size=2, unique=True))
def test_pow_sum_getitem(sizes):
    def model(x):
        n = x.shape[0]
        values, indices = x.max(1)  # two outputs, picked by getitem
        return values, indices, x.new_ones(n**2 + torch.sym_sum([n, n, 1]))

    _check(model, sizes, ["operator::pow", "torch::sym_sum", "operator::getitem"])
