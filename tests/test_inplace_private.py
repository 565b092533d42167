"""In-place ops on private intermediates are made functional without a re-trace; others are not."""

from __future__ import annotations

import torch

import pt2onnx


def test_inplace_on_intermediate_is_translated_without_retrace():
    class Residual(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(6, 6)

        def forward(self, x):
            h = self.fc(x)
            before = h * 2.0  # reads h before the mutation
            h += x
            h.mul_(0.5)
            return h, before, h - 1.0

    x = torch.randn(4, 6)
    result = pt2onnx.export(Residual().eval(), (x,), dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
    assert not result.report.retraced
    assert "2 in-place op(s) on intermediates made functional" in result.report.decompose_reason
    for batch in (1, 5):
        check = result.verify(torch.randn(batch, 6))
        assert check.ok and check.max_abs <= 1e-5, str(check)


def test_inplace_through_a_view_is_left_to_the_retrace():
    def f(x):
        y = x * 2
        flat = y.view(-1)  # aliases y: the mutation must show through it
        y.add_(1)
        return flat + 0

    x = torch.randn(3, 4)
    result = pt2onnx.export(f, (x,))
    assert result.report.retraced
    assert "aten::add_.Tensor" in result.report.decompose_reason
    assert result.verify(x).ok


def test_inplace_that_keeps_a_narrower_dtype_is_left_to_the_retrace():
    def f(x, h):
        y = x + 1
        y.mul_(3)  # same dtype either way: made functional
        z = x * 2
        z.div_(2, rounding_mode="floor")  # functional div with rounding keeps int64 too
        w = h * 2
        w.add_(h.float())  # in place keeps float16; the functional add would give float32
        return y, z, w

    x, h = torch.arange(12).reshape(3, 4), torch.randn(3, 4).half()
    result = pt2onnx.export(f, (x, h))
    assert result.report.retraced
    assert "aten::add_.Tensor" in result.report.decompose_reason
    assert "aten::mul_" not in result.report.decompose_reason
    assert result.verify(x, h).ok
