"""Matrix products against eager: every rank combination torch.matmul allows, alpha/beta scaling."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from lambda_modules import Variadic as Call
from pt2onnx.testing import assert_exports_like_eager, dtypes, tensors

MATMUL_DTYPES = ("float32", "float16", "float64", "bfloat16", "int64", "int32", "int8")
# float16/bfloat16 products round differently in each library
ATOL = {torch.float16: 3e-2, torch.bfloat16: 2e-1}


def _operand(dtype):
    """Draw keywords for a matrix operand: floats with NaN, inf, zeros and subnormals, but
    ordinary values whose products and sums stay finite. Where finite terms overflow, the
    result depends on the order of the additions and on fused multiply-adds (onnxruntime's
    MatMul gives inf where torch's gives NaN). Integers take their whole range and wrap."""
    if not dtype.is_floating_point:
        return {}
    bound = 100 if dtype == torch.float16 else 1e3
    return {"low": -bound, "high": bound, "edge_values": ("nan", "inf", "zero", "subnormal")}


def _check(model, args, expect, **options):
    dtype = args[0].dtype
    return assert_exports_like_eager(
        model, args, atol=ATOL.get(dtype), rtol=ATOL.get(dtype), expect_ops=[expect], **options
    )


@st.composite
def matmul_shapes(draw):
    n, k, m = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    a_rank, b_rank = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    batch = [draw(st.integers(1, 3)) for _ in range(2)]
    # Batch dims align from the right: each operand takes the trailing ones (or 1s).
    a = (k,) if a_rank == 1 else (*batch[len(batch) - (a_rank - 2) :], n, k)
    b_batch = [draw(st.sampled_from([1, s])) for s in batch[len(batch) - (b_rank - 2) :]]
    b = (k,) if b_rank == 1 else (*b_batch, k, m)
    return a, b


@given(data=st.data(), shapes=matmul_shapes(), dtype=dtypes(MATMUL_DTYPES))
def test_matmul_every_rank(data, shapes, dtype):
    a, b = (data.draw(tensors(s, dtype, **_operand(dtype))) for s in shapes)
    # torch.matmul decomposes while capturing; calling the op keeps it whole
    _check(Call(torch.ops.aten.matmul.default), (a, b), "aten::matmul")


@given(data=st.data(), dtype=dtypes(MATMUL_DTYPES), batched=st.booleans())
def test_mm_bmm(data, dtype, batched):
    n, k, m = data.draw(st.integers(2, 5)), data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))
    batch = (data.draw(st.integers(2, 3)),) if batched else ()
    a, b = (
        data.draw(tensors((*batch, n, k), dtype, **_operand(dtype))),
        data.draw(tensors((*batch, k, m), dtype, **_operand(dtype))),
    )
    fn = torch.bmm if batched else torch.mm
    dynamic = (
        ({0: torch.export.Dim("n")}, None) if not batched else ({0: torch.export.Dim("b")}, {0: torch.export.Dim("b")})
    )
    other = [((torch.cat([a, a]), torch.cat([b, b]) if batched else b), {})]
    _check(Call(fn), (a, b), "aten::bmm" if batched else "aten::mm", dynamic_shapes=(dynamic,), other_inputs=other)


@given(data=st.data(), dtype=dtypes(MATMUL_DTYPES[:4]), rank=st.integers(1, 4), bias=st.booleans())
def test_linear(data, dtype, rank, bias):
    fin, fout = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))
    x = data.draw(tensors((*[data.draw(st.integers(1, 3)) for _ in range(rank - 1)], fin), dtype, **_operand(dtype)))
    w = data.draw(tensors((fout, fin), dtype, **_operand(dtype)))
    b = data.draw(tensors((fout,), dtype, **_operand(dtype))) if bias else None
    _check(Call(lambda x: F.linear(x, w, b)), (x,), "aten::linear")
    _check(Call(lambda x, w: torch.ops.aten.t(w)), (x, w), "aten::t")


@given(
    data=st.data(),
    dtype=dtypes(MATMUL_DTYPES),
    kind=st.sampled_from(["addmm", "baddbmm", "addmv"]),
    beta=st.sampled_from([1, 0, 2]),
    alpha=st.sampled_from([1, 0, -3]),
    broadcast=st.booleans(),
)
def test_add_product(data, dtype, kind, beta, alpha, broadcast):
    n, k, m = (data.draw(st.integers(1, 4)) for _ in range(3))
    batch = data.draw(st.integers(1, 3))
    a_shape, b_shape, out = {
        "addmm": ((n, k), (k, m), (n, m)),
        "baddbmm": ((batch, n, k), (batch, k, m), (batch, n, m)),
        "addmv": ((n, k), (k,), (n,)),
    }[kind]
    self = data.draw(tensors(out[-1:] if broadcast else out, dtype, **_operand(dtype)))
    a, b = data.draw(tensors(a_shape, dtype, **_operand(dtype))), data.draw(tensors(b_shape, dtype, **_operand(dtype)))
    if not dtype.is_floating_point:
        beta, alpha = int(beta), int(alpha)
    fn = getattr(torch.ops.aten, kind).default
    _check(Call(lambda s, a, b: fn(s, a, b, beta=beta, alpha=alpha)), (self, a, b), f"aten::{kind}")


def test_linear_at_opset_14():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    x = torch.randn(2, 5, 4)
    assert_exports_like_eager(
        model,
        (x,),
        opset=14,
        dynamic_shapes=({0: torch.export.Dim("b")},),
        other_inputs=[((torch.randn(3, 5, 4),), {})],
    )


@pytest.mark.parametrize("kind", ["addmm", "addmv"])
def test_beta_and_alpha_zero_ignore_a_nan_input(kind):
    # CI seed 3711086248: addmm(nan, m1, m2, beta=0, alpha=0) is 0 in torch, was NaN.
    nan = torch.tensor([[float("nan"), float("inf")]])
    if kind == "addmm":
        model = lambda c, a, b: torch.addmm(c, a, b, beta=0, alpha=0)  # noqa: E731
        args = (nan, torch.randn(1, 3), torch.randn(3, 2))
    else:
        model = lambda c, a, b: torch.addmv(c, a, b, beta=0, alpha=0)  # noqa: E731
        args = (nan[0], torch.randn(2, 3), torch.randn(3))
    assert_exports_like_eager(model, args, dynamic=False)


@pytest.mark.parametrize("alpha, beta", [(0.6, 1), (1, 0.2), (0.5, 0.25)])
def test_float64_addmm_scales_by_float64_alpha_and_beta(alpha, beta):
    # Thorough OpInfo: Gemm's alpha/beta attributes are float32; 0.6 in float32 is off by
    # 1.6e-8 relative, beyond float64's 1e-15. Exact scalars (0.5, 0.25) keep Gemm.
    # Small integers: the products are exact, the results far from any cancellation.
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    b = torch.tensor([[5.0, 6.0, 7.0], [8.0, 9.0, 10.0]], dtype=torch.float64)
    model = lambda c, a, b: torch.addmm(c, a, b, alpha=alpha, beta=beta)  # noqa: E731
    assert_exports_like_eager(model, (torch.ones(1, dtype=torch.float64), a, b), dynamic=False, atol=0, rtol=1e-15)
