"""``scan`` -> ``Scan``: carries, stacked outputs, ``dim``, ``reverse``, closures, dynamic shapes."""

from __future__ import annotations

import pytest
import torch
from torch._higher_order_ops.scan import scan

from pt2onnx.testing import assert_exports_like_eager

N = torch.export.Dim("n", min=2, max=64)
MODES = pytest.mark.parametrize("strict", [False, True], ids=["nonstrict", "strict"])


class CumulativeScan(torch.nn.Module):
    """Two carries, two stacked outputs, a closure over ``w`` (lifted to additional_inputs)."""

    def __init__(self, dim: int, reverse: bool) -> None:
        super().__init__()
        self.dim, self.reverse = dim, reverse

    def forward(self, x, w):
        def step(carry, xs):
            total, biggest = carry
            total = total + xs * w
            biggest = torch.maximum(biggest, xs)
            return (total, biggest), (total * 2, biggest - total)

        first = x.select(self.dim, 0).contiguous()
        init = (torch.zeros_like(first), first)
        (total, biggest), (doubled, gap) = scan(step, init, x, dim=self.dim, reverse=self.reverse)
        return total, biggest, doubled, gap


@MODES
@pytest.mark.parametrize("dim, reverse", [(0, False), (1, True)])
def test_scan_carries_outputs_dim_reverse(strict, dim, reverse):
    x = torch.randn(4, 5)
    w = torch.randn(5) if dim == 0 else torch.randn(4)
    assert_exports_like_eager(CumulativeScan(dim, reverse), (x, w), strict=strict, expect_ops=["higher_order::scan"])


@MODES
def test_scan_dynamic_length(strict):
    x, w = torch.randn(6, 3), torch.randn(3)
    assert_exports_like_eager(
        CumulativeScan(0, False),
        (x, w),
        strict=strict,
        dynamic_shapes={"x": {0: N}, "w": None},
        expect_ops=["higher_order::scan"],
        other_inputs=[((torch.randn(2, 3), w), {})],
    )


class RunningProduct(torch.nn.Module):
    """``state = a_t * state + b_t``, as Mamba's selective scan: the slice first, the state second."""

    def forward(self, a, b):
        def step(state, xs):
            a_t, b_t = xs
            state = a_t * state + b_t
            return state, state.clone()

        return scan(step, torch.ones_like(a[0]), (a, b))


def test_scan_body_takes_the_state_first_where_openvino_needs_it():
    a, b = torch.rand(5, 3) + 0.5, torch.randn(5, 3)
    result = assert_exports_like_eager(RunningProduct(), (a, b), expect_ops=["higher_order::scan"])
    (scan_node,) = [n for n in result.model_proto.graph.node if n.op_type == "Scan"]
    body = next(a.g for a in scan_node.attribute if a.name == "body")
    state, slices = body.input[0].name, {i.name for i in body.input[1:]}
    for node in body.node:
        if node.op_type in ("Add", "Mul"):
            assert (node.input[0], node.input[1]) not in {(s, state) for s in slices}, node
    openvino = pytest.importorskip("openvino")
    # OpenVINO 2026.4 computes Mul(a_t, state) as a_t * a_t (docs/runtime_issues.md).
    core = openvino.Core()
    compiled = core.compile_model(core.read_model(result.model_proto.SerializeToString(), b""), "CPU")
    got = compiled({"a": a.numpy(), "b": b.numpy()})
    for output, expected in zip(compiled.outputs, RunningProduct()(a, b)):
        torch.testing.assert_close(torch.from_numpy(got[output]), expected, rtol=1e-5, atol=1e-5)
