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


def test_writes_through_slices_of_an_intermediate_are_translated_without_retrace():
    # Swin's shifted-window mask: regions of a fresh tensor filled in turn, then read whole.
    def f(x):
        mask = x.new_zeros(x.shape[0], x.shape[1])
        before = mask + 1.0  # reads the mask before the writes
        count = 0
        for rows in ((0, -2), (-2, -1), (-1, None)):
            for cols in ((0, -3), (-3, None)):
                mask[rows[0] : rows[1], cols[0] : cols[1]] = count
                count += 1
        return mask * x, before

    x = torch.randn(6, 8)
    dims = {"x": {0: torch.export.Dim("rows", min=4), 1: torch.export.Dim("cols", min=5)}}
    result = pt2onnx.export(f, (x,), dynamic_shapes=dims)
    assert not result.report.retraced, result.report.decompose_reason
    assert "6 in-place op(s) on intermediates made functional" in result.report.decompose_reason
    for shape in ((6, 8), (4, 5), (9, 6)):
        check = result.verify(torch.randn(*shape))
        assert check.ok and check.max_abs == 0, str(check)


def test_a_write_through_a_slice_seen_through_another_view_is_left_to_the_retrace():
    def f(x):
        y = x * 2
        top = y[:1]
        rows = y[:2]  # a second view, taken before the write: it must show the write
        top.fill_(5.0)
        return rows + top.sum()

    x = torch.randn(3, 4)
    result = pt2onnx.export(f, (x,))
    assert result.report.retraced
    assert "aten::fill_.Scalar" in result.report.decompose_reason
    assert result.verify(x).ok


def test_the_written_slice_read_after_the_write_reads_the_written_values():
    def f(x):
        y = x * 2
        top = y[1:2, 1:]
        top.fill_(5.0)
        return y + top.sum(), top * 3

    x = torch.randn(3, 4)
    result = pt2onnx.export(f, (x,))
    assert not result.report.retraced, result.report.decompose_reason
    check = result.verify(x)
    assert check.ok and check.max_abs == 0, str(check)
