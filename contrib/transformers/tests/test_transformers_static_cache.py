"""Static-cache exports (``export_causal_lm(cache="static", max_length=N)``): past buffers of ``N``
that ``present`` returns with the new tokens written in, which onnxruntime-genai runs with
``past_present_share_buffer: true`` (one buffer per layer, bound to past and present), and
``greedy_decode`` runs as it runs the dynamic cache."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from test_transformers_genai import PROMPT, QWEN2, _genai_greedy, _generate
from tiny_models import CAUSAL_LMS, causal_lm

from pt2onnx_transformers import (
    causal_lm_inputs,
    empty_cache,
    export_causal_lm,
    export_genai_folder,
    genai_config,
    greedy_decode,
)
from pt2onnx_transformers.cli import main
from pt2onnx_transformers.genai import GenaiError

og = pytest.importorskip("onnxruntime_genai")

pytestmark = pytest.mark.slow

MAX_LENGTH = 16
NEW_TOKENS = 8
#: Every tiny causal LM runs a static cache in genai (the overrides as in the dynamic tests).
STATIC = {name: QWEN2 if name == "qwen2" else {} for name in CAUSAL_LMS}


@pytest.fixture(scope="module")
def static_llama(llama):
    return export_causal_lm(llama, cache="static", max_length=MAX_LENGTH)


def _past_shapes(result) -> list[tuple]:
    return [tuple(v.shape) for v in result.model.graph.inputs if v.name.startswith("past_key_values.")]


def test_every_tiny_causal_lm_is_tested_with_a_static_cache():
    assert set(STATIC) == set(CAUSAL_LMS)


@pytest.mark.drawn(2, "each architecture decodes through the same pack code")
@pytest.mark.parametrize("name", sorted(STATIC))
def test_genai_runs_a_static_cache_with_shared_buffers_as_generate(name, tmp_path):
    model = causal_lm(name, **STATIC[name])
    result = export_genai_folder(model, tmp_path, cache="static", max_length=MAX_LENGTH)
    assert {shape[2] for shape in _past_shapes(result)} == {MAX_LENGTH}
    search = json.loads((tmp_path / "genai_config.json").read_text())["search"]
    assert search["past_present_share_buffer"] is True and search["max_length"] == MAX_LENGTH

    tokens, logits = _genai_greedy(tmp_path, PROMPT, NEW_TOKENS)
    expected_tokens, expected_logits = _generate(model, PROMPT, NEW_TOKENS)
    assert len(expected_tokens) == len(PROMPT) + NEW_TOKENS, "generate() stopped early: the comparison is short"
    assert tokens == expected_tokens
    np.testing.assert_allclose(logits, expected_logits, atol=1e-4, rtol=1e-4)


def test_greedy_decode_runs_a_static_export_as_generate(llama, static_llama):
    prompt = torch.tensor([PROMPT, [7, 8, 9, 10]])
    expected = llama.generate(prompt, max_new_tokens=NEW_TOKENS, do_sample=False)
    assert torch.equal(greedy_decode(static_llama, prompt, NEW_TOKENS), expected)


def test_a_short_static_cache_decodes_until_its_buffers_are_full(llama):
    # max_length 5: the example's past shrinks to 2 tokens, and decoding fills every row.
    result = export_causal_lm(llama, cache="static", max_length=5)
    prompt = torch.tensor([PROMPT[:2]])
    expected = llama.generate(prompt, max_new_tokens=3, do_sample=False)
    assert torch.equal(greedy_decode(result, prompt, 3), expected)


def test_present_is_the_past_with_the_new_rows_written_and_the_rest_unchanged(llama, static_llama):
    # Other sizes than the example's (batch 2, 3 tokens after 5): 3 sequences, 2 tokens after 7.
    past_length, new = 7, 2
    step = causal_lm_inputs(llama, batch=3, sequence_length=new, past_sequence_length=past_length, seed=3)
    with torch.no_grad():
        expected = llama(**step, use_cache=True)
    written = [layer.keys for layer in expected.cache.layers], [layer.values for layer in expected.cache.layers]
    # Noise in every row, the tail included: attention must not read what is not written yet.
    generator = torch.Generator().manual_seed(4)
    feeds = {"input_ids": step["input_ids"].numpy(), "attention_mask": step["attention_mask"].numpy()}
    for i, (keys, values) in enumerate(zip(*written)):
        for kind, tensor in (("key", keys), ("value", values)):
            buffer = torch.randn(3, tensor.shape[1], MAX_LENGTH, tensor.shape[3], generator=generator)
            buffer[:, :, :past_length] = tensor[:, :, :past_length]
            feeds[f"past_key_values.{i}.{kind}"] = buffer.numpy()
    names = static_llama.output_names
    outputs = dict(zip(names, static_llama.session().run(names, feeds)))

    np.testing.assert_allclose(outputs["logits"], expected.logits.numpy(), atol=1e-5, rtol=1e-5)
    end = past_length + new
    for i, (keys, values) in enumerate(zip(*written)):
        for kind, tensor in (("key", keys), ("value", values)):
            past, present = feeds[f"past_key_values.{i}.{kind}"], outputs[f"present.{i}.{kind}"]
            assert present.shape == past.shape
            np.testing.assert_array_equal(present[:, :, :past_length], past[:, :, :past_length])
            np.testing.assert_array_equal(present[:, :, end:], past[:, :, end:])
            np.testing.assert_allclose(present[:, :, past_length:end], tensor[:, :, past_length:], atol=1e-5)


def test_run_takes_zero_buffers_for_the_prompt_and_returns_them_written(llama, static_llama):
    ids = torch.tensor([PROMPT])
    output = static_llama.run(input_ids=ids, attention_mask=torch.ones_like(ids), cache=empty_cache(static_llama, 1))
    with torch.no_grad():
        expected = llama(input_ids=ids, use_cache=True)
    torch.testing.assert_close(output.logits, expected.logits, atol=1e-5, rtol=1e-5)
    keys = output.cache.layers[0].keys
    assert keys.shape == (1, 2, MAX_LENGTH, 16)
    torch.testing.assert_close(keys[:, :, : len(PROMPT)], expected.cache.layers[0].keys, atol=1e-5, rtol=1e-5)
    assert not keys[:, :, len(PROMPT) :].any()


@pytest.mark.parametrize("max_length", [None, 0, 3, "16", 16.0])
def test_a_bad_max_length_is_refused(llama, max_length):
    with pytest.raises(ValueError, match="max_length"):
        export_causal_lm(llama, cache="static", max_length=max_length)


def test_max_length_goes_only_with_a_static_cache_and_the_cache_is_dynamic_or_static(llama):
    with pytest.raises(ValueError, match="pass cache='static' with it"):
        export_causal_lm(llama, max_length=MAX_LENGTH)
    with pytest.raises(ValueError, match="'dynamic' \\(the default\\) or 'static'"):
        export_causal_lm(llama, cache="paged", max_length=MAX_LENGTH)


@pytest.mark.parametrize(("prompt_length", "new_tokens"), [(MAX_LENGTH + 1, 1), (10, MAX_LENGTH - 9)])
def test_greedy_decode_refuses_more_tokens_than_the_buffers_hold(static_llama, prompt_length, new_tokens):
    with pytest.raises(ValueError, match=f"do not fit the static cache of max_length {MAX_LENGTH}"):
        greedy_decode(static_llama, torch.ones(1, prompt_length, dtype=torch.int64), new_tokens)


def test_genai_config_shares_the_buffers_and_refuses_a_longer_max_length(llama, static_llama):
    config = genai_config(llama, static_llama, max_length=12)
    assert config["search"]["past_present_share_buffer"] is True and config["search"]["max_length"] == 12
    with pytest.raises(GenaiError, match="max_length 17 exceeds the static cache's 16"):
        genai_config(llama, static_llama, max_length=MAX_LENGTH + 1)


def test_genai_refuses_a_prompt_longer_than_the_buffers(llama, tmp_path):
    export_genai_folder(llama, tmp_path, cache="static", max_length=MAX_LENGTH)
    model = og.Model(str(tmp_path))
    generator = og.Generator(model, og.GeneratorParams(model))
    with pytest.raises(RuntimeError, match=f"exceeds max length \\({MAX_LENGTH}\\)"):
        generator.append_tokens(list(range(3, 3 + MAX_LENGTH + 1)))


def test_the_cli_writes_a_static_cache_genai_folder(tmp_path, capsys):
    model = causal_lm("qwen2", **QWEN2)
    model.save_pretrained(tmp_path / "qwen2")
    folder = tmp_path / "genai"
    argv = ["causal-lm", str(tmp_path / "qwen2"), "--genai", str(folder), "--static-cache", "--max-length", "16"]
    assert main([*argv, "--verify"]) == 0
    out = capsys.readouterr().out
    assert f"no tokenizer; past and present share buffers of {MAX_LENGTH}" in out
    assert "max abs" in out and "BAD" not in out
    assert json.loads((folder / "genai_config.json").read_text())["search"]["past_present_share_buffer"] is True
    tokens, _ = _genai_greedy(folder, PROMPT, NEW_TOKENS)
    assert tokens == _generate(model, PROMPT, NEW_TOKENS)[0]


def test_the_cli_exports_a_static_cache_to_a_file(tmp_path, capsys):
    import onnx

    causal_lm("llama").config.save_pretrained(tmp_path / "llama")
    argv = ["causal-lm", str(tmp_path / "llama"), "-o", str(tmp_path / "m.onnx"), "--static-cache", "--max-length"]
    assert main([*argv, "24"]) == 0
    graph = onnx.load(tmp_path / "m.onnx", load_external_data=False).graph
    past = next(v for v in graph.input if v.name == "past_key_values.0.key")
    assert past.type.tensor_type.shape.dim[2].dim_value == 24


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ([], "--static-cache needs --max-length"),
        (["--max-length", "3"], "--max-length 3: the static cache's example needs at least --sequence-length + 1"),
    ],
)
def test_the_cli_needs_a_max_length_for_a_static_cache(tmp_path, capsys, options, message):
    with pytest.raises(SystemExit) as exit_:
        main(["causal-lm", str(tmp_path), "-o", str(tmp_path / "m.onnx"), "--static-cache", *options])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
