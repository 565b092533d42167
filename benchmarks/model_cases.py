"""The benchmark's models: transformers models built from config classes (random weights,
no hub), hand-written ones, and depth-scaled transformer encoders.

Every entry builds a :class:`Case`: the module in eval mode, example keyword inputs with
their dynamic shapes, and a second input set with other batch/sequence sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.export import Dim


@dataclass
class Case:
    """One model to export: example inputs, their dynamic shapes, and a second input set."""

    model: torch.nn.Module
    inputs: dict[str, torch.Tensor]
    dynamic_shapes: dict[str, Any]
    second: dict[str, torch.Tensor]
    family: str  # "transformer" or "other": node-count targets apply to transformers
    #: Inputs of a given (batch, sequence length), for the sequence sweep; ``None`` when the
    #: model has no sequence dimension to sweep, and ``no_sweep`` then says why.
    sized: Callable[[int, int], dict[str, torch.Tensor]] | None = None
    no_sweep: str = ""


#: The sweep reaches 512 tokens: every text model's position table holds that many.
MAX_SEQ = 512
BATCH, SEQ = Dim("batch", min=1, max=64), Dim("seq", min=2, max=MAX_SEQ)


def _tokens(vocab: int, batch: int, seq: int, *, mask: bool = False) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(batch * 1000 + seq)
    inputs = {"input_ids": torch.randint(0, vocab, (batch, seq), generator=g)}
    if mask:
        m = torch.ones(batch, seq, dtype=torch.int64)
        m[0, seq // 2 :] = 0  # one padded row, so the mask matters
        inputs["attention_mask"] = m
    return inputs


def _text(model: torch.nn.Module, vocab: int, *, mask: bool = False) -> Case:
    dyn = {"input_ids": {0: BATCH, 1: SEQ}}
    if mask:
        dyn["attention_mask"] = {0: BATCH, 1: SEQ}
    return Case(
        model.eval(),
        _tokens(vocab, 2, 16, mask=mask),
        dyn,
        _tokens(vocab, 3, 7, mask=mask),
        "transformer",
        sized=lambda batch, seq: _tokens(vocab, batch, seq, mask=mask),
    )


def llama(layers: int = 2, hidden: int = 128, heads: int = 4, kv_heads: int = 2, ffn: int = 256) -> Case:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=1000,
        hidden_size=hidden,
        intermediate_size=ffn,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=MAX_SEQ,
        use_cache=False,
    )
    return _text(LlamaForCausalLM(config), config.vocab_size)


def llama_125m() -> Case:
    """~134M parameters: 12 layers, hidden 768, vocabulary 32000."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=32000,
        hidden_size=768,
        intermediate_size=2048,
        num_hidden_layers=12,
        num_attention_heads=12,
        num_key_value_heads=12,
        max_position_embeddings=MAX_SEQ,
        use_cache=False,
    )
    return _text(LlamaForCausalLM(config), config.vocab_size)


def gpt2() -> Case:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=1000,
        n_embd=128,
        n_layer=2,
        n_head=4,
        n_positions=MAX_SEQ,
        use_cache=False,
        bos_token_id=0,
        eos_token_id=0,
    )
    return _text(GPT2LMHeadModel(config), config.vocab_size)


def bert() -> Case:
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=1000,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=256,
        max_position_embeddings=MAX_SEQ,
    )
    return _text(BertModel(config, add_pooling_layer=False), config.vocab_size, mask=True)


def t5_encoder() -> Case:
    from transformers import T5Config, T5EncoderModel

    config = T5Config(vocab_size=1000, d_model=128, d_kv=32, d_ff=256, num_layers=2, num_heads=4)
    return _text(T5EncoderModel(config), config.vocab_size)


def whisper_encoder() -> Case:
    """Whisper's encoder: its input length is fixed by the config, so only the batch is dynamic."""
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    config = WhisperConfig(
        num_mel_bins=16,
        d_model=128,
        encoder_layers=2,
        encoder_attention_heads=4,
        encoder_ffn_dim=256,
        max_source_positions=32,
        vocab_size=1000,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=3,
    )
    g = torch.Generator().manual_seed(0)
    frames = 2 * config.max_source_positions
    return Case(
        WhisperEncoder(config).eval(),
        {"input_features": torch.randn(2, 16, frames, generator=g)},
        {"input_features": {0: BATCH}},
        {"input_features": torch.randn(3, 16, frames, generator=g)},
        "transformer",
        no_sweep="input length fixed by the config (max_source_positions): only the batch is dynamic",
    )


