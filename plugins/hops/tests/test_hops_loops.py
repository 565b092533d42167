"""``while_loop`` -> ``Loop``: counters, several carries, additional inputs, dynamic shapes."""

from __future__ import annotations

import pytest
import torch
from torch._higher_order_ops.while_loop import while_loop

from pt2onnx.testing import assert_exports_like_eager

N = torch.export.Dim("n", min=2, max=64)
MODES = pytest.mark.parametrize("strict", [False, True], ids=["nonstrict", "strict"])


class CountDown(torch.nn.Module):
    """Iterates as many times as the input says (data-dependent trip count)."""

    def forward(self, steps, x):
        def cond_fn(i, x):
            return i > 0

        def body_fn(i, x):
            return i - 1, x * 2 + 1

        return while_loop(cond_fn, body_fn, (steps, x))


class WithClosure(torch.nn.Module):
    """The body reads an outer tensor (lifted as an additional input)."""

    def forward(self, x, w):
        def cond_fn(i, acc):
            return acc.sum() < 100

        def body_fn(i, acc):
            return i + 1, acc + w.abs() + 1

        return while_loop(cond_fn, body_fn, (torch.zeros((), dtype=torch.int64), x))


@MODES
def test_while_loop_data_dependent_trip_count(strict):
    x = torch.randn(3, 4)
    assert_exports_like_eager(
        CountDown(),
        (torch.tensor(3), x),
        strict=strict,
        expect_ops=["higher_order::while_loop"],
        other_inputs=[((torch.tensor(0), x), {}), ((torch.tensor(5), x), {})],
    )


@MODES
def test_while_loop_additional_inputs_dynamic_shape(strict):
    x, w = torch.randn(5, 3), torch.randn(5, 3)
    assert_exports_like_eager(
        WithClosure(),
        (x, w),
        strict=strict,
        dynamic_shapes={"x": {0: N}, "w": {0: N}},
        expect_ops=["higher_order::while_loop"],
        other_inputs=[((torch.randn(2, 3), torch.randn(2, 3)), {})],
    )
