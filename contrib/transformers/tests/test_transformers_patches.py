"""Per-architecture patches: model code torch.export cannot trace, swapped while capture runs."""

from __future__ import annotations

import pytest
import torch
from tiny_models import causal_lm
from torch.export import Dim
from transformers import MambaConfig, MambaForCausalLM
from transformers.cache_utils import DynamicCache, DynamicSlidingWindowLayer

import pt2onnx
from pt2onnx.errors import CaptureError
from pt2onnx.testing import assert_exports_like_eager
from pt2onnx_transformers import patches

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def mamba():
    torch.manual_seed(0)
    config = MambaConfig(vocab_size=100, hidden_size=32, state_size=8, num_hidden_layers=2, conv_kernel=4)
    return MambaForCausalLM(config).eval()


def test_mamba_slow_path_keeps_the_sequence_length_dynamic(mamba):
    ids = torch.randint(0, 100, (2, 5), generator=torch.Generator().manual_seed(0))
    result = assert_exports_like_eager(
        mamba, (), {"input_ids": ids, "use_cache": False}, expect_ops=["higher_order::scan"]
    )
    assert [str(d) for d in result.model.graph.inputs[0].shape] == ["batch", "sequence_length"]
    assert "patch transformers.mamba_selective_scan (transformers [installed])" in result.report.preparations
    assert patches.scanned_selective_scan is not __import__(patches._MAMBA, fromlist=["x"]).mamba_selective_scan


def test_without_the_patch_torch_specializes_mambas_sequence_length(mamba):
    # torch's own reason: the slow path loops over range(seq_len) in Python, so the length is a constant.
    ids = torch.randint(0, 100, (2, 5))
    shapes = {"input_ids": {0: Dim("batch"), 1: Dim("sequence_length")}, "use_cache": None}
    with pytest.raises(CaptureError, match=r"specialized it to be a constant \(5\)"):
        pt2onnx.export(
            mamba, (), {"input_ids": ids, "use_cache": False}, dynamic_shapes=shapes, disable=["transformers"]
        )


def test_sliding_window_layers_update_as_dynamic_layers_while_captured():
    model = causal_lm("mistral", sliding_window=32)
    with torch.no_grad():
        past = model(
            input_ids=torch.randint(0, 100, (2, 6)), past_key_values=DynamicCache(config=model.config)
        ).past_key_values
    assert all(isinstance(layer, DynamicSlidingWindowLayer) for layer in past.layers)
    ids = torch.randint(0, 100, (2, 3), generator=torch.Generator().manual_seed(1))
    inputs = {
        "input_ids": ids,
        "attention_mask": torch.ones(2, 9, dtype=torch.int64),
        "past_key_values": past,
        "use_cache": True,
    }
    result = assert_exports_like_eager(model, (), inputs)
    assert "patch transformers.sliding_window_layers (transformers [installed])" in result.report.preparations
    # Captured as a plain layer: the mask sizes follow the past's length, not a token count baked in.
    longer = DynamicCache(config=model.config)
    with torch.no_grad():
        longer = model(input_ids=torch.randint(0, 100, (2, 11)), past_key_values=longer).past_key_values
    check = result.verify(
        input_ids=ids[:, :1],
        attention_mask=torch.ones(2, 12, dtype=torch.int64),
        past_key_values=longer,
        use_cache=True,
    )
    assert check.ok, check


@pytest.fixture(scope="module")
def fsmt():
    from transformers import FSMTConfig, FSMTModel

    torch.manual_seed(0)
    config = FSMTConfig(
        langs=["en", "de"],
        src_vocab_size=50,
        tgt_vocab_size=50,
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=32,
    )
    return FSMTModel(config).eval()


def test_fsmt_keeps_its_padding_mask_while_captured(fsmt):
    # FSMT drops the decoder's padding mask when it masks nothing, a branch on tensor values
    # (it builds the mask without a cache); kept, it changes nothing: the export matches eager
    # on decoder inputs with and without pads.
    ids = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 11, 2, 1]])
    unpadded, padded = torch.tensor([[2, 5, 6, 7], [2, 9, 10, 11]]), torch.tensor([[2, 5, 6, 1], [2, 9, 1, 1]])
    result = assert_exports_like_eager(
        fsmt,
        (),
        {"input_ids": ids, "decoder_input_ids": unpadded, "use_cache": False},
        other_inputs=[((), {"input_ids": ids, "decoder_input_ids": padded, "use_cache": False})],
    )
    assert "patch transformers.fsmt_padding_mask (transformers [installed])" in result.report.preparations
    with pytest.raises(CaptureError, match=r"padding_mask\.any\(\)"):
        pt2onnx.export(
            fsmt,
            (),
            {"input_ids": ids, "decoder_input_ids": unpadded, "use_cache": False},
            fallback=False,
            disable=["transformers"],
        )


def test_experts_running_the_eager_loop_export_through_grouped_products():
    # The eager experts loop over the experts some token picked (a nonzero() of the routing):
    # while captured they run grouped_mm, the same sums, and the model's setting is left as it was.
    model = causal_lm("mixtral")
    model.set_experts_implementation("eager")
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    result = assert_exports_like_eager(model, (), {"input_ids": ids, "use_cache": False})
    assert "patch transformers.eager_experts (transformers [installed])" in result.report.preparations
    assert model.config._experts_implementation == "eager"
    with pytest.raises(CaptureError, match=r"expert_hit"):
        pt2onnx.export(model, (), {"input_ids": ids, "use_cache": False}, fallback=False, disable=["transformers"])
