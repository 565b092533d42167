"""Encoder-decoder models exported as optimum's graphs decode as ``model.generate`` does.

Each tiny model is exported once (:func:`export_seq2seq`); its greedy decoding in onnxruntime
(:func:`seq2seq_greedy_decode`), through the two decoder graphs and through the merged one, must
give generate()'s tokens on two inputs of other sizes than the export's, and every graph must match
eager PyTorch at yet other sizes.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from tiny_models import SEQ2SEQ, causal_lm, seq2seq

from pt2onnx_transformers.cli import main
from pt2onnx_transformers.merged import USE_CACHE_BRANCH, merge_decoders
from pt2onnx_transformers.seq2seq import Seq2SeqExport, export_seq2seq, seq2seq_greedy_decode

pytestmark = pytest.mark.slow

NEW_TOKENS = 15
LAYERS = 2
# The wide random weights (tiny_models.SEQ2SEQ) make logits in the hundreds: float32 rounding is ~1e-4 of them.
TOLERANCE = {"_atol": 1e-3, "_rtol": 1e-3}


@functools.cache
def _exported(name: str) -> tuple[torch.nn.Module, Seq2SeqExport]:
    model = seq2seq(name)
    config = model.generation_config
    # Plain greedy decoding of all NEW_TOKENS tokens: no end token, no forced or suppressed tokens.
    config.eos_token_id = config.forced_eos_token_id = config.forced_bos_token_id = None
    config.bad_words_ids = config.suppress_tokens = config.begin_suppress_tokens = None
    config.pad_token_id = 0
    return model, export_seq2seq(model, quiet=True)


def _source(name: str, model: torch.nn.Module, batch: int, length: int, seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    if name == "whisper":
        frames = 2 * model.config.max_source_positions
        return {"input_features": torch.randn(batch, model.config.num_mel_bins, frames, generator=generator)}
    ids = torch.randint(3, 100, (batch, length), generator=generator)
    mask = torch.ones_like(ids)
    mask[-1, length - 2 :] = 0  # the last row padded: the encoder mask reaches cross-attention
    return {"input_ids": ids, "attention_mask": mask}


@pytest.mark.parametrize("name", sorted(SEQ2SEQ))
@pytest.mark.parametrize(
    ("length", "seed"),
    [(5, 1), pytest.param(11, 2, marks=pytest.mark.thorough("a longer prompt through the same graphs"))],
)
def test_greedy_tokens_match_generate(name, length, seed):
    model, exported = _exported(name)
    source = _source(name, model, 2, length, seed)
    inputs = next(iter(source.values()))
    got = seq2seq_greedy_decode(exported, inputs, NEW_TOKENS, attention_mask=source.get("attention_mask"))
    with torch.no_grad():
        expected = model.generate(
            **source, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False, num_beams=1
        )
    merged = seq2seq_greedy_decode(
        exported, inputs, NEW_TOKENS, attention_mask=source.get("attention_mask"), merged=True
    )
    if name == "whisper":
        # Whisper's generate() leaves its decoder start token out
        got, merged = got[:, 1:], merged[:, 1:]
    assert got.tolist() == expected.tolist()
    assert merged.tolist() == expected.tolist()


@pytest.mark.parametrize("name", sorted(SEQ2SEQ))
def test_graph_names(name):
    _, exported = _exported(name)
    speech = name == "whisper"
    assert exported.encoder.input_names == (["input_features"] if speech else ["input_ids", "attention_mask"])
    assert exported.encoder.output_names == ["last_hidden_state"]
    own = ["input_ids", "encoder_hidden_states"] + ([] if speech else ["encoder_attention_mask"])
    cache = [f"{i}.{part}.{kv}" for i in range(LAYERS) for part in ("decoder", "encoder") for kv in ("key", "value")]
    present = ["logits"] + [f"present.{c}" for c in cache]
    assert exported.decoder.input_names == own
    assert exported.decoder.output_names == present
    assert exported.decoder_with_past.input_names == own + [f"past_key_values.{c}" for c in cache]
    assert exported.decoder_with_past.output_names == present


@pytest.mark.parametrize("name", sorted(SEQ2SEQ))
def test_graphs_match_eager_at_other_sizes(name):
    model, exported = _exported(name)
    source = _source(name, model, 3, 6, 3)
    check = exported.encoder.verify(**source, **TOLERANCE)
    assert check.ok, str(check)
    with torch.no_grad():
        states = model.get_encoder()(**source).last_hidden_state
    step = {"input_ids": torch.randint(0, 100, (3, 2), generator=torch.Generator().manual_seed(4))}
    step["encoder_hidden_states"] = states
    if name != "whisper":
        step["encoder_attention_mask"] = source["attention_mask"]
    check = exported.decoder.verify(**step, **TOLERANCE)
    assert check.ok, str(check)
    with torch.no_grad():
        past = exported.decoder.program.module()(**{**step, "input_ids": torch.ones(3, 4, dtype=torch.int64)})
    check = exported.decoder_with_past.verify(**step, past_key_values=past["present"], **TOLERANCE)
    assert check.ok, str(check)


def test_save_writes_optimum_files_with_named_dims(tmp_path):
    _, exported = _exported("t5")
    exported.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "decoder_model.onnx",
        "decoder_model_merged.onnx",
        "decoder_with_past_model.onnx",
        "encoder_model.onnx",
    ]
    graph = onnx.load(tmp_path / "decoder_with_past_model.onnx").graph
    dims = {value.name: [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim] for value in graph.input}
    assert dims["input_ids"] == ["batch", "sequence_length"]
    assert dims["encoder_hidden_states"] == ["batch", "encoder_sequence_length", 64]
    assert dims["past_key_values.0.decoder.key"] == ["batch", 4, "past_sequence_length", 16]
    assert dims["past_key_values.0.encoder.key"] == ["batch", 4, "encoder_sequence_length", 16]


def test_the_merged_decoder_takes_the_past_graphs_inputs_and_holds_the_weights_once(tmp_path):
    _, exported = _exported("bart")
    written = exported.save(tmp_path)
    assert written[-1] == tmp_path / "decoder_model_merged.onnx"
    onnx.checker.check_model(str(tmp_path / "decoder_model_merged.onnx"), full_check=True)
    merged = onnx.load(tmp_path / "decoder_model_merged.onnx").graph
    with_past = onnx.load(tmp_path / "decoder_with_past_model.onnx").graph
    assert [v.name for v in merged.input] == [v.name for v in with_past.input] + [USE_CACHE_BRANCH]
    assert [v.name for v in merged.output] == [v.name for v in with_past.output]
    assert [n.op_type for n in merged.node] == ["If"]
    first = onnx.load(tmp_path / "decoder_model.onnx").graph

    def weights(graph: onnx.GraphProto) -> dict[str, int]:
        return {t.name: len(t.raw_data) for t in graph.initializer}

    # One copy of each weight: the two graphs' weights by name, each once (the first step's own
    # cross-attention projections included), not the two sets side by side.
    union = {**weights(first), **weights(with_past)}
    assert weights(merged).keys() >= {name for name, size in union.items() if size > 1024}
    assert sum(weights(merged).values()) < 1.01 * sum(union.values())


def test_decoders_that_are_not_two_steps_of_one_model_do_not_merge():
    _, t5 = _exported("t5")
    _, whisper = _exported("whisper")
    with pytest.raises(ValueError, match=r"inputs \['attention_mask'\] are not inputs of the with-past graph"):
        merge_decoders(t5.encoder.model, t5.decoder_with_past.model)
    with pytest.raises(ValueError, match=r"\['encoder_attention_mask'\] are not inputs"):
        merge_decoders(t5.decoder.model, whisper.decoder_with_past.model)
    fewer = t5.decoder.model.clone()
    fewer.graph.outputs.pop()
    with pytest.raises(ValueError, match="the two decoder graphs return different outputs"):
        merge_decoders(fewer, t5.decoder_with_past.model)


def test_decoding_stops_at_the_end_token_as_generate_does():
    model, exported = _exported("bart")
    source = _source("bart", model, 2, 7, 5)
    plain = seq2seq_greedy_decode(exported, source["input_ids"], NEW_TOKENS, attention_mask=source["attention_mask"])
    eos = int(plain[0, 4])  # one row ends early, the other pads after it or runs on
    got = seq2seq_greedy_decode(
        exported, source["input_ids"], NEW_TOKENS, attention_mask=source["attention_mask"], eos_token_id=eos
    )
    with torch.no_grad():
        expected = model.generate(**source, max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=eos)
    assert got.tolist() == expected.tolist()


@pytest.mark.parametrize("name", ["bart", "whisper"])
def test_the_cli_writes_the_graphs_of_a_checkpoint(name, tmp_path, capsys):
    model = seq2seq(name)
    model.save_pretrained(tmp_path / name)
    assert main(["seq2seq", str(tmp_path / name), "-o", str(tmp_path / "onnx")]) == 0
    out = capsys.readouterr().out
    assert "decoder_with_past_model.onnx" in out and "decoder_model_merged.onnx: If over" in out
    encoder = ort.InferenceSession(str(tmp_path / "onnx" / "encoder_model.onnx"))
    if name == "whisper":
        features = torch.randn(1, 80, 64, generator=torch.Generator().manual_seed(0))
        feeds = {"input_features": features.numpy()}
        with torch.no_grad():
            expected = model.get_encoder()(features).last_hidden_state
    else:
        ids = torch.randint(3, 100, (1, 6), generator=torch.Generator().manual_seed(0))
        feeds = {"input_ids": ids.numpy(), "attention_mask": np.ones((1, 6), dtype=np.int64)}
        with torch.no_grad():
            expected = model.get_encoder()(input_ids=ids).last_hidden_state
    (hidden,) = encoder.run(["last_hidden_state"], feeds)
    np.testing.assert_allclose(hidden, expected.numpy(), rtol=1e-3, atol=1e-3)
    for graph in ("decoder_model", "decoder_with_past_model", "decoder_model_merged"):
        assert (tmp_path / "onnx" / f"{graph}.onnx").is_file()


def test_the_cli_refuses_a_model_that_is_not_encoder_decoder(tmp_path, capsys):
    causal_lm("llama").save_pretrained(tmp_path / "llama")
    assert main(["seq2seq", str(tmp_path / "llama"), "-o", str(tmp_path / "onnx")]) == 2
    assert "cannot load" in capsys.readouterr().err
