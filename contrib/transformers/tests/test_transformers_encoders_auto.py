"""Encoders whose position table bounds the sequence export with ``dynamic_shapes="auto"``.

Issue #25: BERT, DistilBERT, ALBERT, ELECTRA, DeBERTa-v2 and a BERT classifier failed with
``Constraints violated (sequence_length)! ... <= 128``: the pack names the sequence dim
without the model's own maximum. The pack's hint now bounds it by the position table the
model slices (``embeddings.position_ids``), so one capture does it (a model it cannot read
the bound from still exports: capture takes torch's suggested bound and the report says
so), and the model runs at another batch and sequence length.
"""

from __future__ import annotations

import pytest
import torch
import transformers as tf

import pt2onnx

pytestmark = pytest.mark.slow

_ENCODER = {
    "vocab_size": 100,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "max_position_embeddings": 128,
}

#: name -> (config class, model class, config arguments)
ENCODERS = {
    "bert": (tf.BertConfig, tf.BertModel, _ENCODER),
    "bert-classifier": (tf.BertConfig, tf.BertForSequenceClassification, _ENCODER),
    "distilbert": (
        tf.DistilBertConfig,
        tf.DistilBertModel,
        {"vocab_size": 100, "dim": 64, "hidden_dim": 128, "n_layers": 2, "n_heads": 4, "max_position_embeddings": 128},
    ),
    "albert": (tf.AlbertConfig, tf.AlbertModel, {**_ENCODER, "embedding_size": 32}),
    "electra": (tf.ElectraConfig, tf.ElectraModel, {**_ENCODER, "embedding_size": 32}),
    "deberta-v2": (tf.DebertaV2Config, tf.DebertaV2Model, _ENCODER),
}


@pytest.mark.parametrize("name", list(ENCODERS))
def test_an_encoder_exports_with_auto_and_runs_at_other_sizes(name):
    config_class, model_class, arguments = ENCODERS[name]
    torch.manual_seed(0)
    model = model_class(config_class(**arguments)).eval()
    ids = torch.randint(0, 100, (2, 9))
    result = pt2onnx.export(
        model, (), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}, dynamic_shapes="auto"
    )
    # The pack bounds the sequence by the position table the model slices: one capture, no refinement.
    assert result.report.shapes_refined == [], result.report.shapes_refined
    for batch, length in ((2, 9), (3, 17), (1, 128)):
        ids = torch.randint(0, 100, (batch, length))
        mask = torch.ones_like(ids)
        mask[0, length // 2 :] = 0
        check = result.verify(input_ids=ids, attention_mask=mask)
        assert check.ok, f"{name} at batch {batch}, sequence {length}:\n{check}"


def test_an_encoder_decoder_keeps_its_two_lengths_apart():
    """The hint gave decoder_input_ids the name of input_ids' length: T5 with auto failed to
    capture (``decoder_input_ids.size()[1] = 6 is not equal to input_ids.size()[1] = 8``)."""
    torch.manual_seed(0)
    config = tf.T5Config(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4)
    model = tf.T5Model(config).eval()

    def inputs(batch, source, target):
        ids = torch.randint(4, 90, (batch, source))
        return {
            "input_ids": ids,
            "attention_mask": torch.ones_like(ids),
            "decoder_input_ids": torch.randint(4, 90, (batch, target)),
            "use_cache": False,
        }

    result = pt2onnx.export(model, (), inputs(2, 8, 6), dynamic_shapes="auto")
    for batch, source, target in ((2, 8, 6), (3, 5, 11), (1, 12, 2)):
        check = result.verify(**inputs(batch, source, target))
        assert check.ok, f"batch {batch}, source {source}, target {target}:\n{check}"


def test_a_named_dim_torch_would_fix_is_left_to_torch_and_stays_dynamic():
    # Falcon-H1 pads its Mamba mixer's sequence to whole chunks of 256. Under the pack's
    # `sequence_length` name, torch suggests fixing the dim to the example's 8 tokens; left
    # to torch (Dim.AUTO), it stays dynamic below the chunk, and the report says where.
    config = tf.FalconH1Config(
        vocab_size=100,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        mamba_d_ssm=64,
        mamba_n_heads=8,
        mamba_d_head=8,
        mamba_d_state=16,
        mamba_chunk_size=256,
    )
    torch.manual_seed(0)
    model = tf.FalconH1Model(config).eval()
    ids = torch.randint(0, 100, (1, 8))
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "use_cache": False}
    result = pt2onnx.export(model, (), inputs, dynamic_shapes="auto")
    assert str(result.report.inputs[0]) == "input_ids: INT64[1, sequence_length]"
    assert result.report.guarded_sizes["sequence_length"].startswith("2..255 of 2..256 tried")
    longer = torch.randint(0, 100, (1, 12))
    assert result.verify(input_ids=longer, attention_mask=torch.ones_like(longer), use_cache=False).ok
    chunk = torch.ones(1, 256, dtype=torch.long)
    assert "sequence_length = 256" in (
        result.guard_failure(input_ids=chunk, attention_mask=chunk, use_cache=False) or ""
    )
