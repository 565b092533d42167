"""onnxruntime-genai runs the pack's Whisper export: a folder from ``export_genai_whisper`` (or the CLI's
``seq2seq --genai``) loads in ``onnxruntime_genai.Model`` and decodes greedily the tokens and logits of
eager PyTorch: ``generate()`` from the start token, and a multi-token prompt (start, language, task)."""

from __future__ import annotations

import functools
import json
import wave

import numpy as np
import pytest
import torch
from genai_steps import logits_to_the_end
from tiny_models import bpe_tokenizer, seq2seq

from pt2onnx_transformers import export_genai_folder
from pt2onnx_transformers.cli import main
from pt2onnx_transformers.genai import GenaiError
from pt2onnx_transformers.genai_whisper import GenaiWhisper, export_genai_whisper

og = pytest.importorskip("onnxruntime_genai")

pytestmark = pytest.mark.slow

NEW_TOKENS = 12
LAYERS = 2


@functools.cache
def _whisper() -> torch.nn.Module:
    """The tiny Whisper, with the 3000 frames genai requires; plain greedy generation (no forced or suppressed tokens)."""
    model = seq2seq("whisper", max_source_positions=1500)
    config = model.generation_config
    config.eos_token_id = config.forced_eos_token_id = config.forced_bos_token_id = None
    config.suppress_tokens = config.begin_suppress_tokens = None
    model.config.eos_token_id = 2  # genai_config.json needs one; generation above runs without it
    return model


@functools.cache
def _exported() -> GenaiWhisper:
    return export_genai_whisper(_whisper(), quiet=True)


def _features(batch: int, seed: int) -> torch.Tensor:
    config = _whisper().config
    return torch.randn(batch, config.num_mel_bins, 3000, generator=torch.Generator().manual_seed(seed))


def _genai_greedy(folder, features: torch.Tensor, prompt: list[int], new_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's tokens, and the logits each new token was chosen from (step, batch, vocab)."""
    model = og.Model(str(folder))
    params = og.GeneratorParams(model)
    # genai sizes the encoder's outputs by the batch size of the search, set before the audio.
    params.set_search_options(max_length=len(prompt) + new_tokens, do_sample=False, batch_size=features.shape[0])
    generator = og.Generator(model, params)
    generator.set_model_input("audio_features", features.numpy())
    generator.append_tokens(np.array([prompt] * features.shape[0], dtype=np.int32))
    logits = logits_to_the_end(generator)
    tokens = np.stack([generator.get_sequence(i) for i in range(features.shape[0])])
    return tokens, np.stack([x.reshape(features.shape[0], -1) for x in logits])


def _eager_greedy(features: torch.Tensor, prompt: list[int], new_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """Greedy decoding in eager PyTorch, the whole sequence recomputed at each step (no cache at all)."""
    model = _whisper()
    tokens = torch.tensor([prompt] * features.shape[0])
    logits = []
    with torch.no_grad():
        encoded = model.get_encoder()(features)
        for _ in range(new_tokens):
            step = model(encoder_outputs=encoded, decoder_input_ids=tokens).logits[:, -1]
            logits.append(step.numpy())
            tokens = torch.cat([tokens, step.argmax(-1, keepdim=True)], dim=1)
    return tokens.numpy(), np.stack(logits)


def _until_eos(new_tokens: list[int]) -> list[int]:
    """The new tokens genai keeps: it ends a sequence at the end token without appending it (eager goes on)."""
    eos = _whisper().config.eos_token_id
    return new_tokens[: new_tokens.index(eos)] if eos in new_tokens else new_tokens


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from transformers import WhisperFeatureExtractor

    path = tmp_path_factory.mktemp("whisper-genai")
    extractor = WhisperFeatureExtractor(feature_size=80)
    export_genai_whisper(_whisper(), path, feature_extractor=extractor, tokenizer=bpe_tokenizer(), quiet=True)
    return path


def test_genai_decodes_from_the_start_token_as_generate(folder):
    features = _features(2, seed=1)
    start = _whisper().config.decoder_start_token_id
    tokens, logits = _genai_greedy(folder, features, [start], NEW_TOKENS)
    with torch.no_grad():
        expected = _whisper().generate(
            input_features=features, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False, num_beams=1
        )
    # Whisper's generate() returns the tokens after its start token.
    assert tokens[:, 1:].tolist() == expected.tolist()
    assert len(set(tokens[0, 1:].tolist())) > 2, "a decoding stuck on one token would not test the cache"
    np.testing.assert_allclose(logits, _eager_greedy(features, [start], NEW_TOKENS)[1], atol=1e-3, rtol=1e-3)


def test_genai_decodes_a_prompt_of_several_tokens_from_an_empty_past(folder):
    # genai's first decoder run takes the whole prompt (start, language, task, ...) with a past of length 0.
    features = _features(1, seed=2)
    prompt = [_whisper().config.decoder_start_token_id, 50, 60, 70]
    tokens, logits = _genai_greedy(folder, features, prompt, NEW_TOKENS)
    expected_tokens, expected_logits = _eager_greedy(features, prompt, NEW_TOKENS)
    new = _until_eos(expected_tokens[0, len(prompt) :].tolist())
    assert len(new) >= 5, "too few tokens before the end token to test the cache"
    assert tokens.tolist() == [prompt + new]
    np.testing.assert_allclose(logits, expected_logits[: len(new) + 1], atol=1e-3, rtol=1e-3)


def test_genai_transcribes_an_audio_file_through_the_folders_audio_processor(folder, tmp_path):
    """From a WAV file: genai's processor computes the log-mel features transformers' feature extractor
    computes (away from the clip's two ends, where the two pad the signal differently), and decoding
    them gives eager's tokens."""
    from transformers import WhisperFeatureExtractor

    rate = 16000
    time = np.arange(2 * rate) / rate
    sound = 0.3 * np.sin(2 * np.pi * 440 * time) + 0.05 * np.random.default_rng(0).standard_normal(time.size)
    pcm = (sound * 32767).astype(np.int16)
    with wave.open(str(tmp_path / "clip.wav"), "wb") as file:
        file.setnchannels(1), file.setsampwidth(2), file.setframerate(rate)
        file.writeframes(pcm.tobytes())
    model = og.Model(str(folder))
    inputs = model.create_multimodal_processor()("the fox", audios=og.Audios.open(str(tmp_path / "clip.wav")))
    features = inputs["audio_features"].as_numpy()
    expected = WhisperFeatureExtractor(feature_size=80)(pcm / 32768.0, sampling_rate=rate, return_tensors="np")
    interior = slice(2, 195)  # 2 s are 200 frames of 10 ms
    np.testing.assert_allclose(features[..., interior], expected.input_features[..., interior], atol=1e-4)

    prompt = [int(t) for t in inputs["input_ids"].as_numpy()[0]]
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt) + 6, do_sample=False)
    generator = og.Generator(model, params)
    generator.set_inputs(inputs)
    while not generator.is_done():
        generator.generate_next_token()
    eager = _eager_greedy(torch.from_numpy(features), prompt, 6)[0][0].tolist()
    assert [int(t) for t in generator.get_sequence(0)] == prompt + _until_eos(eager[len(prompt) :])


