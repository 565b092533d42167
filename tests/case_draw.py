"""Which cases a ``ci`` or ``dev`` run leaves to the thorough profile, and why each is skipped.

Two markers keep the suite within CI's 30-minute budget, each skip saying why:

* ``thorough(why)``: a further case of what a test of every run already proves (another
  detector of a family the ci run exports); only ``HYPOTHESIS_PROFILE=thorough`` runs it.
* ``drawn(count, why)``: of the test's parametrized cases (architectures, commands, opsets),
  each run takes ``count``, drawn from the run's hypothesis seed as the OpInfo test draws its
  dtypes: every run covers another slice, the same seed the same slice (``./dev.sh test``
  prints it), and a case named on the command line (``-k``, a node id) always runs.
"""

from __future__ import annotations

import random

import pytest


def skip_cases_not_run(items: list[pytest.Item], *, seed: object) -> None:
    """Mark the ``thorough`` tests and the undrawn cases of ``drawn`` tests among ``items`` skipped."""
    drawn_tests: dict[tuple[str, str], list[pytest.Item]] = {}
    for item in items:
        marker = item.get_closest_marker("thorough")
        if marker is not None:
            why = marker.args[0] if marker.args else "a further case"
            item.add_marker(pytest.mark.skip(reason=f"thorough profile only (HYPOTHESIS_PROFILE=thorough): {why}"))
        elif item.get_closest_marker("drawn") is not None:
            drawn_tests.setdefault((str(item.path), getattr(item, "originalname", item.name)), []).append(item)
    for (_, name), cases in drawn_tests.items():
        count, why = _drawn_args(cases[0])
        # A string seed: Random hashes it the same in every process (xdist workers too).
        ids = sorted(case.nodeid for case in cases)
        chosen = set(random.Random(f"{seed}/{name}").sample(ids, min(count, len(ids))))
        for case in cases:
            if case.nodeid not in chosen:
                reason = (
                    f"not drawn by seed {seed}: each run takes {count} of these {len(ids)} cases, "
                    f"HYPOTHESIS_PROFILE=thorough all ({why})"
                )
                case.add_marker(pytest.mark.skip(reason=reason))


def _drawn_args(item: pytest.Item) -> tuple[int, str]:
    marker = item.get_closest_marker("drawn")
    assert marker is not None
    if not marker.args or not isinstance(marker.args[0], int) or marker.args[0] < 1:
        raise pytest.UsageError(f"{item.nodeid}: write drawn(count, why), count a positive int")
    return marker.args[0], marker.args[1] if len(marker.args) > 1 else "further cases of one check"
