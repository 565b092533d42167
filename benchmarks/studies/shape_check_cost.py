"""What the converter-output shape check costs: its share of translation, on a 12-layer Llama.

``python benchmarks/studies/shape_check_cost.py`` exports the model twice (the first warms up) and
profiles the second export; it prints the check's cumulative time beside translation's.
"""

from __future__ import annotations

import cProfile
import pstats

import torch
import transformers

import pt2onnx


def main() -> None:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=32000,
        hidden_size=768,
        intermediate_size=2048,
        num_hidden_layers=12,
        num_attention_heads=12,
        num_key_value_heads=12,
        use_cache=False,
    )
    model = transformers.LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 32000, (2, 16))
    pt2onnx.export(model, (ids,), quiet=True)
    profile = cProfile.Profile()
    profile.enable()
    pt2onnx.export(model, (ids,), quiet=True)
    profile.disable()
    cumulative = {where[2]: row[3] for where, row in pstats.Stats(profile).stats.items()}  # type: ignore[attr-defined]
    check = sum(t for name, t in cumulative.items() if "static_dims_agree" in name)
    translate = cumulative["translate_program"]
    print(f"translation {translate:.3f} s; shape check {check * 1000:.1f} ms ({100 * check / translate:.1f}%)")


if __name__ == "__main__":
    main()
