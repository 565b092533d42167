"""FFTs through ONNX DFT (complex values as a trailing dim of 2) against eager PyTorch through onnxruntime.

Inputs hold no NaN or inf: one spreads over the whole transform, and where it ends up as
NaN rather than inf differs between FFT algorithms (pocketfft in torch, onnxruntime's own).
Every output of a transform sums all of its input, so two correct FFTs differ by rounding
errors that scale with the input's total magnitude, not with the output element: the
absolute tolerance is the dtype's epsilon times that total (:func:`_atol`).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import pt2onnx
from lambda_modules import Unary
from pt2onnx.errors import UnsupportedOpsError
from pt2onnx.testing import assert_exports_like_eager, dtypes, shapes, tensors

NORMS = st.sampled_from([None, "ortho", "forward"])
REAL = dtypes(["float32", "float64"])


def _signal(shape_strategy=None):
    if shape_strategy is None:
        shape_strategy = shapes(min_rank=1, max_rank=3, max_side=6)
    return tensors(shape_strategy, REAL, low=-3, high=3, edge_values=False)


def _dims(data, rank, *, canonical=True):
    """Dims to transform: sorted and non-negative as torch.fft hands them to the aten ops, or as a user writes them."""
    dims = data.draw(st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank, unique_by=lambda d: d % rank))
    return sorted(d % rank for d in dims) if canonical else dims


# The aten ops themselves, so the captured graph needs no re-trace; torch.fft's functions
# decompose into them (one test below goes that way).
A = torch.ops.aten
NORMALIZATIONS = st.sampled_from([0, 1, 2])  # none, 1/sqrt(n), 1/n


def _atol(x):
    """A few dozen roundings of the input's total magnitude (the grown inputs of the dynamic check at most double it)."""
    real = torch.view_as_real(x) if x.is_complex() else x
    return 64 * torch.finfo(real.dtype).eps * (float(real.abs().sum()) + 1)


def _complex(data, x):
    return torch.complex(x, data.draw(tensors(tuple(x.shape), x.dtype, low=-3, high=3, edge_values=False)))


# DFT's oldest opset (axis an attribute), the first with its axis as an input, the default.
OPSETS = st.sampled_from([17, 20, None])


@given(data=st.data(), x=_signal(), normalization=NORMALIZATIONS, onesided=st.booleans(), opset=OPSETS)
def test_real_to_complex(data, x, normalization, onesided, opset):
    dims = _dims(data, x.dim())
    # A complex output: run() hands it back complex, compared part by part.
    fn = lambda t: A._fft_r2c(t, dims, normalization, onesided)  # noqa: E731
    assert_exports_like_eager(fn, (x,), atol=_atol(x), opset=opset, expect_ops={"aten::_fft_r2c": "aten"})


@given(data=st.data(), x=_signal(), normalization=NORMALIZATIONS, forward=st.booleans(), opset=OPSETS)
def test_complex_to_complex(data, x, normalization, forward, opset):
    # A complex input: fed to onnxruntime as its (..., 2) real view.
    z = _complex(data, x)
    dims = _dims(data, z.dim())
    fn = lambda t: A._fft_c2c(t, dims, normalization, forward)  # noqa: E731
    assert_exports_like_eager(fn, (z,), atol=_atol(z), opset=opset, expect_ops={"aten::_fft_c2c": "aten"})


@given(
    data=st.data(),
    x=_signal(shapes(min_rank=1, max_rank=3, min_side=2, max_side=6)),
    normalization=NORMALIZATIONS,
    opset=OPSETS,
)
def test_complex_to_real(data, x, normalization, opset):
    # The half spectrum of a real signal back to the real signal: its length follows the spectrum's
    # (2 * (bins - 1), plus 1 for an odd one), as torch.fft.irfftn computes it.
    dims = _dims(data, x.dim())
    spectrum = torch.fft.rfftn(x, dim=dims)
    odd = x.shape[dims[-1]] % 2
    fn = lambda t: A._fft_c2r(t, dims, normalization, 2 * (t.shape[dims[-1]] - 1) + odd)  # noqa: E731
    assert_exports_like_eager(fn, (spectrum,), atol=_atol(spectrum), opset=opset, expect_ops={"aten::_fft_c2r": "aten"})


@pytest.mark.parametrize("dims, norm", [([0], None), ([1, 0], "ortho"), ([-1], "forward")])
def test_torch_fft_functions_decompose_into_these(dims, norm):
    # torch.fft's functions decompose into the aten ops (a re-trace: examples here, the search above).
    # fftn of a real signal casts it to complex (a zero imaginary part); a cast back keeps the real part.
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(0))
    sizes = [x.shape[d] for d in dims]
    model = Unary(
        lambda t: (
            torch.fft.fftn(t, dim=dims, norm=norm),
            torch.fft.irfftn(torch.fft.rfftn(t, dim=dims), s=sizes, dim=dims, norm=norm),
            torch.fft.fftn(t, dim=dims).to(t.dtype),
            torch.fft.ihfft(t, norm=norm),
        )
    )
    ops = {"aten::_to_copy": "aten", "aten::_fft_c2c": "aten", "aten::_fft_c2r": "aten", "aten::_conj": "aten"}
    assert_exports_like_eager(model, (x,), atol=_atol(x), expect_ops=ops)


@pytest.mark.parametrize("conj", [A._conj, A.conj_physical])
@given(x=_signal())
def test_conjugate(conj, x):
    # Of a complex tensor, and (conj_physical) of a real one, which is the tensor itself.
    fn = lambda t: (conj(A._fft_r2c(t, [x.dim() - 1], 0, True)), A.conj_physical(t))  # noqa: E731
    assert_exports_like_eager(fn, (x,), atol=_atol(x), expect_ops={f"aten::{conj.__name__.split('.')[0]}": "aten"})


@given(x=_signal(shapes(min_rank=2, max_rank=3, min_side=2, max_side=5)))
def test_view_as_real_and_back(x):
    # Identities on the (..., 2) representation: the real view of a spectrum, a complex view of pairs.
    pairs = x[..., :2].contiguous()
    model = Unary(
        lambda t: (torch.view_as_real(A._fft_r2c(t, [0], 0, True)), torch.view_as_complex(t[..., :2].contiguous()))
    )
    expect = {"aten::view_as_real": "aten", "aten::view_as_complex": "aten"}
    assert_exports_like_eager(model, (x,), atol=_atol(x), expect_ops=expect)
    assert torch.equal(torch.view_as_real(torch.view_as_complex(pairs)), pairs)


def test_an_empty_complex_output_comes_back_complex():
    # onnxruntime hands an empty (0, 2) result back with strides view_as_complex refuses.
    model = Unary(lambda t: torch.view_as_complex(t[:0, :2].contiguous()))
    result = assert_exports_like_eager(model, (torch.randn(3, 2),))
    assert result.run(torch.randn(3, 2)).dtype == torch.complex64


def test_below_opset_17_the_ffts_are_listed_with_the_opset_that_has_dft():
    with pytest.raises(UnsupportedOpsError) as info:
        pt2onnx.export(Unary(lambda t: A._fft_r2c(t, [0], 0, True)), (torch.randn(8),), opset=16)
    assert info.value.other_opsets == {
        "aten::_fft_r2c.default": "converted at opsets 17+ (aten), not at 16; the oldest that works: opset=17"
    }
