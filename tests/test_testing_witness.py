"""The witness the harness draws: other values than the test's, by a rule that keeps inputs valid."""

from __future__ import annotations

import torch

from pt2onnx.testing import witness_inputs


def test_floating_values_take_both_signs_and_keep_the_examples_nan_and_infinities():
    x = torch.tensor([[0.1, float("nan"), 0.7], [float("inf"), 0.2, -float("inf")]])
    ((w,), kwargs) = witness_inputs((x,), {}, seed=7)
    assert kwargs == {} and w.shape == x.shape and w.dtype == x.dtype
    assert torch.equal(w.isnan(), x.isnan()) and torch.equal(w[x.isinf()], x[x.isinf()])
    finite = w[x.isfinite()]
    assert not torch.equal(finite, x[x.isfinite()])
    assert bool((finite.abs() <= 1).all())  # the example's largest magnitude, at least 1


def test_a_non_negative_example_gets_negative_witness_values():
    # relu as Identity matches eager on torch.rand; the witness must not.
    ((w,), _) = witness_inputs((torch.rand(8, 8),), {}, seed=0)
    assert bool((w < 0).any()) and bool((w > 0).any())


def test_the_magnitude_follows_the_example():
    ((w,), _) = witness_inputs((torch.full((50,), 1e30),), {}, seed=1)
    assert 1e29 < float(w.abs().max()) <= 1e30


def test_integers_are_the_examples_values_in_another_order():
    index = torch.tensor([0, 3, 1, 2, 2, 4])
    ((w,), _) = witness_inputs((index,), {}, seed=3)
    assert sorted(w.tolist()) == sorted(index.tolist()) and not torch.equal(w, index)


def test_bools_and_complex_values_change_python_numbers_stay():
    mask = torch.zeros(40, dtype=torch.bool)
    z = torch.complex(torch.zeros(3), torch.ones(3))
    (w_mask, w_z, n), kwargs = witness_inputs((mask, z, 3), {"scale": 2.0}, seed=5)
    assert bool(w_mask.any()) and w_z.dtype == z.dtype and not torch.equal(w_z, z)
    assert n == 3 and kwargs == {"scale": 2.0}


def test_nothing_to_draw_is_none():
    assert witness_inputs((3, "text"), {}, seed=0) is None
    assert witness_inputs((torch.zeros(0, 3), torch.full((4,), 2)), {}, seed=0) is None


def test_the_seed_reproduces_the_witness():
    x = torch.randn(5, 5)
    assert torch.equal(witness_inputs((x,), {}, seed=11)[0][0], witness_inputs((x,), {}, seed=11)[0][0])
    assert not torch.equal(witness_inputs((x,), {}, seed=11)[0][0], witness_inputs((x,), {}, seed=12)[0][0])
