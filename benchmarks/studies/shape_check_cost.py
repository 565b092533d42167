"""What the checks of converters' outputs cost, on a 12-layer Llama.

``python benchmarks/studies/shape_check_cost.py`` exports the model twice (the first warms up) and
profiles the second export; it prints the per-converter checks' cumulative time (each
output's dims against torch's, each emitted node's inference error) beside translation's,
and the whole-model check (ONNX shape inference, ``check_shapes``) beside the export's.
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
    per_node = sum(cumulative.get(name, 0.0) for name in ("_dims_agree", "_check_emitted"))
    translate = cumulative["translate_program"]
    whole = cumulative["check_shapes"]
    stats = pstats.Stats(profile).stats.items()  # type: ignore[attr-defined]
    total = next(row[3] for where, row in stats if where[0].endswith("pt2onnx/export.py") and where[2] == "export")
    print(
        f"translation {translate:.3f} s; per-converter checks {per_node * 1000:.1f} ms ({100 * per_node / translate:.1f}%)"
    )
    print(f"export {total:.3f} s; whole-model check {whole * 1000:.1f} ms ({100 * whole / total:.1f}%)")


if __name__ == "__main__":
    main()
