"""The OpInfo suite's own machinery: samples wired as op_db gives them, skips and expected
failures that cannot hide a defect (issue #24, points 3 and 4).

What the issue added is reached through its module (``opinfo_samples.HarnessError``), so each
test fails on its own against the code before it.

The tests that break a converter do it the way a user would: a project plugin (the nearest
pyproject.toml's ``[tool.pt2onnx] plugins``) overrides the builtin one, and the OpInfo test
itself runs on it.
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import opinfo_expected
import opinfo_samples
import pytest
import test_opinfo
import torch
from hypothesis import settings
from opinfo_expected import EXPECTED, LATER_FAILURES, SKIPPED_FLOAT32
from opinfo_samples import SampleModule, classify, opinfos, run_sample, sample_module
from torch.testing._internal.opinfo.core import SampleInput

from pt2onnx.errors import (
    ConversionError,
    NodeLocation,
    UnsupportedArgumentError,
    UnsupportedOpsError,
    VerificationError,
)
from pt2onnx.plugin_manager import load_plugins


def _verdict(name: str, dtype: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """What the OpInfo test concludes for (name, dtype), where it does not fail: an expected
    failure or a skip is a result here, not this test's own xfail or skip."""
    try:
        test_opinfo.test_opinfo(name, dtype, monkeypatch)
    except pytest.xfail.Exception as e:
        return f"xfail: {e}"
    except pytest.skip.Exception as e:
        return f"skip: {e}"
    return "pass"


def _never_called(module, tensors, atol):
    raise AssertionError("the sample should not have reached the export")


# -- point 3: samples with None arguments run ------------------------------------------------


def test_a_none_argument_is_a_constant_not_a_tensor_slot():
    # prepend=None sits before the tensor append=: taken for a tensor slot, prepend got the append
    # tensor and append none (StopIteration), which read as eager rejecting the sample.
    x, append = torch.arange(6.0).reshape(2, 3), torch.ones(2, 1)
    sample = SampleInput(x, kwargs={"n": 1, "dim": -1, "prepend": None, "append": append})
    module, tensors = sample_module(opinfos()["diff"], sample)
    assert len(tensors) == 2
    torch.testing.assert_close(module(*tensors), torch.diff(x, n=1, dim=-1, prepend=None, append=append))


def test_a_sample_with_none_arguments_is_tested():
    info = opinfos()["nn.functional.interpolate.nearest"]
    sample = SampleInput(torch.rand(2, 3, 4), args=((6,),), kwargs={"scale_factor": None, "mode": "nearest"})
    checked = []

    def check(module, tensors, atol):
        checked.append(module(*tensors).shape)

    assert run_sample(info, sample, check).kind == "pass"
    assert checked == [torch.Size([2, 3, 6])]


def test_a_module_that_fails_where_the_op_does_not_is_a_harness_defect(monkeypatch):
    def broken(self, *tensors):
        raise StopIteration

    monkeypatch.setattr(SampleModule, "forward", broken)
    with pytest.raises(opinfo_samples.HarnessError, match="abs: the sample's module fails where the op does not"):
        run_sample(opinfos()["abs"], SampleInput(torch.tensor([-1.0, 2.0])), _never_called)


def test_a_module_that_computes_other_values_is_a_harness_defect(monkeypatch):
    monkeypatch.setattr(SampleModule, "forward", lambda self, *tensors: tensors[0])
    with pytest.raises(opinfo_samples.HarnessError, match="computes other values"):
        run_sample(opinfos()["abs"], SampleInput(torch.tensor([-1.0, 2.0])), _never_called)


def test_only_the_op_itself_rejecting_the_sample_is_a_skip():
    # abs takes no dim: eager's own error, so the sample cannot be a test.
    outcome = run_sample(opinfos()["abs"], SampleInput(torch.ones(2), kwargs={"dim": 0}), _never_called)
    assert outcome.kind == "skip" and outcome.detail.startswith("eager fails: TypeError")


def test_a_misspelt_dtype_is_an_error_not_an_empty_run(monkeypatch):
    monkeypatch.setattr(test_opinfo, "_DTYPES", "float32,flaot16")
    with pytest.raises(ValueError, match="flaot16"):
        test_opinfo._cases(0)
    monkeypatch.setattr(test_opinfo, "_DTYPES", "float32,float16")
    assert {dtype for _, dtype in test_opinfo._cases(0)} == {"float32", "float16"}


def test_a_listed_float32_skip_that_runs_fails(monkeypatch):
    # The published figure leaves SKIPPED_FLOAT32 out: a listed op that runs would go uncounted.
    monkeypatch.setitem(SKIPPED_FLOAT32, "abs", "returns no tensor: said wrongly")
    with pytest.raises(AssertionError, match="remove it from SKIPPED_FLOAT32"):
        _verdict("abs", "float32", monkeypatch)


