"""onnxruntime's ``GroupQueryAttention`` (com.microsoft) against ONNX ``Attention``-24, the kernel pt2onnx emits.

pt2onnx-ort could rewrite a Llama's causal, grouped-query ``Attention`` into
``GroupQueryAttention``; this measures whether onnxruntime's CPU kernel for it is faster
on the same q, k, v (batch 2, 8 query heads, 4 key/value heads, head size 64, causal,
no cache, no rotary), over sequence lengths. Both graphs are built here, checked to give
the same output, and timed interleaved in one process (CPU provider, 1 intra-op thread,
``ORT_ENABLE_ALL``): median of ``--runs`` runs per length after 3 warm-up runs.

Run: python benchmarks/studies/gqa_vs_attention.py [--runs 40] [--out benchmarks/results/gqa_vs_attention.md]
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

BATCH, HEADS, KV_HEADS, HEAD_SIZE = 2, 8, 4, 64
LENGTHS = (16, 32, 128, 512)


def _inputs() -> list[onnx.ValueInfoProto]:
    widths = {"q": HEADS * HEAD_SIZE, "k": KV_HEADS * HEAD_SIZE, "v": KV_HEADS * HEAD_SIZE}
    return [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", "seq", w]) for n, w in widths.items()]


def _output() -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", HEADS * HEAD_SIZE])


def attention_24() -> onnx.ModelProto:
    node = helper.make_node(
        "Attention",
        ["q", "k", "v"],
        ["y"],
        is_causal=1,
        q_num_heads=HEADS,
        kv_num_heads=KV_HEADS,
        scale=HEAD_SIZE**-0.5,
    )
    graph = helper.make_graph([node], "attention", _inputs(), [_output()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])


def group_query_attention() -> onnx.ModelProto:
    # Without a cache, every sequence is the whole input: seqlens_k = seq - 1, total = seq.
    nodes = [
        helper.make_node("Shape", ["q"], ["seq"], start=1, end=2),
        helper.make_node("Cast", ["seq"], ["seq32"], to=TensorProto.INT32),
        helper.make_node("Squeeze", ["seq32"], ["total"]),
        helper.make_node("Sub", ["seq32", "one"], ["last"]),
        helper.make_node("Shape", ["q"], ["batch"], start=0, end=1),
        helper.make_node("Expand", ["last", "batch"], ["seqlens_k"]),
        helper.make_node(
            "GroupQueryAttention",
            ["q", "k", "v", "", "", "seqlens_k", "total"],
            ["y", "present_key", "present_value"],
            domain="com.microsoft",
            num_heads=HEADS,
            kv_num_heads=KV_HEADS,
            scale=HEAD_SIZE**-0.5,
        ),
    ]
    one = helper.make_tensor("one", TensorProto.INT32, [1], [1])
    graph = helper.make_graph(nodes, "gqa", _inputs(), [_output()], initializer=[one])
    opsets = [helper.make_opsetid("", 24), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parents[1] / "results" / "gqa_vs_attention.md"
    )
    args = parser.parse_args()
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    models = {"Attention-24": attention_24(), "GroupQueryAttention": group_query_attention()}
    sessions = {
        name: ort.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])
        for name, m in models.items()
    }
    rng = np.random.default_rng(0)
    rows = []
    for seq in LENGTHS:
        feeds = {
            "q": rng.standard_normal((BATCH, seq, HEADS * HEAD_SIZE), np.float32),
            "k": rng.standard_normal((BATCH, seq, KV_HEADS * HEAD_SIZE), np.float32),
            "v": rng.standard_normal((BATCH, seq, KV_HEADS * HEAD_SIZE), np.float32),
        }
        outs = {name: s.run(["y"], feeds)[0] for name, s in sessions.items()}
        diff = float(np.abs(outs["Attention-24"] - outs["GroupQueryAttention"]).max())
        if diff > 1e-4:
            raise SystemExit(f"seq {seq}: the two kernels differ by {diff}")
        times: dict[str, list[float]] = {name: [] for name in sessions}
        for run in range(3 + args.runs):
            for name in list(sessions) if run % 2 else list(sessions)[::-1]:
                start = time.perf_counter()
                sessions[name].run(["y"], feeds)
                if run >= 3:
                    times[name].append(time.perf_counter() - start)
        ms = {name: statistics.median(t) * 1e3 for name, t in times.items()}
        rows.append((seq, ms["Attention-24"], ms["GroupQueryAttention"], diff))
    lines = [
        "# GroupQueryAttention vs Attention-24 in onnxruntime",
        "",
        f"Command: `python benchmarks/studies/gqa_vs_attention.py --runs {args.runs}`  ",
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; onnxruntime {ort.__version__}, CPU provider, "
        f"1 intra-op thread, ORT_ENABLE_ALL; batch {BATCH}, {HEADS} query heads, {KV_HEADS} key/value heads, "
        f"head size {HEAD_SIZE}, causal, no cache, no rotary; median of {args.runs} interleaved runs.",
        "",
        "| seq | Attention-24 ms | GroupQueryAttention ms | GQA / Attention | max abs diff |",
        "|---:|---:|---:|---:|---:|",
        *(f"| {s} | {a:.3f} | {g:.3f} | {g / a:.2f} | {d:.1e} |" for s, a, g, d in rows),
    ]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
