"""Any output object a model returns exports and is named: pytree types registered without
keys (as diffusers registers its outputs), dataclasses, ModelOutput-like ordered dicts."""

from __future__ import annotations

import collections
import dataclasses

import torch
import torch.utils._pytree as pytree

from pt2onnx.testing import assert_exports_like_eager


class KeylessOutput:
    """A library's output class, registered with torch's pytree without a flatten_with_keys_fn."""

    def __init__(self, sample, residual):
        self.sample, self.residual = sample, residual


pytree.register_pytree_node(
    KeylessOutput,
    lambda o: ([o.sample, o.residual], ["sample", "residual"]),
    lambda values, names: KeylessOutput(*values),
    serialized_type_name="tests.test_output_objects.KeylessOutput",
)


class OpaqueOutput:
    """Registered without keys and with a context that names nothing."""

    def __init__(self, first, second):
        self.first, self.second = first, second


pytree.register_pytree_node(
    OpaqueOutput,
    lambda o: ([o.first, o.second], None),
    lambda values, _: OpaqueOutput(*values),
    serialized_type_name="tests.test_output_objects.OpaqueOutput",
)


@dataclasses.dataclass
class FieldsOutput:
    logits: torch.Tensor
    hidden: torch.Tensor


pytree.register_pytree_node(
    FieldsOutput,
    lambda o: ([o.logits, o.hidden], None),
    lambda values, _: FieldsOutput(*values),
    serialized_type_name="tests.test_output_objects.FieldsOutput",
)


class Returns(torch.nn.Module):
    def __init__(self, make):
        super().__init__()
        self.make = make

    def forward(self, x):
        return self.make(x.sin(), x.cos())


def test_a_type_registered_without_keys_is_named_by_its_context():
    result = assert_exports_like_eager(Returns(KeylessOutput), (torch.randn(2, 3),))
    assert result.output_names == ["sample", "residual"]


def test_a_type_whose_context_names_nothing_is_named_by_position():
    result = assert_exports_like_eager(Returns(lambda a, b: {"out": OpaqueOutput(a, b)}), (torch.randn(2, 3),))
    assert result.output_names == ["out.0", "out.1"]


def test_a_dataclass_registered_without_keys_is_named_by_its_fields():
    result = assert_exports_like_eager(Returns(lambda a, b: (FieldsOutput(a, b), a + b)), (torch.randn(2, 3),))
    assert result.output_names == ["output_0.logits", "output_0.hidden", "output_1"]


def test_an_ordered_dict_output_is_named_by_its_keys():
    model = Returns(lambda a, b: collections.OrderedDict(last_hidden_state=a, pooler_output=b))
    result = assert_exports_like_eager(model, (torch.randn(2, 3),))
    assert result.output_names == ["last_hidden_state", "pooler_output"]
