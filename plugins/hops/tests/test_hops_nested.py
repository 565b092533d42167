"""Nested HOPs: cond inside scan, while_loop inside cond, map inside cond; dynamic shapes in bodies."""

from __future__ import annotations

import pytest
import torch
from torch._higher_order_ops.map import map as hop_map
from torch._higher_order_ops.scan import scan
from torch._higher_order_ops.while_loop import while_loop

from pt2onnx.testing import assert_exports_like_eager

N = torch.export.Dim("n", min=2, max=64)
MODES = pytest.mark.parametrize("strict", [False, True], ids=["nonstrict", "strict"])


class CondInScan(torch.nn.Module):
    def forward(self, x):
        def step(carry, row):
            def grow(c, r):
                return c + r

            def shrink(c, r):
                return c * 0.5 - r

            new = torch.cond(row.sum() > 0, grow, shrink, (carry, row))
            return new, new.clone()

        return scan(step, torch.zeros_like(x[0]), x)


class LoopInCond(torch.nn.Module):
    def forward(self, x, steps):
        def doubling(x, steps):
            def cond_fn(i, y):
                return i < steps

            def body_fn(i, y):
                return i + 1, y * 2

            return while_loop(cond_fn, body_fn, (torch.zeros_like(steps), x))[1]

        def negate(x, steps):
            return -x

        return torch.cond(x.sum() > 0, doubling, negate, (x, steps))


class MapInCond(torch.nn.Module):
    def forward(self, xs, y):
        def mapped(xs, y):
            return hop_map(lambda x, y: x * y + x.shape[0], xs, y)

        return torch.cond(xs.shape[0] > 3, mapped, lambda xs, y: xs - y, (xs, y))


@MODES
def test_cond_inside_scan_dynamic_length(strict):
    x = torch.randn(5, 3)
    assert_exports_like_eager(
        CondInScan(),
        (x,),
        strict=strict,
        dynamic_shapes={"x": {0: N}},
        expect_ops=["higher_order::scan", "higher_order::cond"],
        other_inputs=[((torch.randn(2, 3),), {})],
    )


@MODES
def test_while_loop_inside_cond(strict):
    x = torch.rand(2, 3) + 0.1
    assert_exports_like_eager(
        LoopInCond(),
        (x, torch.tensor(3)),
        strict=strict,
        expect_ops=["higher_order::cond", "higher_order::while_loop"],
        other_inputs=[((-x, torch.tensor(2)), {}), ((x, torch.tensor(0)), {})],
    )


@MODES
def test_map_inside_cond_dynamic_shapes_in_bodies(strict):
    xs, y = torch.randn(5, 3), torch.randn(3)
    assert_exports_like_eager(
        MapInCond(),
        (xs, y),
        strict=strict,
        dynamic_shapes={
            "xs": {0: N, 1: torch.export.Dim("m", min=2, max=64)},
            "y": {0: torch.export.Dim("m", min=2, max=64)},
        },
        expect_ops=["higher_order::cond", "higher_order::map_impl"],
        other_inputs=[((torch.randn(2, 4), torch.randn(4)), {}), ((torch.randn(7, 2), torch.randn(2)), {})],
    )


def test_nested_bodies_at_opset_18():
    assert_exports_like_eager(CondInScan(), (torch.randn(4, 3),), opset=18)
    assert_exports_like_eager(LoopInCond(), (torch.rand(2, 3), torch.tensor(2)), opset=18)
