"""Without the pack (blocked, in a fresh process: its pytree types are registered process-wide), pt2onnx is as before."""

from __future__ import annotations

import textwrap

import pytest
from fresh_process import run_script

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent(
    """
    import sys
    import torch
    import pt2onnx
    from pt2onnx.errors import CaptureError
    from tiny_models import causal_lm

    model = causal_lm("llama")
    ids = torch.randint(0, 100, (2, 4))
    result = pt2onnx.export(model, (), {"input_ids": ids, "use_cache": False}, disable=["transformers"])
    check = result.verify(input_ids=ids, use_cache=False)
    assert check.ok, check
    assert result.report.preparations == [], result.report.preparations
    assert result.output_names == ["logits"], result.output_names
    try:
        pt2onnx.export(model, (), {"input_ids": ids, "use_cache": True}, disable=["transformers"])
    except CaptureError as e:
        assert "DynamicCache" in str(e) and "register a pytree" in str(e), e
    else:
        sys.exit("a DynamicCache output exported without the pack")
    print("as before")
    """
)


def test_blocked_pack_leaves_the_builtin_exporter_as_it_was():
    assert run_script(SCRIPT).strip().endswith("as before")
