"""Ops with no computation at inference: assertions, identities, dropout in eval mode."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lambda_modules import Unary as Fn
from pt2onnx.errors import UnsupportedArgumentError
from pt2onnx.testing import ALL_DTYPES, assert_exports_like_eager, shapes, tensors

DTYPES = st.sampled_from([getattr(torch, n) for n in ALL_DTYPES])
A = torch.ops.aten


@given(x=tensors(shapes(max_rank=4, min_side=0, max_side=3), DTYPES))
def test_identities(x):
    model = Fn(lambda t: (t.clone(), A.alias(t), t.detach(), t.transpose(0, -1).contiguous() if t.dim() else t.clone()))
    # torch records contiguous only where the transposed tensor is not contiguous already.
    moved = x.transpose(0, -1) if x.dim() else x
    ops = ["aten::clone", "aten::alias", "aten::detach"] + ([] if moved.is_contiguous() else ["aten::contiguous"])
    assert_exports_like_eager(model, (x,), expect_ops=ops)


@given(x=tensors(shapes(min_rank=1, max_rank=3, max_side=3), DTYPES))
def test_tensor_constants_are_lifted(x):
    model = Fn(lambda t: torch.cat([t.flatten(), torch.tensor([1, 0], dtype=t.dtype)]))
    ep = torch.export.export(model, (x,))
    # The captured graph also detaches the copy in place, which makes pt2onnx re-trace it
    # (and the re-trace turns lift_fresh_copy into clone): drop that no-op to keep the op.
    for node in list(ep.graph.nodes):
        if node.target == A.detach_.default:
            node.replace_all_uses_with(node.args[0])
            ep.graph.erase_node(node)
    ep.graph_module.recompile()
    assert_exports_like_eager(ep, (x,), expect_ops=["aten::lift_fresh_copy"])


@given(x=tensors(shapes(max_rank=3, max_side=3)), p=st.floats(0, 0.9))
def test_dropout_in_eval_is_identity(x, p):
    model = Fn(lambda t: torch.nn.functional.dropout(t, p, training=False))
    assert_exports_like_eager(model, (x,), expect_ops=["aten::dropout"])


def test_dropout_in_training_is_a_clear_error():
    model = Fn(lambda t: torch.nn.functional.dropout(t, 0.5, training=True))
    with pytest.raises(UnsupportedArgumentError, match="train"):
        assert_exports_like_eager(model, (torch.randn(3),), decompose_all=False, check_model=False)


@given(x=tensors(shapes(min_rank=1, max_rank=3, max_side=3), st.sampled_from([torch.float32, torch.int64])))
def test_assertions_vanish(x):
    # .to() records _assert_tensor_metadata; a boolean mask records _assert_scalar on its size.
    model = Fn(lambda t: (t.to(torch.float64), t[t > 0]))
    assert_exports_like_eager(model, (x,), expect_ops=["aten::_assert_tensor_metadata", "aten::_assert_scalar"])


@given(x=tensors(shapes(min_rank=1, max_rank=3, max_side=3)))
def test_checks_on_values_vanish(x):
    def checked(t):
        torch._assert_async((t == t).any() | (t != t).any(), "values compare")
        torch._assert_async((t.abs() >= 0).any() | (t != t).any())
        return t * 2

    # No re-trace (decompose_all=False, ops with converters): a re-trace drops the check without a message.
    assert_exports_like_eager(
        Fn(checked), (x,), expect_ops=["aten::_assert_async.msg", "aten::_assert_async.default"], decompose_all=False
    )


@given(rows=st.integers(2, 6))
def test_range_constraints_vanish(rows):
    # torch.export folds these into its range constraints; re-traced programs still carry
    # them, so add them as such a program has them.
    dynamic = ({0: torch.export.Dim("rows", min=2, max=64)},)
    ep = torch.export.export(Fn(lambda t: t.new_zeros(t.shape[0])), (torch.randn(3, 2),), dynamic_shapes=dynamic)
    graph = ep.graph
    size = next(n for n in graph.nodes if n.target == A.sym_size.int)
    with graph.inserting_after(size):
        graph.call_function(A.sym_constrain_range.default, (size,), {"min": 2, "max": 64})
        graph.call_function(A.sym_constrain_range_for_size.default, (size,), {"min": 2, "max": 64})
    ep.graph_module.recompile()
    assert_exports_like_eager(
        ep,
        (torch.randn(rows, 2),),
        expect_ops=["aten::sym_constrain_range", "aten::sym_constrain_range_for_size"],
    )
