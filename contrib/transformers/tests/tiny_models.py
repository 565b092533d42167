"""Tiny random-weight models of the architectures the pack is tested on, built from config classes (no hub)."""

from __future__ import annotations

import warnings

import torch
import transformers as tf

_COMMON = {
    "vocab_size": 100,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 128,
}

#: name -> (config class, model class, config arguments)
CAUSAL_LMS = {
    "llama": (tf.LlamaConfig, tf.LlamaForCausalLM, _COMMON),
    "mistral": (tf.MistralConfig, tf.MistralForCausalLM, _COMMON),
    "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM, _COMMON),
    "phi3": (tf.Phi3Config, tf.Phi3ForCausalLM, {**_COMMON, "pad_token_id": 0, "eos_token_id": 1, "bos_token_id": 1}),
    "gemma": (tf.GemmaConfig, tf.GemmaForCausalLM, {**_COMMON, "head_dim": 16}),
    "gpt2": (
        tf.GPT2Config,
        tf.GPT2LMHeadModel,
        {
            "vocab_size": 100,
            "n_embd": 64,
            "n_layer": 2,
            "n_head": 4,
            "n_positions": 128,
            "bos_token_id": 1,
            "eos_token_id": 1,
        },
    ),
    "mixtral": (tf.MixtralConfig, tf.MixtralForCausalLM, {**_COMMON, "num_local_experts": 4, "num_experts_per_tok": 2}),
}


def causal_lm(name: str, **overrides) -> torch.nn.Module:
    """The tiny random-weight model ``name`` of :data:`CAUSAL_LMS` (seeded: the same weights each call)."""
    config_class, model_class, arguments = CAUSAL_LMS[name]
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # token ids outside the tiny vocabulary
        return model_class(config_class(**{**arguments, **overrides})).eval()


_SEQ2SEQ_COMMON = {
    "vocab_size": 100,
    "d_model": 64,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "encoder_ffn_dim": 128,
    "decoder_ffn_dim": 128,
    "max_position_embeddings": 128,
    "pad_token_id": 0,
    "decoder_start_token_id": 2,
    "tie_word_embeddings": False,
    # Weights spread wider than the default 0.02: tiny random models otherwise repeat one token,
    # which would let a wrong cache or position go unnoticed.
    "init_std": 0.5,
}

#: name -> (config class, model class, config arguments) of encoder-decoder models (export_seq2seq).
SEQ2SEQ = {
    "t5": (
        tf.T5Config,
        tf.T5ForConditionalGeneration,
        {
            "vocab_size": 100,
            "d_model": 64,
            "d_kv": 16,
            "d_ff": 128,
            "num_layers": 2,
            "num_heads": 4,
            "decoder_start_token_id": 0,
            "tie_word_embeddings": False,
            "initializer_factor": 10.0,
        },
    ),
    "bart": (tf.BartConfig, tf.BartForConditionalGeneration, _SEQ2SEQ_COMMON),
    "marian": (tf.MarianConfig, tf.MarianMTModel, _SEQ2SEQ_COMMON),
    "pegasus": (tf.PegasusConfig, tf.PegasusForConditionalGeneration, _SEQ2SEQ_COMMON),
    "whisper": (
        tf.WhisperConfig,
        tf.WhisperForConditionalGeneration,
        {
            **{k: v for k, v in _SEQ2SEQ_COMMON.items() if k != "max_position_embeddings"},
            "num_mel_bins": 80,
            "max_source_positions": 32,
            "max_target_positions": 128,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "decoder_start_token_id": 1,
            "suppress_tokens": None,
            "begin_suppress_tokens": None,
        },
    ),
}


def seq2seq(name: str, **overrides) -> torch.nn.Module:
    """The tiny random-weight encoder-decoder model ``name`` of :data:`SEQ2SEQ` (seeded: the same weights each call)."""
    config_class, model_class, arguments = SEQ2SEQ[name]
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model_class(config_class(**{**arguments, **overrides})).eval()


def bpe_tokenizer():
    """A small byte-level BPE tokenizer trained here (no Hub), as transformers wraps it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=100, special_tokens=["<unk>", "<s>", "</s>"], initial_alphabet=[])
    tokenizer.train_from_iterator(["the quick brown fox jumps over the lazy dog"] * 10, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
