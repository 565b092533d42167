"""The benchmark's ratio arithmetic (``benchmarks/spread.py``): no timing here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str) -> ModuleType:
    """A module of ``benchmarks/`` under a private name: benchmarks/ stays off the session's path."""
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


spread = _load("spread")


def test_over_repeats_is_the_median_with_min_and_max():
    assert spread.over_repeats([0.31, 0.22, 0.5]) == spread.Spread(0.31, 0.22, 0.5)
    assert spread.over_repeats([0.2, 0.4]) == spread.Spread(pytest.approx(0.3), 0.2, 0.4)
    assert spread.over_repeats([]) is None


def test_ratios_per_repeat_pair_repeats_and_skip_failures():
    # Repeat 1 failed for us, repeat 2 measured nothing for the reference: both left out.
    assert spread.ratios_per_repeat([1.0, None, 3.0, 2.0], [2.0, 4.0, 0.0, 8.0]) == [0.5, 0.25]


def test_bootstrap_keeps_each_round_paired():
    # The load changes threefold from round to round but hits both alike: every round's ratio
    # is 0.8, so every resample's is too. Resampling the two lists apart would spread it.
    load = [1.0, 3.0, 1.5, 2.5, 1.1, 2.9, 1.2, 2.0]
    reference = [0.010 * x for x in load]
    ours = [0.008 * x for x in load]
    result = spread.bootstrap_ratio(ours, reference)
    assert result.value == pytest.approx(0.8)
    assert result.low == pytest.approx(0.8) and result.high == pytest.approx(0.8)


def test_bootstrap_interval_widens_with_disagreeing_rounds():
    reference = [1.0] * 10
    ours = [0.7, 1.3, 0.8, 1.2, 0.9, 1.1, 1.0, 0.75, 1.25, 1.0]
    result = spread.bootstrap_ratio(ours, reference)
    assert result.value == pytest.approx(1.0)
    assert 0.7 <= result.low < 1.0 < result.high <= 1.3
    assert spread.bootstrap_ratio(ours, reference) == result  # seeded: the same figures every run


def test_bootstrap_refuses_unpaired_rounds():
    with pytest.raises(ValueError, match="equal, non-empty"):
        spread.bootstrap_ratio([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="equal, non-empty"):
        spread.bootstrap_ratio([], [])


def test_median_and_worst_across_models_skip_missing_ones():
    figures = [spread.Spread(0.9, 0.8, 1.0), None, spread.Spread(0.5, 0.4, 0.6), spread.Spread(1.1, 1.0, 1.2)]
    assert spread.median_of(figures) == 0.9
    assert spread.worst_of(figures) == 1.1
    assert spread.median_of([None]) is None and spread.worst_of([]) is None


def test_spread_round_trips_through_json_form():
    figure = spread.Spread(0.3, 0.25, 0.41)
    assert spread.Spread.from_dict(figure.to_dict()) == figure
    assert spread.Spread.from_dict(None) is None
    assert str(figure) == "0.30 (0.25-0.41)"
