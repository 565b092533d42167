"""Every export loads the pack, so loading it must not import transformers (about 0.5 s a process)."""

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

    result = pt2onnx.export(torch.nn.Linear(3, 2), (torch.randn(2, 3),))
    assert "transformers" in [p.name for p in result.report.plugins], result.report.plugins
    assert "transformers" not in sys.modules, "loading the pack imported transformers"

    # The cache types are named by path: the first export after transformers is imported registers them.
    from tiny_models import causal_lm
    from pt2onnx_transformers import causal_lm_inputs

    model = causal_lm("llama")
    inputs = causal_lm_inputs(model, batch=2, sequence_length=3, past_sequence_length=4)
    result = pt2onnx.export(model, (), {**inputs, "use_cache": True})
    assert "past_key_values.0.key" in result.input_names, result.input_names
    assert "present.0.key" in result.output_names, result.output_names
    check = result.verify(**inputs, use_cache=True)
    assert check.ok, check
    print("transformers imported only by the user")
    """
)


def test_loading_the_pack_does_not_import_transformers():
    assert run_script(SCRIPT).strip().endswith("transformers imported only by the user")
