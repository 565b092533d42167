"""A fusion tried for pt2onnx-ort and dropped: residual Add + RMSNormalization as one
``com.microsoft::SkipSimplifiedLayerNormalization``.

    python benchmarks/studies/skip_norm_fusion.py [--models llama_tiny,llama_125m] [--seq 16,128] [--runs 300]

onnxruntime fuses ``Add`` + ``LayerNormalization`` into its ``SkipLayerNormalization``
itself (``benchmarks/studies/ort_profile.py encoder_12l``: 24 of them after its optimizations), but
not ``Add`` + ONNX ``RMSNormalization``, which is what pt2onnx emits for a Llama's norms.
This script exports each model with pt2onnx (default opset), rewrites every
``RMSNormalization`` whose input is an ``Add`` into ``SkipSimplifiedLayerNormalization``
(the sum as its fourth output where something else reads it), checks both files give the
same output, and times them in one process in shuffled rounds (``latency.interleaved``;
one thread, ``ORT_ENABLE_ALL``, median of ``--runs``; the 125M model runs ``--runs // 8``). Writes
``results/skip_norm_fusion.md``.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the suite: latency, model_cases

from latency import interleaved


def fuse_skip_rms_norm(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    """The model with Add + RMSNormalization pairs fused, and how many were."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    producer = {out: node for node in graph.node for out in node.output}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    outputs = {o.name for o in graph.output}
    fused: dict[int, onnx.NodeProto] = {}
    absorbed: set[int] = set()
    for norm in graph.node:
        add = producer.get(norm.input[0]) if norm.op_type == "RMSNormalization" else None
        if add is None or add.op_type != "Add" or id(add) in absorbed:
            continue
        epsilon = next((helper.get_attribute_value(a) for a in norm.attribute if a.name == "epsilon"), 1e-5)
        sum_read = add.output[0] in outputs or any(r is not norm for r in readers.get(add.output[0], []))
        fused[id(norm)] = helper.make_node(
            "SkipSimplifiedLayerNormalization",
            [add.input[0], add.input[1], norm.input[1]],
            [norm.output[0], "", "", add.output[0] if sum_read else ""],
            name=f"{norm.name}.skip",
            domain="com.microsoft",
            epsilon=epsilon,
        )
        absorbed.add(id(add))
    # The fused node takes the RMSNormalization's place, after both of the Add's inputs.
    nodes = [fused.get(id(n), n) for n in graph.node if id(n) not in absorbed]
    del graph.node[:]
    graph.node.extend(nodes)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model, len(fused)


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="llama_tiny,llama_125m")
    parser.add_argument("--seq", default="16,128")
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()

    import model_cases
    import torch

    import pt2onnx

    torch.set_num_threads(1)
    lines = [
        "# Add + RMSNormalization as SkipSimplifiedLayerNormalization: tried, dropped",
        "",
        f"Command: `python benchmarks/studies/skip_norm_fusion.py --models {args.models} --seq {args.seq} --runs {args.runs}`  ",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; onnxruntime {ort.__version__}, 1 thread, "
        "ORT_ENABLE_ALL, batch 2; ms: median of interleaved runs.",
        "",
        "| model | seq | fused pairs | standard ms | fused ms | fused / standard | max abs diff |",
        "|---|---|---|---|---|---|---|",
    ]
    print("\n".join(lines))
    for name in args.models.split(","):
        case = model_cases.build(name)
        assert case.sized is not None
        standard = pt2onnx.export(case.model, (), case.inputs, dynamic_shapes=case.dynamic_shapes).model_proto
        fused, count = fuse_skip_rms_norm(standard)
        sessions = {"standard": _session(standard), "fused": _session(fused)}
        runs = args.runs if name != "llama_125m" else max(args.runs // 8, 10)
        for seq in (int(s) for s in args.seq.split(",")):
            feeds = {k: v.numpy() for k, v in case.sized(2, seq).items()}
            first, second = (s.run(None, feeds)[0] for s in sessions.values())
            difference = float(np.abs(first - second).max())
            times = interleaved({k: functools.partial(s.run, None, feeds) for k, s in sessions.items()}, runs)
            ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
            lines.append(
                f"| {name} | {seq} | {count} | {ms['standard']:.3f} | {ms['fused']:.3f} "
                f"| {ms['fused'] / ms['standard']:.3f} | {difference:.1e} |"
            )
            print(lines[-1], flush=True)
    (Path(__file__).resolve().parents[1] / "results" / "skip_norm_fusion.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
