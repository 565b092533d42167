"""Ops with no computation in inference: assertions, identities, dropout in eval mode."""

from __future__ import annotations

from pt2onnx.plugin import converter


@converter(
    "aten::_assert_tensor_metadata.default",
    "aten::_assert_scalar.default",
    "aten::sym_constrain_range_for_size.default",
    "aten::sym_constrain_range.default",
)
def assertion(op, *args, **kwargs):
    # torch checked these while capturing; ONNX has no assertions to carry them.
    return None


@converter("aten::_assert_async.default", "aten::_assert_async.msg")
def data_check(op, *args, **kwargs):
    # A check on the values (timm's Gemma 4 ViT: position ids in its table), which eager makes
    # at run time: ONNX has no op that fails a run, so on an input eager refuses the graph
    # computes what the model computes past the check; on every other input it is the model.
    return None


@converter(
    "aten::clone.default",
    "aten::alias.default",
    "aten::detach.default",
    "aten::contiguous.default",
    "aten::lift_fresh_copy.default",
)
def identity(op, self, **kwargs):
    return self


@converter("aten::dropout.default")
def dropout(op, input, p, train):
    if train and p > 0:
        raise op.unsupported("train", train, "dropout in training mode is random", hint="call model.eval()")
    return input
