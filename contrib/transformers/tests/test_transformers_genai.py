"""onnxruntime-genai runs the pack's exports: a folder from ``export_genai_folder`` (or the CLI's
``--genai``) loads in ``onnxruntime_genai.Model`` and generates, greedily, the tokens and logits
of ``model.generate(do_sample=False)``."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from genai_steps import logits_to_the_end
from tiny_models import CAUSAL_LMS, bpe_tokenizer, causal_lm
from transformers import AutoTokenizer

import pt2onnx
from pt2onnx_transformers import causal_lm_inputs, export_causal_lm, export_genai_folder, genai_config
from pt2onnx_transformers.cli import main
from pt2onnx_transformers.genai import GenaiError

og = pytest.importorskip("onnxruntime_genai")

pytestmark = pytest.mark.slow

PROMPT = [3, 14, 15, 92]
NEW_TOKENS = 8
#: Every tiny causal LM, and genai's model.type for it: its own name where genai 0.18 has it,
#: the generic "decoder" otherwise (GPT-2: genai's "gpt2" takes a combined past per layer).
GENAI_TYPES = {
    "llama": "llama",
    "mistral": "mistral",
    "qwen2": "qwen2",
    "phi3": "phi3",
    "gemma": "gemma",
    "gpt2": "decoder",
    "mixtral": "decoder",
}
#: Qwen2 as its checkpoints are configured: no bos_token_id (null broke a hand-written genai_config.json).
QWEN2 = {"bos_token_id": None, "eos_token_id": 99}


def _genai_greedy(folder, prompt: list[int], new_tokens: int) -> tuple[list[int], np.ndarray]:
    """Greedy decoding in onnxruntime-genai: the sequence, and the logits each new token was chosen from."""
    model = og.Model(str(folder))
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt) + new_tokens, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(prompt)
    logits = logits_to_the_end(generator)
    return [int(t) for t in generator.get_sequence(0)], np.concatenate([x.reshape(1, -1) for x in logits])


def _generate(model, prompt: list[int], new_tokens: int) -> tuple[list[int], np.ndarray]:
    out = model.generate(
        torch.tensor([prompt]),
        max_new_tokens=new_tokens,
        do_sample=False,
        output_logits=True,
        return_dict_in_generate=True,
    )
    return out.sequences[0].tolist(), torch.cat(out.logits).numpy()


def _nulls(tree, path: str = "") -> list[str]:
    if isinstance(tree, dict):
        return [p for key, value in tree.items() for p in _nulls(value, f"{path}.{key}")]
    return [path] if tree is None else []


def test_every_tiny_causal_lm_is_tested_in_genai():
    assert set(GENAI_TYPES) == set(CAUSAL_LMS)


@pytest.mark.drawn(2, "each architecture decodes through the same pack code")
@pytest.mark.parametrize("name", sorted(GENAI_TYPES))
def test_genai_generates_the_tokens_and_logits_of_generate(name, tmp_path):
    model = causal_lm(name, **(QWEN2 if name == "qwen2" else {}))
    export_genai_folder(model, tmp_path)
    config = json.loads((tmp_path / "genai_config.json").read_text())
    assert config["model"]["type"] == GENAI_TYPES[name]
    assert config["search"]["past_present_share_buffer"] is False
    assert _nulls(config) == []

    tokens, logits = _genai_greedy(tmp_path, PROMPT, NEW_TOKENS)
    expected_tokens, expected_logits = _generate(model, PROMPT, NEW_TOKENS)
    assert len(expected_tokens) == len(PROMPT) + NEW_TOKENS, "generate() stopped early: the comparison is short"
    assert tokens == expected_tokens
    np.testing.assert_allclose(logits, expected_logits, atol=1e-4, rtol=1e-4)


def test_the_folder_holds_the_model_its_data_and_the_config(tmp_path):
    export_genai_folder(causal_lm("llama"), tmp_path / "new")
    files = sorted(p.name for p in (tmp_path / "new").iterdir())
    assert files[0] == "genai_config.json" and files[1] == "model.onnx"
    assert len(files) == 3 and files[2].startswith("model.onnx.") and files[2].endswith(".data")


def test_missing_bos_and_pad_fall_back_to_eos_and_the_config_is_filled_from_the_model(tmp_path):
    model = causal_lm("qwen2", **QWEN2)
    config = genai_config(model, export_causal_lm(model), max_length=64)
    assert _nulls(config) == []
    assert (config["model"]["bos_token_id"], config["model"]["eos_token_id"], config["model"]["pad_token_id"]) == (
        99,
        99,
        99,
    )
    decoder = config["model"]["decoder"]
    assert decoder["inputs"] == {
        "input_ids": "input_ids",
        "attention_mask": "attention_mask",
        "past_key_names": "past_key_values.%d.key",
        "past_value_names": "past_key_values.%d.value",
    }
    assert decoder["outputs"] == {
        "logits": "logits",
        "present_key_names": "present.%d.key",
        "present_value_names": "present.%d.value",
    }
    assert (decoder["num_hidden_layers"], decoder["num_attention_heads"], decoder["num_key_value_heads"]) == (2, 4, 2)
    assert (decoder["head_size"], decoder["hidden_size"]) == (16, 64)
    assert (config["model"]["context_length"], config["model"]["vocab_size"]) == (128, 100)
    assert config["search"]["max_length"] == 64 and config["search"]["do_sample"] is False


def test_the_generation_config_comes_first_and_a_list_of_eos_ids_stops_genai_as_generate(tmp_path):
    model = causal_lm("llama")  # config: eos 2; greedy from PROMPT: 15, 94, 11, 33, 44, ...
    model.generation_config.eos_token_id = [98, 33]
    model.generation_config.do_sample, model.generation_config.top_k = True, 7
    export_genai_folder(model, tmp_path)
    config = json.loads((tmp_path / "genai_config.json").read_text())
    assert config["model"]["eos_token_id"] == [98, 33]
    assert config["model"]["bos_token_id"] == 1 and config["model"]["pad_token_id"] == 98
    assert config["search"]["do_sample"] is True and config["search"]["top_k"] == 7

    tokens, _ = _genai_greedy(tmp_path, PROMPT, NEW_TOKENS)
    expected, _ = _generate(model, PROMPT, NEW_TOKENS)
    assert expected[-1] == 33 and len(expected) < len(PROMPT) + NEW_TOKENS
    assert tokens == expected[:-1]  # genai (0.18) stops at an eos id without appending it; generate appends it


def test_a_model_without_eos_is_refused_with_what_to_set():
    model = causal_lm("qwen2")  # every special id None
    with pytest.raises(GenaiError, match="names no eos_token_id") as error:
        genai_config(model, export_causal_lm(model))
    assert "generation_config.eos_token_id" in str(error.value)


def test_the_tokenizer_is_saved_and_names_the_ids_the_model_does_not(tmp_path):
    tokenizer = bpe_tokenizer()
    model = causal_lm("qwen2")
    export_genai_folder(model, tmp_path, tokenizer=tokenizer)
    config = json.loads((tmp_path / "genai_config.json").read_text())
    assert (config["model"]["bos_token_id"], config["model"]["eos_token_id"]) == (1, 2)
    assert config["model"]["pad_token_id"] == 2
    assert (tmp_path / "tokenizer.json").is_file()
    genai_tokenizer = og.Tokenizer(og.Model(str(tmp_path)))
    text = "the lazy fox"
    assert [int(t) for t in genai_tokenizer.encode(text)] == tokenizer(text).input_ids
    assert genai_tokenizer.decode(tokenizer(text).input_ids) == text


def test_a_static_cache_export_is_refused_naming_the_inputs_genai_does_not_feed(llama):
    from transformers import StaticCache

    cache = StaticCache(config=llama.config, max_cache_len=16)
    with torch.no_grad():
        llama(input_ids=torch.randint(0, 100, (1, 4)), past_key_values=cache, use_cache=True)
    ids = causal_lm_inputs(llama, batch=1, sequence_length=1)["input_ids"]
    result = pt2onnx.export(llama, (), {"input_ids": ids, "past_key_values": cache, "use_cache": True})
    with pytest.raises(GenaiError, match=r"it also has past_key_values\.0\.cumulative_length"):
        genai_config(llama, result)


def test_the_cli_writes_a_genai_folder_with_the_checkpoints_tokenizer(tmp_path, capsys):
    model = causal_lm("qwen2", **QWEN2)
    model.save_pretrained(tmp_path / "qwen2")
    bpe_tokenizer().save_pretrained(tmp_path / "qwen2")
    folder = tmp_path / "genai"
    assert main(["causal-lm", str(tmp_path / "qwen2"), "--genai", str(folder), "--max-length", "40", "--verify"]) == 0
    out = capsys.readouterr().out
    assert f"saved {folder}:" in out
    # The model names only eos; bos and pad are the tokenizer's, as AutoTokenizer loads it from the checkpoint.
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "qwen2")
    ids = f"eos 99, bos {tokenizer.bos_token_id}, pad {tokenizer.pad_token_id}"
    assert f"genai_config.json: type qwen2, context 128, {ids}; {type(tokenizer).__name__}'s files" in out
    assert "max abs" in out and "BAD" not in out
    assert json.loads((folder / "genai_config.json").read_text())["search"]["max_length"] == 40
    assert (folder / "tokenizer.json").is_file()
    tokens, _ = _genai_greedy(folder, PROMPT, NEW_TOKENS)
    assert tokens == _generate(model, PROMPT, NEW_TOKENS)[0]


def test_the_cli_writes_no_tokenizer_for_a_bare_config(tmp_path, capsys):
    causal_lm("llama").config.save_pretrained(tmp_path / "llama")
    assert main(["causal-lm", str(tmp_path / "llama"), "--genai", str(tmp_path / "genai")]) == 0
    assert "eos 2, bos 1, pad 2; no tokenizer" in capsys.readouterr().out
    assert not (tmp_path / "genai" / "tokenizer.json").exists()
    og.Model(str(tmp_path / "genai"))


def test_the_cli_takes_genai_options_only_with_genai(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["causal-lm", str(tmp_path), "-o", str(tmp_path / "m.onnx"), "--max-length", "8"])
    assert exit_.value.code == 2
    assert "--tokenizer and --max-length go with --genai" in capsys.readouterr().err


def test_the_cli_reports_a_model_genai_cannot_run(tmp_path, capsys):
    causal_lm("qwen2").config.save_pretrained(tmp_path / "qwen2")  # no eos_token_id
    assert main(["causal-lm", str(tmp_path / "qwen2"), "--genai", str(tmp_path / "genai")]) == 1
    assert "names no eos_token_id" in capsys.readouterr().err
    assert not (tmp_path / "genai").exists()
