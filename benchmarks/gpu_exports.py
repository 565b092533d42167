"""Models on a GPU, exported by pt2onnx and run in onnxruntime (CPU) against eager on the GPU.

A check for a machine with CUDA (CI has none): ``python benchmarks/gpu_exports.py``. It prints
one line per model, ``PASS?`` with the largest difference to eager (the reader judges it:
cuDNN's TF32 convolutions alone move ResNet-18 by about 1e-3) or ``FAIL`` with the error's
first line and what it says to do.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

import pt2onnx

cuda = torch.device("cuda")
Built = tuple[torch.nn.Module, tuple[Any, ...], dict[str, Any], dict[str, Any]]


def flat(value: Any) -> list[torch.Tensor]:
    """The tensors of a model's output, in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if hasattr(value, "to_tuple"):
        value = value.to_tuple()
    elif isinstance(value, dict):
        value = tuple(value.values())
    if isinstance(value, (list, tuple)):
        return [tensor for item in value for tensor in flat(item)]
    return []


def difference(got: Any, expected: torch.Tensor) -> float:
    got = got if isinstance(got, torch.Tensor) else torch.as_tensor(np.asarray(got))
    return float((got.float() - expected.detach().cpu().float()).abs().max())


def case(name: str, build: Callable[[], Built]) -> None:
    start = time.perf_counter()
    try:
        model, args, kwargs, options = build()
        with torch.no_grad():
            eager = flat(model(*args, **kwargs))
        result = pt2onnx.export(model, args, kwargs, quiet=True, **options)
        got = flat(result.run(*args, **kwargs))
        worst = max(difference(g, e) for g, e in zip(got, eager, strict=True))
        print(f"PASS? {name}: max abs difference {worst:.3g} ({time.perf_counter() - start:.1f} s)")
    except Exception as error:  # noqa: BLE001 (each model's outcome is printed, the others still run)
        text = str(error)
        print(f"FAIL {name}: {type(error).__name__}: {text.splitlines()[0][:300]}")
        if "what to do:" in text:
            print("   what to do:", text.split("what to do:", 1)[1].strip()[:600])


def demo() -> Built:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs" / "examples"))
    from demo import make_model

    model, (image,), options = make_model()
    return model.to(cuda), (image.to(cuda),), {}, options


def resnet(dtype: torch.dtype) -> Callable[[], Built]:
    def build() -> Built:
        import torchvision

        torch.manual_seed(0)
        model = torchvision.models.resnet18().eval().to(cuda, dtype)
        return model, (torch.randn(2, 3, 64, 64, device=cuda, dtype=dtype),), {}, {}

    return build


def tiny_llama(**options: Any) -> torch.nn.Module:
    """A two-layer Llama with grouped-query attention, random weights (seed 0), on the CPU."""
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=128,
        **options,
    )
    return transformers.LlamaForCausalLM(config).eval()


def llama(attention: str = "sdpa", dtype: torch.dtype = torch.float32, dynamic: bool = False) -> Callable[[], Built]:
    def build() -> Built:

        model = tiny_llama(attn_implementation=attention).to(cuda, dtype)
        ids = torch.randint(0, 128, (2, 7), device=cuda)
        options = {"dynamic_shapes": "auto"} if dynamic else {}
        return model, (), {"input_ids": ids, "attention_mask": torch.ones_like(ids), "use_cache": False}, options

    return build


def bert() -> Built:
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, vocab_size=128
    )
    model = transformers.BertModel(config).eval().to(cuda)
    ids = torch.randint(0, 128, (2, 9), device=cuda)
    return model, (), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}, {}


def causal_lm_with_cache() -> None:

    from pt2onnx_transformers import empty_cache, export_causal_lm

    start = time.perf_counter()
    try:
        model = tiny_llama().to(cuda)
        result = export_causal_lm(model, quiet=True)
        ids = torch.randint(0, 128, (1, 6), device=cuda)
        with torch.no_grad():
            eager = model(input_ids=ids).logits
        got = result.run(input_ids=ids, attention_mask=torch.ones_like(ids), cache=empty_cache(result, 1))
        worst = difference(got.logits, eager)
        print(f"PASS? export_causal_lm: max abs difference {worst:.3g} ({time.perf_counter() - start:.1f} s)")
    except Exception as error:  # noqa: BLE001
        print(f"FAIL export_causal_lm: {type(error).__name__}: {str(error).splitlines()[0][:300]}")


def seq2seq() -> None:
    import transformers

    from pt2onnx_transformers.seq2seq import export_seq2seq, seq2seq_greedy_decode

    start = time.perf_counter()
    try:
        torch.manual_seed(0)
        config = transformers.T5Config(
            vocab_size=100, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, decoder_start_token_id=0
        )
        model = transformers.T5ForConditionalGeneration(config).eval().to(cuda)
        exported = export_seq2seq(model, quiet=True)
        ids = torch.randint(3, 100, (2, 7))
        got = seq2seq_greedy_decode(exported, ids, 6, attention_mask=torch.ones_like(ids))
        with torch.no_grad():
            expected = model.generate(
                input_ids=ids.to(cuda),
                attention_mask=torch.ones_like(ids).to(cuda),
                max_new_tokens=6,
                min_new_tokens=6,
                do_sample=False,
                num_beams=1,
            ).cpu()
        same = got.tolist() == expected.tolist()
        print(f"PASS? export_seq2seq (T5): tokens equal generate(): {same} ({time.perf_counter() - start:.1f} s)")
    except Exception as error:  # noqa: BLE001
        print(f"FAIL export_seq2seq: {type(error).__name__}: {str(error).splitlines()[0][:300]}")


def main() -> None:
    print("torch", torch.__version__, "on", torch.cuda.get_device_name(0))
    case("demo CNN, dynamic batch", demo)
    case("torchvision ResNet-18, float32", resnet(torch.float32))
    case("torchvision ResNet-18, float16", resnet(torch.float16))
    case("Llama, SDPA, static", llama())
    case("Llama, SDPA, dynamic_shapes='auto'", llama(dynamic=True))
    case("Llama, eager attention", llama("eager"))
    case("Llama, SDPA, bfloat16", llama(dtype=torch.bfloat16))
    case("BERT, SDPA", bert)
    causal_lm_with_cache()
    seq2seq()


if __name__ == "__main__":
    main()
