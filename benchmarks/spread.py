"""Ratios with their spread: how the benchmark turns repeated timings into figures that hold.

Two kinds of spread, because the two measurements repeat differently:

- export time: each repeat exports every model with every exporter in its own process, so
  each repeat gives one ratio per model; the figure is the median of those ratios and the
  spread their min-max (:func:`over_repeats`);
- onnxruntime latency: one process times every exporter's model in interleaved rounds, so
  each round gives one time per exporter under the same machine load; the figure is the
  ratio of the medians over all rounds and the spread a bootstrap interval over rounds,
  resampled whole so a round's load stays with every exporter in it
  (:func:`bootstrap_ratio`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

#: Bootstrap resamples and the interval they give (a 95% percentile interval).
RESAMPLES = 2000
INTERVAL = (2.5, 97.5)


@dataclass(frozen=True)
class Spread:
    """A figure with its spread: ``value`` (the median) within ``low``-``high``."""

    value: float
    low: float
    high: float

    def to_dict(self) -> dict[str, float]:
        """The JSON form: ``{"value", "low", "high"}``."""
        return asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any] | None) -> Spread | None:
        """The inverse of :meth:`to_dict`; ``None`` stays ``None``."""
        return None if data is None else Spread(data["value"], data["low"], data["high"])

    def __str__(self) -> str:
        return f"{self.value:.2f} ({self.low:.2f}-{self.high:.2f})"


def over_repeats(values: Sequence[float]) -> Spread | None:
    """The median of per-repeat values and their min-max; ``None`` if there are none."""
    if not values:
        return None
    return Spread(statistics.median(values), min(values), max(values))


def ratios_per_repeat(ours: Sequence[float | None], reference: Sequence[float | None]) -> list[float]:
    """``ours[r] / reference[r]`` for every repeat ``r`` where both succeeded."""
    return [a / b for a, b in zip(ours, reference) if a is not None and b is not None and b > 0]


def bootstrap_ratio(
    ours: Sequence[float], reference: Sequence[float], resamples: int = RESAMPLES, seed: int = 0
) -> Spread:
    """``median(ours) / median(reference)`` with a bootstrap interval over paired rounds.

    ``ours[i]`` and ``reference[i]`` were timed in the same round; a resample draws rounds
    with replacement and keeps both times of each drawn round together.
    """
    a, b = np.asarray(ours, dtype=float), np.asarray(reference, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or not a.size:
        raise ValueError(f"need two equal, non-empty lists of round times, got {a.shape} and {b.shape}")
    picks = np.random.default_rng(seed).integers(0, a.size, size=(resamples, a.size))
    ratios = np.median(a[picks], axis=1) / np.median(b[picks], axis=1)
    low, high = np.percentile(ratios, INTERVAL)
    return Spread(float(np.median(a) / np.median(b)), float(low), float(high))


def median_of(spreads: Sequence[Spread | None]) -> float | None:
    """The median across models of their figures (the median of medians)."""
    values = [s.value for s in spreads if s is not None]
    return statistics.median(values) if values else None


def worst_of(spreads: Sequence[Spread | None]) -> float | None:
    """The largest figure across models."""
    values = [s.value for s in spreads if s is not None]
    return max(values) if values else None
