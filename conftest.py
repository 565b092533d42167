"""Test configuration shared by the whole repository: hypothesis profiles and torch threads."""

from __future__ import annotations

import os

import torch
from hypothesis import HealthCheck, settings

# Two test workers share two cores: one torch thread each keeps them from fighting.
torch.set_num_threads(1)

_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}
# ci: bounded and derandomized, so CI is reproducible and fits its time budget.
settings.register_profile("ci", max_examples=8, derandomize=True, print_blob=True, **_COMMON)
# dev: the default for local runs.
settings.register_profile("dev", max_examples=20, **_COMMON)
# thorough: many more examples, for hunting bugs locally.
settings.register_profile("thorough", max_examples=300, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
