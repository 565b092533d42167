"""Test configuration shared by the whole repository: shared helpers on the path, hypothesis profiles, torch threads."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import onnxruntime as ort
import pytest
import torch
from hypothesis import HealthCheck, Phase, settings

# Helpers shared by the test folders (tests/pack_install.py, ...) are imported by name from
# tests/, whichever folder the test is in (tests/custom_ops, plugins/*/tests, contrib/*/tests):
# first on the path, where pytest would put it for tests/ itself.
_TESTS = str(Path(__file__).resolve().parent / "tests")
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from case_draw import skip_cases_not_run  # noqa: E402 - tests/ is on the path from here on

# Two test workers share two cores: one torch thread each keeps them from fighting, and one
# onnxruntime thread per session. Its default (a pool thread per core, spinning between ops)
# made three aten test files take 128 s against 101 s with -n 2 (222 against 176 CPU-s).
torch.set_num_threads(1)
_ort_session_init = ort.InferenceSession.__init__


def _one_thread_session(
    self: ort.InferenceSession, path_or_bytes: Any, sess_options: Any = None, *args: Any, **kwargs: Any
) -> None:
    options = sess_options if sess_options is not None else ort.SessionOptions()
    if options.intra_op_num_threads == 0:  # onnxruntime's "one per core", unless the test chose
        options.intra_op_num_threads = 1
    _ort_session_init(self, path_or_bytes, options, *args, **kwargs)


ort.InferenceSession.__init__ = _one_thread_session  # type: ignore[method-assign]

# No explain phase: once a test fails, hypothesis's explain phase traces every later run
# with sys.settrace (Python < 3.12) and re-runs the failing example ~100-400 times with
# parts varied, only to add "or any other generated value" comments and lines of pt2onnx's
# internals to the report. On a wrong amax converter (issue #28) it took 109-160 s of the
# 163-196 s a failing test ran; without it the test fails, shrunk, in about 20 s.
_PHASES = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink]
# From hypothesis's own defaults, not from the profile loaded now: where the variable CI is set,
# hypothesis loads its built-in "ci" profile (derandomized: the same inputs on every run,
# whatever the seed) before this file runs, and a profile registered on it inherited that.
_COMMON = {
    "parent": settings.get_profile("default"),
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}
# torch's test utilities (tests/opinfo imports op_db, and with it these) register a hypothesis
# profile "dev" of their own (10 examples) and load it on import, or "pytorch_ci" (50 examples,
# derandomized: every run the same inputs, whatever the seed) wherever the variable CI is set.
# Collecting tests/opinfo did so in every whole run, after this file had loaded its profile, so
# the property tests ran torch's profile, not this one. Imported first, the profiles below win.
import torch.testing._internal.common_utils  # noqa: E402

# ci: 10 random examples per property test, so every CI run searches new inputs. The seed
# is chosen and printed by ./dev.sh (HYPOTHESIS_SEED=N ./dev.sh test reproduces a run).
# 10 is what every whole run here drew under torch's profile (every registration proven), and
# a property-test file takes about half the time it takes at 20 (test_aten_unary.py 0.62
# against 1.08 CPU-min). The registration drawn most rarely of those only property tests prove
# (max_pool3d, 3 draws in 20) is converted on a fixed input too (test_every_max_pool_overload).
settings.register_profile("ci", max_examples=10, phases=_PHASES, print_blob=True, **_COMMON)
# dev: the default for local runs.
settings.register_profile("dev", max_examples=20, phases=_PHASES, print_blob=True, **_COMMON)
# triage: the ci profile's search without shrinking: which tests fail, fast (no minimal example).
settings.register_profile("triage", max_examples=20, phases=[Phase.generate], print_blob=True, **_COMMON)
# thorough: hunting bugs (HYPOTHESIS_PROFILE=thorough ./dev.sh test).
settings.register_profile("thorough", max_examples=300, phases=_PHASES, print_blob=True, **_COMMON)
_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "dev")
settings.load_profile(_PROFILE)


@pytest.hookimpl(trylast=True)  # after -k and -m: a case picked by name always runs
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Outside the thorough profile, skip the tests marked ``thorough`` and the cases of a ``drawn``
    test that this run's seed did not draw (tests/case_draw.py), within CI's 30-minute budget."""
    if _PROFILE != "thorough":
        skip_cases_not_run(items, seed=config.getoption("hypothesis_seed", None) or 0)


# assert_exports_like_eager checks its export at the oldest opset its converters serve too:
# on every call when hunting bugs; else on each test's first call and one in 4 of the others,
# by their inputs (on the unary and reduction tests every call costs +94% CPU time, 4 +12%).
os.environ.setdefault("PT2ONNX_OLDEST_OPSET_EVERY", "1" if _PROFILE == "thorough" else "4")

# pt2onnx-ort is imported from its source, not installed: installed, it would win over the
# builtin converters in every test meant to prove them. Its tests pass it with plugins=[...];
# tests/custom_ops installs it into a temporary directory to check discovery. Imported here
# (not in contrib/ort/tests) so that the session's controller can list what it registers
# for `--pt2onnx-prove pt2onnx_ort`.
_ORT_PACKAGE = Path(__file__).resolve().parent / "contrib" / "ort" / "src" / "pt2onnx_ort"
if "pt2onnx_ort" not in sys.modules:
    _spec = importlib.util.spec_from_file_location(
        "pt2onnx_ort", _ORT_PACKAGE / "__init__.py", submodule_search_locations=[str(_ORT_PACKAGE)]
    )
    assert _spec is not None and _spec.loader is not None
    sys.modules["pt2onnx_ort"] = _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
