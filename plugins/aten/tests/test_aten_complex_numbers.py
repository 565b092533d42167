"""Complex arithmetic (polar, the complex product, views of complex tensors) against eager PyTorch through onnxruntime.

Complex values are (..., 2) real tensors in the ONNX graph; complex inputs and outputs
cross the boundary as their real views, and come back complex from ``run()``.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lambda_modules import Binary, Unary
from pt2onnx.errors import UnsupportedArgumentError
from pt2onnx.testing import assert_exports_like_eager, broadcast_shapes, dtypes, shapes, tensors

REAL = dtypes(["float32", "float64"])


def _complex(data, shape, dtype):
    parts = tensors(tuple(shape), dtype, low=-3, high=3, edge_values=False)
    return torch.complex(data.draw(parts), data.draw(parts))


@given(data=st.data(), shape=shapes(max_rank=3, max_side=5), dtype=REAL)
def test_polar(data, shape, dtype):
    magnitude = data.draw(tensors(shape, dtype, low=0, high=3, edge_values=False))
    angle = data.draw(tensors(shape, dtype, low=-2 * math.pi, high=2 * math.pi, edge_values=False))
    assert_exports_like_eager(Binary(torch.polar), (magnitude, angle), expect_ops={"aten::polar": "aten"})


@given(data=st.data(), pair=broadcast_shapes(max_rank=3, max_side=4), dtype=REAL)
def test_the_product_of_complex_tensors(data, pair, dtype):
    a, b = (_complex(data, shape, dtype) for shape in pair)
    assert_exports_like_eager(Binary(torch.mul), (a, b), expect_ops={"aten::mul": "aten"})


@given(data=st.data(), pair=broadcast_shapes(max_rank=3, max_side=4), dtype=REAL, real_first=st.booleans())
def test_a_complex_tensor_times_a_real_one_or_a_scalar(data, pair, dtype, real_first):
    z = _complex(data, pair[0], dtype)
    x = data.draw(tensors(pair[1], dtype, low=-3, high=3, edge_values=False))
    scalar = data.draw(st.sampled_from([0.5, -2.0, 1.5 - 0.25j]))
    model = Binary(lambda z, x: (x * z if real_first else z * x, z * scalar))
    assert_exports_like_eager(model, (z, x), expect_ops={"aten::mul": "aten"})


@given(data=st.data(), shape=shapes(min_rank=1, max_rank=3, min_side=2, max_side=5), dtype=REAL)
def test_views_of_a_complex_tensor_count_torchs_dims(data, shape, dtype):
    # Negative dims count from torch's last dim, not from the (real, imaginary) pair.
    z = _complex(data, shape, dtype)
    model = Unary(lambda z: (z.unsqueeze(-1), z[..., 1:], z.reshape(-1), z.reshape(*z.shape[:-1], 1, -1)))
    ops = {"aten::unsqueeze": "aten", "aten::slice": "aten", "aten::reshape": "aten"}
    assert_exports_like_eager(model, (z,), expect_ops=ops)


class _ComplexRotary(torch.nn.Module):
    """A rotary embedding as Llama 4 and Meta's reference Llama write it: in complex numbers."""

    def __init__(self, head_dim: int = 8, positions: int = 32) -> None:
        super().__init__()
        inverse = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
        angles = torch.outer(torch.arange(positions).float(), inverse)
        self.register_buffer("rotations", torch.polar(torch.ones_like(angles), angles))  # a complex buffer

    def forward(self, q, scale):
        # q: (batch, sequence, heads, head_dim); the rotations for the positions, polar's built in the graph too.
        pairs = torch.view_as_complex(q.float().reshape(*q.shape[:-1], -1, 2))
        rotations = self.rotations[: q.shape[1]][None, :, None, :]
        built = torch.polar(torch.ones_like(scale), scale)[None, None, None, :]
        return torch.view_as_real(pairs * rotations * built * 0.5).flatten(3)


@given(data=st.data(), sequence=st.integers(2, 8))
def test_a_rotary_embedding_in_complex_numbers(data, sequence):
    q = data.draw(tensors((1, sequence, 2, 8), torch.float32, low=-3, high=3, edge_values=False)).contiguous()
    scale = data.draw(tensors((4,), torch.float32, low=-3, high=3, edge_values=False))
    # The sequence is dynamic, the head size is not (view_as_complex needs its pairs contiguous).
    longer = (torch.randn(1, sequence + 3, 2, 8), scale)
    result = assert_exports_like_eager(
        _ComplexRotary(), (q, scale), other_inputs=[(longer, {})], expect_ops={"aten::polar": "aten"}
    )
    rotations = result.model.graph.initializers["rotations"].const_value  # the complex buffer, as its real view
    assert (rotations.dtype.name, rotations.shape.numpy()) == ("FLOAT", (32, 4, 2))


def test_complex_arithmetic_without_a_complex_converter_is_refused():
    # A complex quotient through the real converter of div would be wrong: the export stops instead.
    model = Binary(lambda z, w: z / w)
    z = torch.complex(torch.randn(2, 3), torch.randn(2, 3))
    with pytest.raises(UnsupportedArgumentError, match=r"aten::div.Tensor.*does not handle complex values"):
        assert_exports_like_eager(model, (z, z + 1))
