"""The expected failures of the OpInfo test module: (op, dtype) -> (outcome, reason).

Outcomes (``opinfo_samples.Outcome``): ``error`` (a documented pt2onnx error at export:
no converter and no usable decomposition, an argument ONNX cannot express, a model
torch.export cannot capture), ``random`` (the op draws random numbers), and the
defects that must go: ``wrong`` (silently wrong), ``runtime`` (onnxruntime fails on the
exported model), ``crash``. Each reason says why. The float32 entries are exact for the
``ci`` run (the first sample of each op); other dtypes and samples run in ``thorough``.

Drafted from ``python tests/opinfo/record.py --dtypes float32 --samples 1 --out o.json
--write-expected``; a passing (op, dtype) must leave the list (the test is strict).
"""

from __future__ import annotations

EXPECTED: dict[str, dict[str, tuple[str, str]]] = {}


def expected_outcome(name: str, dtype: str) -> tuple[str, str] | None:
    """The listed outcome and reason of ``name`` in ``dtype`` (``*``: every dtype), or None."""
    per_op = EXPECTED.get(name, {})
    return per_op.get(dtype) or per_op.get("*")


#: Ops whose every float32 sample eager PyTorch rejects or that return no tensor: not tested.
SKIPPED_FLOAT32: tuple[str, ...] = ()
