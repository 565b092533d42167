"""tests/case_draw.py: which cases a ``ci`` run leaves to the thorough profile, in a real pytest session."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = """
import pytest
from case_draw import skip_cases_not_run

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    skip_cases_not_run(items, seed=config.getoption("--seed-for-test"))

def pytest_addoption(parser):
    parser.addoption("--seed-for-test", default=0)
"""

TESTS = """
import pytest

@pytest.mark.drawn(2, "five of a kind")
@pytest.mark.parametrize("n", range(5))
def test_case(n):
    print("RAN", n)

@pytest.mark.thorough("a further case")
def test_further():
    pass

def test_plain():
    pass
"""


@pytest.fixture
def session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_cases=TESTS)
    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # case_draw.py

    def run(*args: str) -> tuple[pytest.RunResult, list[str]]:
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-s", "-rs", *args)
        return result, sorted(re.findall(r"RAN (\d)", result.stdout.str()))

    return run


def test_a_run_takes_count_cases_and_says_why_it_skips_the_others(session):
    result, ran = session("--seed-for-test=7")
    assert len(ran) == 2
    result.assert_outcomes(passed=3, skipped=4)
    out = result.stdout.str()
    assert (
        "not drawn by seed 7: each run takes 2 of these 5 cases, HYPOTHESIS_PROFILE=thorough all (five of a kind)"
        in out
    )
    assert "thorough profile only (HYPOTHESIS_PROFILE=thorough): a further case" in out


def test_the_same_seed_draws_the_same_cases_and_other_seeds_others(session):
    drawn = {seed: session(f"--seed-for-test={seed}")[1] for seed in range(7, 12)}
    assert session("--seed-for-test=7")[1] == drawn[7]
    assert len({tuple(cases) for cases in drawn.values()}) > 1


def test_a_case_named_on_the_command_line_always_runs(session):
    for n in range(5):
        result, ran = session("--seed-for-test=7", "-k", f"test_case and {n}")
        assert ran == [str(n)], result.stdout.str()


def test_a_drawn_marker_without_a_count_is_a_usage_error(session, pytester):
    pytester.makepyfile(test_bad='import pytest\n\n@pytest.mark.drawn("why")\ndef test_x():\n    pass\n')
    result, _ = session("test_bad.py")
    assert "write drawn(count, why), count a positive int" in result.stderr.str() + result.stdout.str()