def test_an_unlisted_float32_skip_fails(monkeypatch):
    monkeypatch.delitem(SKIPPED_FLOAT32, "allclose")
    with pytest.raises(AssertionError, match="list it in SKIPPED_FLOAT32"):
        _verdict("allclose", "float32", monkeypatch)


# -- point 4: expected failures that cannot hide a defect -------------------------------------


#: Appended to a project plugin's source: registers its converters.
_REGISTER = """
@hookimpl
def pt2onnx_register_converters(register):
    register.module(sys.modules[__name__])
"""


@pytest.fixture
def project_plugin(tmp_path, monkeypatch):
    """Install ``source`` as the plugin module of a user's project (the current directory)."""

    def install(name: str, source: str) -> None:
        (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "proj"\n\n[tool.pt2onnx]\nplugins = ["{name}"]\n')
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source) + _REGISTER)
        monkeypatch.chdir(tmp_path)
        monkeypatch.delitem(sys.modules, name, raising=False)
        # A plugin that failed to load would leave the builtin converter, and the test proving nothing.
        assert [p.name for p in load_plugins().broken] == []

    return install


def test_a_crashing_converter_is_no_accepted_outcome_in_another_dtype(project_plugin, monkeypatch):
    project_plugin(
        "crashing_abs",
        """
        import sys
        from pt2onnx.plugin import converter, hookimpl

        @converter("aten::abs.default")
        def abs_(op, self):
            raise TypeError("a bug in the converter")
        """,
    )
    assert test_opinfo.expected_outcome("abs", "int32") is None
    with pytest.raises(AssertionError, match=r"abs \(int32\) fails at sample 0 .* crash: ConversionError"):
        _verdict("abs", "int32", monkeypatch)


def test_a_topk_that_sorts_the_wrong_way_is_not_the_expected_wrong(project_plugin, monkeypatch):
    # topk (int64) is listed "wrong" for the order of tied indices only: the values must match.
    assert EXPECTED["topk"]["int64"][0] == "wrong"
    assert _verdict("topk", "int64", monkeypatch).startswith("xfail: wrong: ")
    project_plugin(
        "reversed_topk",
        """
        import sys
        from pt2onnx.plugin import converter, hookimpl
        from pt2onnx_aten import sorting

        @converter("aten::topk.default")
        def topk(op, self, k, dim=-1, largest=True, sorted=True):
            return sorting.topk(op, self, k, dim, not largest, sorted)
        """,
    )
    with pytest.raises(AssertionError, match="'sorted values' does not hold on the sample: the values differ"):
        _verdict("topk", "int64", monkeypatch)


def test_indices_that_repeat_a_tied_index_are_not_sorted_values():
    x = torch.tensor([[3.0, 1.0, 3.0]])
    sample = SampleInput(x, args=(2,))
    expected = torch.topk(x, 2)
    # Both select the value 3.0, but index 0 twice: no topk returns that.
    got = (expected.values, torch.tensor([[0, 0]]))
    with pytest.raises(AssertionError, match="an index repeats"):
        opinfo_samples.STILL_RIGHT["sorted values"](opinfos()["topk"], sample, (x,), expected, got)
    opinfo_samples.STILL_RIGHT["sorted values"](
        opinfos()["topk"], sample, (x,), expected, (expected.values, torch.tensor([[2, 0]]))
    )


def test_an_export_farther_from_float64_than_eager_is_not_closer():
    info = opinfos()["addbmm"]
    inputs = (torch.rand(2, 3), torch.rand(4, 2, 5), torch.rand(4, 5, 3))
    inputs = tuple(t.to(torch.bfloat16) for t in inputs)
    sample = SampleInput(inputs[0], args=inputs[1:])
    eager = torch.addbmm(*inputs)
    exact = torch.addbmm(*[t.double() for t in inputs]).to(torch.bfloat16)
    opinfo_samples.STILL_RIGHT["closer to float64"](info, sample, inputs, eager, exact)
    with pytest.raises(AssertionError, match="not closer"):
        opinfo_samples.STILL_RIGHT["closer to float64"](info, sample, inputs, eager, exact + 0.5)


def _entries():
    for name, per_dtype in EXPECTED.items():
        for dtype, entry in per_dtype.items():
            yield f"EXPECTED[{name!r}][{dtype!r}]", entry
    for name, entry in opinfo_expected.WITHOUT_ONEDNN_BFLOAT16.items():
        yield f"WITHOUT_ONEDNN_BFLOAT16[{name!r}]", entry
    for name, per_dtype in LATER_FAILURES.items():
        for dtype, (at, *entry) in per_dtype.items():
            assert isinstance(at, int) and at > 0, f"LATER_FAILURES[{name!r}][{dtype!r}]: sample {at!r}"
            yield f"LATER_FAILURES[{name!r}][{dtype!r}]", tuple(entry)


