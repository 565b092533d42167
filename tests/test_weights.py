"""Models whose weights never sit in memory: meta-device capture, ``weights=`` streamed from a
checkpoint, sharded external data, dtype conversion while streaming, progress per tensor.

Every export here is run in onnxruntime from the files written and compared with eager
PyTorch: the same model built with real weights (in the same dtype for ``dtype=``).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import onnx
import onnxruntime as ort
import pytest
import torch
import transformers
from rich.console import Console
from safetensors.torch import save_file
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

import pt2onnx
from pt2onnx.errors import OptionError, WeightsError
from pt2onnx.runtime import TOLERANCES
from pt2onnx.weights import CheckpointTensor
from small_models import MLP

CONFIG = transformers.LlamaConfig(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=128,
    tie_word_embeddings=True,
)


def _real_llama() -> torch.nn.Module:
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(CONFIG).eval()


def _meta_llama() -> torch.nn.Module:
    """The Llama built on the meta device, but for its rotary embedding, whose buffers no checkpoint holds."""
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(CONFIG).eval()
    model.model.rotary_emb = LlamaRotaryEmbedding(CONFIG)
    return model


def _meta_mlp() -> torch.nn.Module:
    with torch.device("meta"):
        return MLP().eval()


def _run_saved(path, feeds: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """Run the model at ``path`` in onnxruntime as it lies on disk (external data and all)."""
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return [torch.from_numpy(o) for o in session.run(None, {k: v.numpy() for k, v in feeds.items()})]


IDS = torch.randint(0, CONFIG.vocab_size, (2, 7), generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def llama_checkpoint(tmp_path_factory):
    """The real Llama and its weights saved by transformers as one safetensors file and as shards."""
    real = _real_llama()
    one = tmp_path_factory.mktemp("one")
    real.save_pretrained(one)
    shards = tmp_path_factory.mktemp("shards")
    real.save_pretrained(shards, max_shard_size="40KB")
    return real, one / "model.safetensors", shards


def test_meta_llama_with_a_safetensors_file_matches_the_real_model(tmp_path, llama_checkpoint):
    real, file, _ = llama_checkpoint
    result = pt2onnx.export(_meta_llama(), (IDS,), {"use_cache": False}, weights=file)
    # Every weight is read from the checkpoint; the tied lm_head is one initializer with the embedding.
    initializers = result.model.graph.initializers
    assert "lm_head.weight" not in initializers and "model.embed_tokens.weight" in initializers
    from_checkpoint = [v for v in initializers.values() if isinstance(v.const_value, CheckpointTensor)]
    assert {v.const_value.key for v in from_checkpoint} >= {"model.layers.1.mlp.down_proj.weight", "model.norm.weight"}
    assert any(v.const_value.permutation for v in from_checkpoint), "the folded weight transposes are read transposed"
    result.save(tmp_path / "llama.onnx", quiet=True)
    (logits,) = _run_saved(tmp_path / "llama.onnx", {"input_ids": IDS})
    with torch.no_grad():
        expected = real(IDS, use_cache=False).logits
    torch.testing.assert_close(logits, expected, atol=1e-5, rtol=1e-4)
    check = result.verify(IDS, use_cache=False, _eager=real)
    assert check.ok, check


def test_meta_llama_graph_is_the_real_models_graph(llama_checkpoint):
    """Optimizing without values loses nothing: the same nodes as the export of the real model."""
    real, file, _ = llama_checkpoint
    from_meta = pt2onnx.export(_meta_llama(), (IDS,), {"use_cache": False}, weights=file)
    from_real = pt2onnx.export(real, (IDS,), {"use_cache": False})
    assert [n.op_type for n in from_meta.model.graph] == [n.op_type for n in from_real.model.graph]


def test_a_folder_of_shards_with_its_index_is_read_by_qualified_name(tmp_path, llama_checkpoint):
    real, _, shards = llama_checkpoint
    index = json.loads((shards / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1, "the fixture must hold several shards"
    result = pt2onnx.export(_meta_llama(), (IDS,), {"use_cache": False}, weights=shards)
    result.save(tmp_path / "llama.onnx", external_data=True, quiet=True)
    (logits,) = _run_saved(tmp_path / "llama.onnx", {"input_ids": IDS})
    with torch.no_grad():
        torch.testing.assert_close(logits, real(IDS, use_cache=False).logits, atol=1e-5, rtol=1e-4)


def test_no_pass_reads_a_weight_and_saving_reads_each_once(tmp_path, llama_checkpoint, monkeypatch):
    _, file, _ = llama_checkpoint
    reads: list[str] = []
    original = pt2onnx.weights.checkpoint._Safetensors.load

    def counted(self, name):
        reads.append(name)
        return original(self, name)

    monkeypatch.setattr(pt2onnx.weights.checkpoint._Safetensors, "load", counted)
    result = pt2onnx.export(_meta_llama(), (IDS,), {"use_cache": False}, weights=file)
    assert reads == [], "capture, translation and the optimization passes read no weight"
    result.save(tmp_path / "llama.onnx", external_data=True, quiet=True)
    written = [
        v.const_value.key
        for v in result.model.graph.initializers.values()
        if isinstance(v.const_value, CheckpointTensor)
    ]
    assert sorted(reads) == sorted(written)


def test_a_state_dict_mapping_gives_the_weights(tmp_path):
    torch.manual_seed(3)
    real = MLP().eval()
    x = torch.randn(5, 8)
    result = pt2onnx.export(_meta_mlp(), (x,), weights=real.state_dict(), f=tmp_path / "mlp.onnx", quiet=True)
    (got,) = _run_saved(tmp_path / "mlp.onnx", {"x": x})
    torch.testing.assert_close(got, real(x).detach())
    assert result.verify(x, _eager=real).ok


def test_a_mismatched_checkpoint_lists_every_problem_in_one_error_and_writes_nothing(tmp_path):
    state = MLP().state_dict()
    del state["fc1.bias"]  # missing
    state["fc3.weight"] = torch.zeros(2, 2)  # not in the model
    state["fc2.weight"] = torch.zeros(4, 15)  # another shape
    state["fc2.bias"] = torch.zeros(4, dtype=torch.float64)  # another dtype
    save_file(state, tmp_path / "model.safetensors")
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(WeightsError) as info:
        pt2onnx.export(_meta_mlp(), (torch.randn(2, 8),), weights=tmp_path / "model.safetensors", f=out / "mlp.onnx")
    message = str(info.value)
    assert "do not match the model (4 problems)" in message
    assert re.search(r"missing \(1\):\n\s+fc1\.bias \[16\] float32", message), message
    assert re.search(r"not in the model \(1\):\n\s+fc3\.weight \[2, 2\] float32", message), message
    assert "fc2.weight: [4, 15] in the checkpoint, [4, 16] in the model" in message
    assert "fc2.bias: torch.float64 in the checkpoint, torch.float32 in the model" in message
    assert "what to do:" in message
    assert list(out.iterdir()) == []


def test_a_path_that_is_no_checkpoint_is_a_clear_error(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"not a checkpoint")
    with pytest.raises(WeightsError, match="is not a readable safetensors file"):
        pt2onnx.export(_meta_mlp(), (torch.randn(2, 8),), weights=tmp_path / "model.safetensors")
    with pytest.raises(WeightsError, match="no such file or folder"):
        pt2onnx.export(_meta_mlp(), (torch.randn(2, 8),), weights=tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(WeightsError, match=r"holds no \*\.safetensors file"):
        pt2onnx.export(_meta_mlp(), (torch.randn(2, 8),), weights=tmp_path / "empty")


# -- sharded external data ------------------------------------------------------------------------


def test_sharded_external_data_round_trips_through_onnxruntime(tmp_path, llama_checkpoint):
    real, file, _ = llama_checkpoint
    limit = 40_000
    written = pt2onnx.export(_meta_llama(), (IDS,), {"use_cache": False}, weights=file).save(
        tmp_path / "llama.onnx", max_shard_bytes=limit, quiet=True
    )
    *shards, model_file = written
    assert model_file == tmp_path / "llama.onnx" and len(shards) > 3
    assert all(re.fullmatch(r"llama\.onnx\.[0-9a-f]{16}-\d{5}-of-\d{5}\.data", s.name) for s in shards)
    proto = onnx.load(str(model_file), load_external_data=False)
    sizes = {}
    for tensor in proto.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            entry = {e.key: e.value for e in tensor.external_data}
            sizes.setdefault(entry["location"], []).append(int(entry["length"]))
    assert sorted(sizes) == sorted(s.name for s in shards)
    # A shard holds at most `limit` bytes, unless one tensor alone is larger.
    assert all(sum(lengths) <= limit or len(lengths) == 1 for lengths in sizes.values()), sizes
    assert model_file.stat().st_size < 100_000, "the ONNX file itself holds the graph, not the weights"
    (logits,) = _run_saved(model_file, {"input_ids": IDS})
    with torch.no_grad():
        torch.testing.assert_close(logits, real(IDS, use_cache=False).logits, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("limit", [0, -1, 2.5])
def test_max_shard_bytes_must_be_a_positive_int(tmp_path, limit):
    result = pt2onnx.export(MLP().eval(), (torch.randn(2, 8),))
    with pytest.raises(OptionError, match="is not a positive number of bytes"):
        result.save(tmp_path / "mlp.onnx", max_shard_bytes=limit)
    with pytest.raises(OptionError, match="external_data=False asks for none"):
        result.save(tmp_path / "mlp.onnx", external_data=False, max_shard_bytes=1000)
    with pytest.raises(OptionError, match=r"export\(\) saves only with f="):
        pt2onnx.export(MLP().eval(), (torch.randn(2, 8),), max_shard_bytes=1000)
    assert list(tmp_path.iterdir()) == []


# -- dtype on the way out ----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("keep_io_dtype", [True, False])
def test_dtype_converts_weights_and_computation_and_matches_eager_in_that_dtype(tmp_path, dtype, keep_io_dtype):
    torch.manual_seed(4)
    model = MLP().eval()
    x = torch.randn(6, 8)
    result = pt2onnx.export(model, (x,), dtype=dtype, keep_io_dtype=keep_io_dtype)
    assert all(p.dtype == torch.float32 for p in model.parameters()), "the user's model is left as it was"
    io = torch.float32 if keep_io_dtype else dtype
    result.save(tmp_path / "mlp.onnx", quiet=True)
    proto = onnx.load(str(tmp_path / "mlp.onnx"))
    elem = {torch.float32: onnx.TensorProto.FLOAT, torch.float16: onnx.TensorProto.FLOAT16}
    elem[torch.bfloat16] = onnx.TensorProto.BFLOAT16
    assert [i.type.tensor_type.elem_type for i in proto.graph.input] == [elem[io]]
    assert [o.type.tensor_type.elem_type for o in proto.graph.output] == [elem[io]]
    assert {t.data_type for t in proto.graph.initializer if t.name.startswith("fc")} == {elem[dtype]}
    # Eager in the same dtype: the model converted, called with the input converted.
    with torch.no_grad():
        expected = MLP.forward(_converted_copy(model, dtype), x.to(dtype))
    got = result.run(x if keep_io_dtype else x.to(dtype))
    assert got.dtype == io
    atol, rtol = TOLERANCES[dtype]
    torch.testing.assert_close(got.to(dtype), expected, atol=atol, rtol=rtol)
    assert result.verify(x).ok


def _converted_copy(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    copy = MLP().eval()
    copy.load_state_dict(model.state_dict())
    return copy.to(dtype)


def test_dtype_with_a_checkpoint_casts_each_weight_as_it_is_written(tmp_path, llama_checkpoint):
    real, file, _ = llama_checkpoint
    result = pt2onnx.export(_meta_llama(), (IDS,), {"use_cache": False}, weights=file, dtype=torch.float16)
    result.save(tmp_path / "llama.onnx", external_data=True, quiet=True)
    proto = onnx.load(str(tmp_path / "llama.onnx"))
    floats = {t.name: t.data_type for t in proto.graph.initializer if t.name.endswith("weight")}
    assert set(floats.values()) == {onnx.TensorProto.FLOAT16}, floats
    (logits,) = _run_saved(tmp_path / "llama.onnx", {"input_ids": IDS})
    with torch.no_grad():
        expected = _real_llama().to(torch.float16)(IDS, use_cache=False).logits
    assert logits.dtype == torch.float32  # the outputs keep the weights' original dtype
    atol, rtol = TOLERANCES[torch.float16]
    torch.testing.assert_close(logits.half(), expected, atol=atol, rtol=rtol)
    assert result.verify(IDS, use_cache=False, _eager=real).ok


def test_a_dtype_that_is_not_floating_is_an_option_error():
    with pytest.raises(OptionError, match=r"dtype=torch\.int8 is not one of"):
        pt2onnx.export(MLP().eval(), (torch.randn(2, 8),), dtype=torch.int8)


# -- progress --------------------------------------------------------------------------------------


def test_progress_names_each_tensor_on_a_terminal_and_is_silent_otherwise(tmp_path, monkeypatch, capsys):
    result = pt2onnx.export(MLP().eval(), (torch.randn(2, 8),))
    screen = io.StringIO()
    monkeypatch.setattr(
        "pt2onnx.save._console", lambda: Console(file=screen, force_terminal=True, width=160, record=True)
    )
    result.save(tmp_path / "a.onnx", external_data=True)
    drawn = screen.getvalue()
    total = sum(v.const_value.nbytes for v in result.model.graph.initializers.values())
    assert "pt2onnx save a.onnx" in drawn and f"{total}/{total} bytes" in drawn
    for name in result.model.graph.initializers:  # one frame per tensor written, naming it
        assert name in drawn, name
    screen.truncate(0)
    result.save(tmp_path / "b.onnx", quiet=True)
    assert screen.getvalue() == ""
    monkeypatch.undo()
    result.save(tmp_path / "c.onnx")  # stderr is no terminal under pytest
    assert capsys.readouterr().err == ""


# -- docs ----------------------------------------------------------------------------------------


def test_the_large_models_guide_runs_as_written(capsys):
    text = (Path(__file__).resolve().parents[1] / "docs" / "large_models.md").read_text()
    # The guide's own example; the checkpoint-folder one after it runs in tests/test_docs.py.
    code = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    exec(compile(code, "docs/large_models.md", "exec"), {"__name__": "__main__"})
    printed = capsys.readouterr().out
    assert re.search(r"^logits +float32 .* ok ok ok ok$", printed, re.M), printed
