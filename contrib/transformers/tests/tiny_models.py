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