def test_every_expected_failure_names_its_kind_and_reason_and_a_wrong_one_what_is_still_right():
    for where, entry in _entries():
        kind, reason, *still_right = entry
        assert kind in opinfo_expected.KINDS, f"{where}: kind {kind!r} is none of {sorted(opinfo_expected.KINDS)}"
        assert isinstance(reason, str) and reason.strip(), f"{where}: no reason"
        if kind == "wrong":
            assert len(still_right) == 1 and still_right[0] in opinfo_samples.STILL_RIGHT, (
                f"{where}: a 'wrong' entry names what is still right, one of {sorted(opinfo_samples.STILL_RIGHT)}"
            )
        else:
            assert still_right == [], f"{where}: only a 'wrong' entry names what is still right"


def test_no_later_failure_is_shadowed_by_an_expected_one():
    # The test reads LATER_FAILURES only for pairs without an EXPECTED entry. A pair of
    # WITHOUT_ONEDNN_BFLOAT16 may be: on an AVX2 CPU its first sample already fails.
    shadowed = [
        (n, d)
        for n, per in LATER_FAILURES.items()
        for d in per
        if EXPECTED.get(n, {}).get(d, EXPECTED.get(n, {}).get("*"))
    ]
    assert shadowed == []


def _raised(error: Exception, cause: Exception | None = None) -> Exception:
    """``error`` as an export raises it: with its traceback and cause."""
    try:
        raise error from cause
    except Exception as e:  # noqa: BLE001 - caught to be returned
        return e


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (UnsupportedArgumentError("self", "FLOAT16", "onnxruntime's DFT runs float32 and float64 only"), "dtype"),
        (UnsupportedArgumentError("self", "a complex tensor", "the converter of aten::slice.Tensor ..."), "dtype"),
        (UnsupportedArgumentError("dtype", torch.float8_e5m2, "ONNX has float8 types from opset 19 on"), "dtype"),
        (UnsupportedArgumentError("scales", [1.7, 0.9], "antialiased resampling by other scales"), "error"),
        (UnsupportedOpsError({"aten::angle.default": [NodeLocation("angle", "aten::angle.default")]}), "error"),
        (_raised(ConversionError("converter abs from plugin 'aten' failed"), TypeError("a bug")), "crash"),
        (VerificationError("onnxruntime failed to run the model"), "runtime"),
    ],
)
def test_only_a_refusal_of_the_dtype_needs_no_entry_beyond_float32(error, kind):
    outcome = classify(error)
    assert outcome.kind == kind
    assert (opinfo_expected.accepted_without_entry(outcome) is not None) == (kind == "dtype")


def test_a_redraft_keeps_the_lists_after_expected_and_gives_an_op_failing_alike_one_entry(tmp_path):
    import record

    path = tmp_path / "opinfo_expected.py"
    path.write_text(Path(opinfo_expected.__file__).read_text())
    no_angle = "UnsupportedOpsError: no converter for aten::angle.default"
    crash = "ConversionError: [translate] converter abs from plugin 'aten' failed: TypeError: a bug"
    refused = "UnsupportedArgumentError: [translate] argument self='FLOAT16' cannot be exported: no DFT kernel"
    outcomes = {
        "angle": {"float32": ["error", no_angle, []], "int64": ["error", no_angle, []]},
        "abs": {"float32": ["pass", "", []], "int32": ["crash", crash, []]},
        "fft.fft": {"float32": ["pass", "", []], "float16": ["dtype", refused, []]},
        # Fails on an AVX2 CPU only: its own table holds it, so the draft does not.
        "nn.functional.conv_transpose2d": {"float32": ["pass", "", []], "bfloat16": ["wrong", "output bfloat16", []]},
    }
    record.write_expected(outcomes, path)
    drafted: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), drafted)
    assert drafted["EXPECTED"] == {
        "angle": {"*": EXPECTED["angle"]["*"]},
        "abs": {"int32": ("crash", f"DEFECT, the exporter crashes: {crash}")},
    }
    assert (drafted["LATER_FAILURES"], drafted["SKIPPED_FLOAT32"]) == (LATER_FAILURES, SKIPPED_FLOAT32)
    assert drafted["WITHOUT_ONEDNN_BFLOAT16"] == opinfo_expected.WITHOUT_ONEDNN_BFLOAT16


def test_op_db_leaves_the_suites_hypothesis_profile_loaded():
    # Importing op_db (as this module's collection did) registers and loads torch's own profile
    # unless the root conftest.py imported torch's test utilities before loading the suite's.
    opinfos()
    profile = os.environ.get("HYPOTHESIS_PROFILE", "dev")
    assert settings.default is settings.get_profile(profile)
    assert settings.default.deadline is None and not settings.default.derandomize
