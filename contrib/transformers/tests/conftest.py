"""Fixtures of the pack's tests: the tiny models of :mod:`tiny_models`."""

from __future__ import annotations

import pytest
import torch
from tiny_models import causal_lm


@pytest.fixture(scope="module")
def llama() -> torch.nn.Module:
    return causal_lm("llama")
