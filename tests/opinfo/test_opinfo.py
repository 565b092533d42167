"""PyTorch's own op test database (op_db) through pt2onnx: every op passes, or its failure is expected.

For each op of ``torch.testing._internal.common_methods_invocations.op_db`` and each dtype
it supports on the CPU, the op's samples are wrapped in a module (``opinfo_samples.py``),
exported with :func:`pt2onnx.testing.assert_exports_like_eager` (every dim dynamic, a
second input of other sizes), run in onnxruntime and compared with eager.

* An (op, dtype) that is not in ``opinfo_expected.py`` must pass: a new op of op_db that
  fails is a test failure, so coverage can only grow.
* An (op, dtype) in ``opinfo_expected.py`` must fail exactly as listed there (strict): one that
  starts passing, or fails differently (say at run time instead of at export), fails
  the test until the list is updated. ``EXPECTED`` lists first samples; under
  ``thorough``, ``LATER_FAILURES`` lists the pairs whose first sample passes and a later
  one fails (which sample, how, and why).

How many run:

* ``ci`` and ``dev`` hypothesis profiles: the first sample of every op in float32, and of
  every op in one other dtype it supports, drawn from the run's hypothesis seed
  (``--hypothesis-seed``, which ``./dev.sh test`` prints): about 1,250 (op, dtype) pairs per
  run, a different slice of the ~6,100 each run, the same slice for the same seed.
* ``HYPOTHESIS_PROFILE=thorough``: every sample of every supported dtype.

Environment variables choose exactly::

    PT2ONNX_OPINFO_DTYPES=float32,int64 PT2ONNX_OPINFO_SAMPLES=3 pytest tests/opinfo
    PT2ONNX_OPINFO_DTYPES=all PT2ONNX_OPINFO_SAMPLES=0 pytest tests/opinfo   # everything

``python tests/opinfo/record.py`` runs the same and writes every outcome at once.
"""

from __future__ import annotations

import os
import random

import pytest
import torch
from opinfo_expected import EXPECTED, LATER_FAILURES, expected_outcome, later_failure
from opinfo_samples import opinfos, run_sample, sample_inputs

from pt2onnx.testing import OLDEST_OPSET_EVERY_ENV, assert_exports_like_eager

_THOROUGH = os.environ.get("HYPOTHESIS_PROFILE") == "thorough"
_DTYPES = os.environ.get("PT2ONNX_OPINFO_DTYPES", "all" if _THOROUGH else "float32+drawn")
_SAMPLES = int(os.environ.get("PT2ONNX_OPINFO_SAMPLES", "0" if _THOROUGH else "1")) or None


def _cases(seed: object) -> list[tuple[str, str]]:
    """(op, dtype) pairs to run; ``float32+drawn`` adds one other dtype per op, drawn from ``seed``."""
    cases = []
    for name, info in opinfos().items():
        supported = sorted(str(d).removeprefix("torch.") for d in info.supported_dtypes("cpu"))
        if _DTYPES == "all":
            chosen = supported
        elif _DTYPES == "float32+drawn":
            others = [d for d in supported if d != "float32"]
            # A string seed: Random hashes it the same in every process (xdist workers too).
            drawn = [random.Random(f"{seed}/{name}").choice(others)] if others else []
            chosen = [d for d in supported if d == "float32"] + drawn
        else:
            chosen = [d for d in supported if d in _DTYPES.split(",")]
        cases.extend((name, dtype) for dtype in chosen)
    return cases


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.function is test_opinfo:
        seed = metafunc.config.getoption("hypothesis_seed", None) or 0
        metafunc.parametrize(("name", "dtype"), _cases(seed))


def test_opinfo(name, dtype, monkeypatch):
    # op_db measures which ops export at the default opset, as record.py drafts the list; the
    # converters' own property tests prove their oldest opsets.
    monkeypatch.setenv(OLDEST_OPSET_EVERY_ENV, "0")
    info = opinfos()[name]
    outcome, failed_at = None, None
    for index, sample in enumerate(sample_inputs(info, getattr(torch, dtype), _SAMPLES)):
        got = run_sample(
            info, sample, lambda module, tensors, atol: assert_exports_like_eager(module, tensors, atol=atol)
        )
        if got.kind == "skip":
            continue
        outcome = got
        if not got.ok:
            failed_at = index
            break
    if outcome is None:
        pytest.skip("eager PyTorch rejects every sample (or none returns a tensor)")
    expected = expected_outcome(name, dtype)
    if expected is None and dtype != "float32" and outcome.kind in ("error", "random"):
        # The dtype sweep (issue #10): beyond float32, a documented pt2onnx error at export
        # (say, onnxruntime has no kernel for the dtype) is an accepted outcome; a run-time
        # failure or a silently wrong result never is.
        pytest.xfail(f"{outcome.kind} at export: {outcome.detail}")
    later = later_failure(name, dtype) if _SAMPLES is None and expected is None else None
    if later is not None:
        # Every sample runs (thorough): the first sample passes, a later one is listed.
        at, kind, reason = later
        assert not outcome.ok, f"{name} ({dtype}) now passes every sample: remove it from LATER_FAILURES ({reason})"
        assert (failed_at, outcome.kind) == (at, kind), (
            f"{name} ({dtype}) was expected to fail first at sample {at} as {kind!r} ({reason}) "
            f"but failed at sample {failed_at} as {outcome.kind}: {outcome.detail}"
        )
        pytest.xfail(f"{kind} at sample {at}: {reason}")
    if expected is None:
        assert outcome.ok, (
            f"{name} ({dtype}) fails at sample {failed_at} and is not an expected failure: {outcome.kind}: {outcome.detail}"
        )
        return
    kind, reason = expected
    assert not outcome.ok, f"{name} ({dtype}) now passes: remove it from tests/opinfo/opinfo_expected.py ({reason})"
    assert outcome.kind == kind, (
        f"{name} ({dtype}) was expected to fail as {kind!r} ({reason}) but got {outcome.kind}: {outcome.detail}"
    )
    pytest.xfail(f"{kind}: {reason}")


def test_expected_failures_name_ops_of_op_db():
    # A renamed or removed op must leave the list too, so the list never holds dead entries.
    assert sorted(set(EXPECTED) - set(opinfos())) == []
    assert sorted(set(LATER_FAILURES) - set(opinfos())) == []