def test_the_folder_holds_genai_builders_names_and_files(folder):
    files = sorted(p.name for p in folder.iterdir())
    assert [f for f in files if not f.endswith(".data") and not f.startswith(("tokenizer", "special"))] == [
        "audio_processor_config.json",
        "decoder.onnx",
        "encoder.onnx",
        "genai_config.json",
    ]
    assert sum(f.endswith(".data") for f in files) == 2
    exported = _exported()
    cross = [f"{kind}_cross_{i}" for i in range(LAYERS) for kind in ("past_key", "past_value")]
    own = [f"{kind}_self_{i}" for i in range(LAYERS) for kind in ("past_key", "past_value")]
    assert exported.encoder.input_names == ["audio_features"]
    assert exported.encoder.output_names == ["hidden_states"] + [c.replace("past_", "present_") for c in cross]
    assert sorted(exported.decoder.input_names) == sorted(["input_ids", *own, *cross])
    assert exported.decoder.output_names == ["logits"] + [o.replace("past_", "present_") for o in own]
    config = json.loads((folder / "genai_config.json").read_text())["model"]
    assert config["type"] == "whisper"
    assert config["decoder"]["inputs"]["cross_past_key_names"] == "past_key_cross_%d"
    assert config["encoder"]["outputs"]["cross_present_value_names"] == "present_value_cross_%d"
    assert (config["decoder"]["num_hidden_layers"], config["decoder"]["head_size"]) == (LAYERS, 16)
    mel = json.loads((folder / "audio_processor_config.json").read_text())["feature_extraction"]["sequence"][-1]
    assert mel["operation"]["attrs"] == {"chunk_size": 30, "hop_length": 160, "n_fft": 400, "n_mel": 80}


def test_a_model_genai_cannot_run_as_whisper_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(GenaiError, match=r"3000 frames.*2 \* max_source_positions = 64"):
        export_genai_whisper(seq2seq("whisper"), tmp_path / "short", quiet=True)
    with pytest.raises(GenaiError, match="Whisper's; got T5ForConditionalGeneration"):
        export_genai_whisper(seq2seq("t5"), tmp_path / "t5", quiet=True)
    with pytest.raises(GenaiError, match="encoder-decoder model") as refused:
        export_genai_folder(_whisper(), tmp_path / "as-causal-lm")
    assert "export_genai_whisper" in str(refused.value)
    assert not any(tmp_path.iterdir())


def test_the_cli_writes_a_whisper_genai_folder(tmp_path, capsys):
    _whisper().config.save_pretrained(tmp_path / "whisper")
    assert main(["seq2seq", str(tmp_path / "whisper"), "--genai", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "genai_config.json: type whisper" in out, out
    assert "no audio_processor_config.json" in out, out
    assert json.loads((tmp_path / "out" / "genai_config.json").read_text())["model"]["type"] == "whisper"
    og.Model(str(tmp_path / "out"))  # loads both graphs with the config's names


def test_the_cli_refuses_genai_for_a_model_genai_does_not_run_as_whisper(tmp_path, capsys):
    seq2seq("t5").config.save_pretrained(tmp_path / "t5")
    assert main(["seq2seq", str(tmp_path / "t5"), "--genai", str(tmp_path / "out")]) == 1
    assert "Whisper's; got T5ForConditionalGeneration" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
