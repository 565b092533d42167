"""Random ops: the exported model samples torch's distributions (values differ by design)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import pt2onnx
from pt2onnx.errors import UnsupportedArgumentError
from pt2onnx.testing import record_proof


class Sample(torch.nn.Module):
    def __init__(self, dtype):
        super().__init__()
        self.dtype = dtype

    def forward(self, x):
        n = x.shape[0]
        return (
            torch.rand(n, 1000, dtype=self.dtype),
            torch.randn(n, 1000, dtype=self.dtype),
            torch.rand(n, 1000, dtype=self.dtype),
            torch.randperm(n * 7),
        )


def _export(dtype, opset=21):
    batch = torch.export.Dim("batch", min=2)
    result = pt2onnx.export(Sample(dtype), (torch.zeros(3),), dynamic_shapes=({0: batch},), opset=opset)
    used = {u.op for u in result.report.ops}
    assert {"aten::rand.default", "aten::randn.default", "aten::randperm.default"} <= used
    return result


@settings(max_examples=3)
@given(dtype=st.sampled_from([torch.float32, torch.float64, torch.float16, torch.bfloat16]), n=st.integers(2, 5))
def test_random_ops_sample_torchs_distributions(dtype, n):
    result = _export(dtype)
    uniform, normal, uniform2, perm = result.run(torch.zeros(n))
    assert uniform.shape == normal.shape == (n, 1000) and uniform.dtype == normal.dtype == dtype
    u, z = uniform.double(), normal.double()
    assert u.min() >= 0 and u.max() <= 1
    # n * 1000 samples: mean and spread within ~6 standard errors.
    assert abs(u.mean() - 0.5) < 0.06 and abs(u.std() - 0.2887) < 0.03
    assert abs(z.mean()) < 0.2 and abs(z.std() - 1) < 0.1
    # Two calls draw independently (neither folded into a constant nor merged).
    assert not torch.equal(uniform, uniform2)
    assert not torch.equal(uniform, result.run(torch.zeros(n))[0])
    assert perm.dtype == torch.int64 and torch.equal(perm.sort().values, torch.arange(7 * n))
    record_proof(result)  # the statistics above are the proof: random values cannot match eager


def test_random_ops_at_opset_14():
    uniform, _, _, perm = _export(torch.float32, opset=14).run(torch.zeros(2))
    assert uniform.shape == (2, 1000) and torch.equal(perm.sort().values, torch.arange(14))


def test_random_ops_above_opset_21_are_a_clear_error():
    with pytest.raises(UnsupportedArgumentError, match="opset 21"):
        _export(torch.float32, opset=26)
