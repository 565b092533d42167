"""onnxruntime's ``SkipLayerNormalization`` against the ``Add`` + ``LayerNormalization`` it fuses.

    python benchmarks/studies/skip_layer_norm.py [--models encoder_12l,bert,whisper_encoder,vit] [--runs 200]

onnxruntime's CPU provider (``ORT_ENABLE_ALL``, its default) fuses an ``Add`` whose only
reader is a ``LayerNormalization`` into its contrib ``SkipLayerNormalization``. Part 1
times the pair alone at a few shapes and thread counts three ways: as onnxruntime fuses
it, with that fusion disabled (``disabled_optimizers=["SkipLayerNormFusion"]``), and
with the ``Add`` written as ``Sum``, which the fusion does not match (what pt2onnx's
``sum_before_layer_norm`` pass emits). Part 2 exports each model with pt2onnx with the
pass and without it (``optimize={"sum_before_layer_norm": False}``) and times both files.
Interleaved rounds, shuffled (``latency.interleaved``); ms: median. Writes
``results/skip_layer_norm.md``.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the suite: latency, model_cases

from latency import interleaved

SHAPES = [(2, 16, 256), (2, 128, 768), (1, 512, 1024)]


def _pair(op: str, shape: tuple[int, ...]) -> bytes:
    """``LayerNormalization(op(a, b))`` over the last axis, as a model."""
    size = shape[-1]
    graph = helper.make_graph(
        [
            helper.make_node(op, ["a", "b"], ["s"]),
            helper.make_node("LayerNormalization", ["s", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-5),
        ],
        "pair",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("a", "b")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        [
            helper.make_tensor("gamma", TensorProto.FLOAT, [size], np.linspace(0.5, 1.5, size, dtype=np.float32)),
            helper.make_tensor("beta", TensorProto.FLOAT, [size], np.linspace(-0.1, 0.1, size, dtype=np.float32)),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)]).SerializeToString()


def _session(model: bytes | str, threads: int, disabled: list[str] | None = None) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.log_severity_level = 3
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"], disabled_optimizers=disabled)


def _times(sessions: dict[str, ort.InferenceSession], feeds: dict[str, np.ndarray], runs: int) -> dict[str, float]:
    times = interleaved({k: functools.partial(s.run, None, feeds) for k, s in sessions.items()}, runs)
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="encoder_12l,bert,whisper_encoder,vit")
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()

    lines = [
        "# onnxruntime's SkipLayerNormalization against the Add + LayerNormalization it fuses",
        "",
        f"Command: `python benchmarks/studies/skip_layer_norm.py --models {args.models} --runs {args.runs}`  ",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; onnxruntime {ort.__version__}, CPU provider, "
        "ORT_ENABLE_ALL; ms: median of interleaved, shuffled rounds.",
        "",
        "## The pair alone",
        "",
        "| shape | threads | Add + LayerNorm, fused (default) | fusion disabled | Sum + LayerNorm | fused / Sum | max abs diff |",
        "|---|---|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    rng = np.random.default_rng(0)
    for shape in SHAPES:
        feeds = {n: rng.standard_normal(shape, dtype=np.float32) for n in ("a", "b")}
        for threads in (1, 2):
            sessions = {
                "fused": _session(_pair("Add", shape), threads),
                "disabled": _session(_pair("Add", shape), threads, ["SkipLayerNormFusion"]),
                "sum": _session(_pair("Sum", shape), threads),
            }
            outputs = [s.run(None, feeds)[0] for s in sessions.values()]
            difference = max(float(np.abs(o - outputs[0]).max()) for o in outputs)
            ms = _times(sessions, feeds, args.runs)
            lines.append(
                f"| {'x'.join(map(str, shape))} | {threads} | {ms['fused']:.3f} | {ms['disabled']:.3f} "
                f"| {ms['sum']:.3f} | {ms['fused'] / ms['sum']:.2f} | {difference:.1e} |"
            )
            print(lines[-1], flush=True)

    import model_cases
    import torch

    import pt2onnx

    torch.set_num_threads(1)
    lines += [
        "",
        "## Models exported with pt2onnx, the pass on and off (one thread, the benchmark's example inputs)",
        "",
        "| model | sums | pass off ms | pass on ms | on / off | max abs diff |",
        "|---|---|---|---|---|---|",
    ]
    print("\n".join(lines[-4:]), flush=True)
    for name in args.models.split(","):
        torch.manual_seed(0)
        case = model_cases.build(name)
        files = {}
        for state in ("off", "on"):
            result = pt2onnx.export(
                case.model,
                (),
                case.inputs,
                dynamic_shapes=case.dynamic_shapes,
                optimize={"sum_before_layer_norm": state == "on"},
                quiet=True,
            )
            files[state] = result.model_proto.SerializeToString()
            if state == "on":
                sums = sum(1 for n in result.model.graph if n.op_type == "Sum")
        sessions = {state: _session(data, 1) for state, data in files.items()}
        feeds = {i.name: case.inputs[i.name].numpy() for i in sessions["on"].get_inputs()}
        off, on = (s.run(None, feeds)[0] for s in sessions.values())
        ms = _times(sessions, feeds, args.runs)
        lines.append(
            f"| {name} | {sums} | {ms['off']:.3f} | {ms['on']:.3f} | {ms['on'] / ms['off']:.2f} "
            f"| {float(np.abs(on - off).max()):.1e} |"
        )
        print(lines[-1], flush=True)
    (Path(__file__).resolve().parents[1] / "results" / "skip_layer_norm.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
