"""Testing converters: hypothesis strategies, ``assert_exports_like_eager`` and proofs that can fail.

Public so that third-party packs test their converters exactly as the builtin ones
(here the builtin pack ``aten`` converts ``tanh``, on edge values too: NaN, inf, subnormals; a pack passes ``plugins=[mypack]`` and
names itself in ``expect_ops``):

```python
import torch
from hypothesis import given, settings

from pt2onnx.testing import assert_exports_like_eager, dtypes, tensors


@settings(deadline=None, max_examples=5)  # an export takes longer than hypothesis' 200 ms default
@given(x=tensors(dtype=dtypes(["float32", "float16"])))
def test_tanh(x):
    assert_exports_like_eager(torch.nn.Tanh(), (x,), expect_ops={"aten::tanh": "aten"})
```

and, in the pack's CI, ``pytest --pt2onnx-prove mypack``: the session fails unless every
converter ``mypack`` registers converted a node in a passing test whose export matched
eager (the pytest plugin this package installs, :mod:`pt2onnx.testing.pytest_plugin`).

What each guarantee rests on (the tests that prove it):

* a registration counts as proven only through a passing, verified export of the
  plugin's own function — ``tests/test_testing_proofs.py``;
* ... that also matched eager on a witness input the harness draws itself, at a
  tolerance within :data:`TOLERANCE_FACTOR` of the dtype's default unless the
  registration declares more — ``tests/test_testing_proofs.py::test_weak_proofs_prove_nothing``;
* each output is compared by its own dtype, integers exactly —
  ``tests/test_testing_harness.py::test_integer_outputs_are_compared_exactly_beside_a_loose_float_output``;
* a converter output whose static shape disagrees with torch's stops the export —
  ``tests/test_testing_harness.py::test_a_wrong_static_shape_stops_the_export_naming_plugin_op_node_and_line``;
* every dim dynamic and a second input of other sizes, by default —
  ``tests/test_testing_harness.py::test_dynamic_by_default_checks_other_sizes``;
* each export checked again at the oldest opset its converters serve, by default —
  ``tests/test_opsets.py::test_a_converter_wrong_only_below_some_opset_fails_the_harness_naming_that_opset``;
* edge values by default — ``tests/test_testing_strategies.py``.
"""

from __future__ import annotations

from ..runtime import TOLERANCES
from .harness import (
    OLDEST_OPSET_EVERY_ENV,
    OtherSizes,
    assert_exports_like_eager,
    find_other_sizes,
    other_sizes,
    record_proof,
)
from .record import TOLERANCE_FACTOR
from .strategies import (
    ALL_DTYPES,
    EDGE_KINDS,
    FLOAT_DTYPES,
    INT_DTYPES,
    broadcast_shapes,
    dims,
    dtypes,
    shapes,
    tensors,
)
from .witness import witness_inputs

__all__ = [
    "ALL_DTYPES",
    "EDGE_KINDS",
    "FLOAT_DTYPES",
    "INT_DTYPES",
    "OLDEST_OPSET_EVERY_ENV",
    "TOLERANCES",
    "TOLERANCE_FACTOR",
    "OtherSizes",
    "assert_exports_like_eager",
    "broadcast_shapes",
    "dims",
    "dtypes",
    "find_other_sizes",
    "other_sizes",
    "record_proof",
    "shapes",
    "tensors",
    "witness_inputs",
]
