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
  one fails (which sample, how, and why); ``WITHOUT_ONEDNN_BFLOAT16``, the bfloat16 pairs
  whose eager result depends on the CPU. A ``wrong`` entry's claim of what is still right
  is checked on the failing sample.
* Beyond float32, only a documented refusal of the dtype itself needs no entry
  (``opinfo_expected.accepted_without_entry``).
* A sample is skipped only where eager PyTorch rejects it or returns no tensor; the ops whose
  first float32 sample is skipped are exactly ``SKIPPED_FLOAT32``, which the published
  figure leaves out.

How many run:

* ``ci`` and ``dev`` hypothesis profiles: the first sample of every op in float32, and of
  one op in six (:data:`DRAWN_SHARE`) in one other dtype it supports, both drawn from the
  run's hypothesis seed (``--hypothesis-seed``, which ``./dev.sh test`` prints): about 790
  (op, dtype) pairs per run, a different slice of the ~6,100 each run, the same slice for
  the same seed. A sixth, not every op: the whole suite has 30 minutes on CI's 2 cores.
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
from opinfo_expected import (
    EXPECTED,
    LATER_FAILURES,
    SKIPPED_FLOAT32,
    WITHOUT_ONEDNN_BFLOAT16,
    accepted_without_entry,
    expected_outcome,
    later_failure,
)
from opinfo_samples import check_still_right, opinfos, run_sample, sample_inputs, skip_reason

from pt2onnx.testing import OLDEST_OPSET_EVERY_ENV, assert_exports_like_eager

_THOROUGH = os.environ.get("HYPOTHESIS_PROFILE") == "thorough"
_DTYPES = os.environ.get("PT2ONNX_OPINFO_DTYPES", "all" if _THOROUGH else "float32+drawn")
#: The share of ops that a ``ci`` or ``dev`` run also exports in one other dtype.
DRAWN_SHARE = 1 / 6
_SAMPLES = int(os.environ.get("PT2ONNX_OPINFO_SAMPLES", "0" if _THOROUGH else "1")) or None


def _cases(seed: object) -> list[tuple[str, str]]:
    """(op, dtype) pairs to run; ``float32+drawn`` adds one other dtype to a share of the ops, drawn from ``seed``."""
    if _DTYPES not in ("all", "float32+drawn"):
        # A misspelt dtype would select nothing, and a run of nothing passes.
        known = {str(d).removeprefix("torch.") for info in opinfos().values() for d in info.supported_dtypes("cpu")}
        unknown = sorted(set(_DTYPES.split(",")) - known)
        if unknown:
            raise ValueError(f"PT2ONNX_OPINFO_DTYPES names dtypes no op of op_db supports: {', '.join(unknown)}")
    cases = []
    for name, info in opinfos().items():
        supported = sorted(str(d).removeprefix("torch.") for d in info.supported_dtypes("cpu"))
        if _DTYPES == "all":
            chosen = supported
        elif _DTYPES == "float32+drawn":
            others = [d for d in supported if d != "float32"]
            # A string seed: Random hashes it the same in every process (xdist workers too).
            draw = random.Random(f"{seed}/{name}")
            drawn = [draw.choice(others)] if others and draw.random() < DRAWN_SHARE else []
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
    outcome, failed_at, failed, skipped = None, None, None, []
    for index, sample in enumerate(sample_inputs(info, getattr(torch, dtype), _SAMPLES)):
        got = run_sample(
            info, sample, lambda module, tensors, atol: assert_exports_like_eager(module, tensors, atol=atol)
        )
        if got.kind == "skip":
            skipped.append(got.detail)
            if index == 0 and dtype == "float32":
                assert name in SKIPPED_FLOAT32, (
                    f"{name}'s first float32 sample cannot be a test ({got.detail}): list it in SKIPPED_FLOAT32, "
                    "which the published figure leaves out"
                )
            continue
        if index == 0 and dtype == "float32":
            assert name not in SKIPPED_FLOAT32, (
                f"{name}'s first float32 sample runs ({got.kind}): remove it from SKIPPED_FLOAT32 "
                f"({SKIPPED_FLOAT32[name]}), so the published figure counts it"
            )
        outcome = got
        if not got.ok:
            failed_at, failed = index, sample
            break
    if outcome is None:
        pytest.skip(f"no sample to test: {skip_reason(skipped)}")
    # A refusal of the dtype needs no entry, even where a "*" entry lists how the op fails otherwise.
    if dtype != "float32" and dtype not in EXPECTED.get(name, {}):
        why = accepted_without_entry(outcome)
        if why is not None:
            pytest.xfail(why)
    expected = expected_outcome(name, dtype)
    later = later_failure(name, dtype) if _SAMPLES is None and expected is None else None
    if later is not None:
        # Every sample runs (thorough): the first sample passes, a later one is listed.
        at, kind, reason, *still_right = later
        assert not outcome.ok, f"{name} ({dtype}) now passes every sample: remove it from LATER_FAILURES ({reason})"
        assert (failed_at, outcome.kind) == (at, kind), (
            f"{name} ({dtype}) was expected to fail first at sample {at} as {kind!r} ({reason}) "
            f"but failed at sample {failed_at} as {outcome.kind}: {outcome.detail}"
        )
        _check_still_right(still_right, info, failed)
        pytest.xfail(f"{kind} at sample {at}: {reason}")
    if expected is None:
        assert outcome.ok, (
            f"{name} ({dtype}) fails at sample {failed_at} and is not an expected failure: {outcome.kind}: {outcome.detail}"
        )
        return
    kind, reason, *still_right = expected
    assert not outcome.ok, f"{name} ({dtype}) now passes: remove it from tests/opinfo/opinfo_expected.py ({reason})"
    assert outcome.kind == kind, (
        f"{name} ({dtype}) was expected to fail as {kind!r} ({reason}) but got {outcome.kind}: {outcome.detail}"
    )
    _check_still_right(still_right, info, failed)
    pytest.xfail(f"{kind}: {reason}")


def _check_still_right(still_right: list[str], info: object, sample: object) -> None:
    """A ``wrong`` entry names what the export still gets right; the failing sample must bear it
    out, so a converter broken further (a topk that sorts the wrong way) is no expected failure."""
    for claim in still_right:
        check_still_right(claim, info, sample)


def test_expected_failures_name_ops_of_op_db():
    # A renamed or removed op must leave the list too, so the list never holds dead entries.
    assert sorted(set(EXPECTED) - set(opinfos())) == []
    assert sorted(set(LATER_FAILURES) - set(opinfos())) == []
    assert sorted(set(WITHOUT_ONEDNN_BFLOAT16) - set(opinfos())) == []
    assert sorted(set(SKIPPED_FLOAT32) - set(opinfos())) == []