def vit() -> Case:
    from transformers import ViTConfig, ViTModel

    config = ViTConfig(
        image_size=32, patch_size=8, hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256
    )
    g = torch.Generator().manual_seed(0)
    return Case(
        ViTModel(config, add_pooling_layer=False).eval(),
        {"pixel_values": torch.randn(2, 3, 32, 32, generator=g)},
        {"pixel_values": {0: BATCH}},
        {"pixel_values": torch.randn(3, 3, 32, 32, generator=g)},
        "transformer",
        no_sweep="image input: the number of patches is fixed by the image size",
    )


def resnet() -> Case:
    from transformers import ResNetConfig, ResNetModel

    config = ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic")
    g = torch.Generator().manual_seed(0)
    model = ResNetModel(config).eval()
    for m in model.modules():  # non-default statistics, so batch norm matters
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5, generator=g)
            m.running_var.uniform_(0.5, 1.5, generator=g)
    return Case(
        model,
        {"pixel_values": torch.randn(2, 3, 32, 32, generator=g)},
        {"pixel_values": {0: BATCH}},
        {"pixel_values": torch.randn(3, 3, 32, 32, generator=g)},
        "other",
    )


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(64, 256),
            torch.nn.ReLU(),
            torch.nn.Linear(256, 256),
            torch.nn.ReLU(),
            torch.nn.Linear(256, 10),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class CNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(16)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc = torch.nn.Linear(32 * 8 * 8, 10)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        y = self.pool(torch.relu(self.bn(self.conv1(image))))
        y = self.pool(torch.relu(self.conv2(y)))
        return self.fc(y.flatten(1))


class CondModel(torch.nn.Module):
    """Branches on a tensor value with ``torch.cond``."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(32, 32)
        self.b = torch.nn.Linear(32, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda t: torch.relu(self.a(t)), lambda t: torch.sigmoid(self.b(t)), (x,))


def mlp() -> Case:
    g = torch.Generator().manual_seed(0)
    return Case(
        MLP().eval(),
        {"x": torch.randn(4, 64, generator=g)},
        {"x": {0: BATCH}},
        {"x": torch.randn(9, 64, generator=g)},
        "other",
    )


def cnn() -> Case:
    g = torch.Generator().manual_seed(0)
    model = CNN().eval()
    model.bn.running_mean.uniform_(-0.5, 0.5, generator=g)
    model.bn.running_var.uniform_(0.5, 1.5, generator=g)
    return Case(
        model,
        {"image": torch.randn(2, 3, 32, 32, generator=g)},
        {"image": {0: BATCH}},
        {"image": torch.randn(5, 3, 32, 32, generator=g)},
        "other",
    )


def cond() -> Case:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 32, generator=g)
    # The second input takes the other branch.
    return Case(
        CondModel().eval(), {"x": x.abs()}, {"x": {0: BATCH}}, {"x": -torch.randn(6, 32, generator=g).abs()}, "other"
    )


class Encoder(torch.nn.Module):
    """``nn.TransformerEncoder`` of ``layers`` layers, d=256, batch-first."""

    def __init__(self, layers: int) -> None:
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(256, 4, 512, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(x)


def _hidden_states(batch: int, seq: int) -> dict[str, torch.Tensor]:
    return {"x": torch.randn(batch, seq, 256, generator=torch.Generator().manual_seed(batch * 1000 + seq))}


def encoder(layers: int = 12) -> Case:
    g = torch.Generator().manual_seed(0)
    return Case(
        Encoder(layers).eval(),
        {"x": torch.randn(2, 16, 256, generator=g)},
        {"x": {0: BATCH, 1: SEQ}},
        {"x": torch.randn(3, 7, 256, generator=g)},
        "transformer",
        sized=_hidden_states,
    )


#: The standard set, in the order the table shows them.
MODELS: dict[str, Callable[[], Case]] = {
    "mlp": mlp,
    "cnn": cnn,
    "cond": cond,
    "resnet": resnet,
    "vit": vit,
    "bert": bert,
    "gpt2": gpt2,
    "t5_encoder": t5_encoder,
    "whisper_encoder": whisper_encoder,
    "llama_tiny": llama,
    "encoder_12l": encoder,
    "llama_125m": llama_125m,
}


def build(name: str) -> Case:
    """The case called ``name``: a standard model, or ``encoder_<N>l`` for the depth scan."""
    if name in MODELS:
        return MODELS[name]()
    if name.startswith("encoder_") and name.endswith("l"):
        return encoder(int(name[len("encoder_") : -1]))
    raise KeyError(f"unknown model {name!r}; known: {sorted(MODELS)} and encoder_<N>l")
