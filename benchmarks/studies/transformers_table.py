"""The table of transformers architectures pt2onnx-transformers exports with their KV cache.

    python benchmarks/studies/transformers_table.py [--runs 50] [--models llama,mixtral]

Each architecture is built from its config class (random weights, no hub) at one size
(4 layers, hidden 256, 8 query and 4 key/value heads, MLP 1024, vocabulary 1000) and
exported in its own process with ``pt2onnx_transformers.export_causal_lm`` (one graph for
the prompt and every step). Per architecture: export time (after a warm-up export in the
same process), ONNX node count, and the latency of one decoding step (batch 1, a past of
128 tokens, one new token) in onnxruntime and in eager PyTorch, both on one thread
(median of ``--runs`` interleaved runs after 5 warm-up runs), plus a 64-token prompt
(empty past). Before timing, 20 greedy tokens decoded in onnxruntime are checked to be
``generate``'s. ``mistral_dense`` is Mixtral's dense equivalent: Mixtral routes each token
to 2 of 8 experts of MLP size 1024, the dense model has one MLP of size 2048 (the same
active parameters per token).

Writes ``benchmarks/results/transformers_table.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results"
WARMUP = 5
PAST, PROMPT = 128, 64

_COMMON = {
    "vocab_size": 1000,
    "hidden_size": 256,
    "intermediate_size": 1024,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "max_position_embeddings": 512,
}

#: name -> (config class, model class, config arguments), all from transformers.
ARCHITECTURES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", _COMMON),
    "mistral": ("MistralConfig", "MistralForCausalLM", _COMMON),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", _COMMON),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {**_COMMON, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 1}),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {**_COMMON, "head_dim": 32}),
    "gpt2": (
        "GPT2Config",
        "GPT2LMHeadModel",
        {
            "vocab_size": 1000,
            "n_embd": 256,
            "n_layer": 4,
            "n_head": 8,
            "n_positions": 512,
            "bos_token_id": 1,
            "eos_token_id": 1,
        },
    ),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", {**_COMMON, "num_local_experts": 8, "num_experts_per_tok": 2}),
    "mistral_dense": ("MistralConfig", "MistralForCausalLM", {**_COMMON, "intermediate_size": 2048}),
}


def _model(name: str):
    import torch
    import transformers

    config_class, model_class, arguments = ARCHITECTURES[name]
    torch.manual_seed(0)
    config = getattr(transformers, config_class)(**arguments)
    return getattr(transformers, model_class)(config).eval()


def _median_times(calls: dict[str, object], runs: int) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in calls}
    for run in range(WARMUP + runs):
        for key, call in calls.items():
            start = time.perf_counter()
            call()  # type: ignore[operator]
            if run >= WARMUP:
                times[key].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def measure(name: str, runs: int) -> dict[str, object]:
    """Export ``name`` and time it; runs in a process of its own."""
    import numpy as np
    import torch

    import pt2onnx_transformers as pt
    from pt2onnx_transformers.generation import empty_past

    torch.set_num_threads(1)
    pt.export_causal_lm(_model("gpt2"))  # pays the one-time costs (imports, first trace)
    model = _model(name)
    start = time.perf_counter()
    result = pt.export_causal_lm(model)
    export_seconds = time.perf_counter() - start

    prompt = torch.randint(0, 1000, (1, 8), generator=torch.Generator().manual_seed(1))
    generation = model.generation_config
    generation.eos_token_id, generation.pad_token_id = None, 0
    with torch.no_grad():
        expected = model.generate(prompt, max_new_tokens=20, min_new_tokens=20, do_sample=False)
    same_tokens = pt.greedy_decode(result, prompt, 20).tolist() == expected.tolist()

    session = result.session(intra_op_num_threads=1, inter_op_num_threads=1)
    decode = pt.causal_lm_inputs(model, batch=1, sequence_length=1, past_sequence_length=PAST, seed=2)
    prefill_ids = torch.randint(0, 1000, (1, PROMPT), generator=torch.Generator().manual_seed(3))

    def feeds(ids, past):
        values = {
            "input_ids": ids.numpy(),
            "attention_mask": np.ones((1, ids.shape[1] + (past[0][0].shape[2] if past else 0)), np.int64),
        }
        for i, (key, value) in enumerate(past):
            values[f"past_key_values.{i}.key"], values[f"past_key_values.{i}.value"] = key.numpy(), value.numpy()
        return values

    cache_argument = pt.cache_argument(model)
    past = [(layer.keys, layer.values) for layer in decode[cache_argument].layers]
    decode_feeds = feeds(decode["input_ids"], past)
    empty = empty_past(result, 1)
    prefill_feeds = {"input_ids": prefill_ids.numpy(), "attention_mask": np.ones((1, PROMPT), np.int64), **empty}

    def eager_decode():
        from transformers.cache_utils import DynamicCache

        cache = DynamicCache([(k.clone(), v.clone()) for k, v in past])
        with torch.no_grad():
            model(
                input_ids=decode["input_ids"],
                attention_mask=torch.from_numpy(decode_feeds["attention_mask"]),
                use_cache=True,
                **{cache_argument: cache},
            )

    def eager_prefill():
        with torch.no_grad():
            model(input_ids=prefill_ids, use_cache=True)

    timed = _median_times(
        {
            "onnx_decode": lambda: session.run(None, decode_feeds),
            "eager_decode": eager_decode,
            "onnx_prefill": lambda: session.run(None, prefill_feeds),
            "eager_prefill": eager_prefill,
        },
        runs,
    )
    return {
        "model": name,
        "export_s": export_seconds,
        "nodes": len(result.model.graph),
        "same_tokens_as_generate": same_tokens,
        "preparations": result.report.preparations,
        **{k: v * 1000 for k, v in timed.items()},
    }


def _versions() -> str:
    import onnxruntime
    import torch
    import transformers

    return f"torch {torch.__version__}, transformers {transformers.__version__}, onnxruntime {onnxruntime.__version__}"


def _markdown(rows: list[dict[str, object]], runs: int) -> str:
    lines = [
        "| architecture | export s | ONNX nodes | 20 greedy tokens = generate | decode step ms, onnxruntime | decode step ms, eager | ratio | 64-token prompt ms, onnxruntime | eager | ratio |",
        "| --- | ---: | ---: | :---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | failed: {r['error']} | | | | | | | | |")
            continue
        lines.append(
            f"| {r['model']} | {r['export_s']:.1f} | {r['nodes']} | {'yes' if r['same_tokens_as_generate'] else 'NO'} "
            f"| {r['onnx_decode']:.2f} | {r['eager_decode']:.2f} | {r['onnx_decode'] / r['eager_decode']:.2f}x "
            f"| {r['onnx_prefill']:.2f} | {r['eager_prefill']:.2f} | {r['onnx_prefill'] / r['eager_prefill']:.2f}x |"
        )
    lines.append("")
    lines.append(
        f"4 layers, hidden 256, 8/4 heads, MLP 1024, vocabulary 1000; decode step: batch 1, past {PAST}, one token; "
        f"prompt: {PROMPT} tokens; one thread each; median of {runs} interleaved runs after {WARMUP} warm-up runs; "
        f"{_versions()}. `python benchmarks/studies/transformers_table.py`"
    )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--models", default=",".join(ARCHITECTURES))
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the worker: measure one model, print JSON
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.runs)))
        return
    rows = []
    for name in args.models.split(","):
        done = subprocess.run(
            [sys.executable, __file__, "--one", name, "--runs", str(args.runs)], capture_output=True, text=True
        )
        if done.returncode:
            rows.append({"model": name, "error": done.stderr.strip().splitlines()[-1][:200]})
        else:
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "transformers_table.json").write_text(json.dumps(rows, indent=2))
    (RESULTS / "transformers_table.md").write_text(_markdown(rows, args.runs))
    print(_markdown(rows, args.runs))


if __name__ == "__main__":
    main()
