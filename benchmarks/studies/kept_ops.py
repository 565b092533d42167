"""Which non-core ops should the decomp plugin keep whole? Measure kept vs decomposed.

For each candidate, a tiny module is exported twice with pt2onnx:

* kept: ``pt2onnx.export(module, args)``, the op reaches its direct converter;
* decomposed: ``torch.export.export(module, args).run_decompositions()`` (torch's default
  table), and that ExportedProgram is exported, so the op arrives as torch's decomposition.

Reported per form: ONNX node count (after pt2onnx's optimizer) and onnxruntime's median
latency over RUNS runs after WARMUP warm-up runs (the lowest of ROUNDS such medians),
one intra-op thread. The kept form wins
when it is more than 10% faster, or smaller and at most 10% slower. Writes
``benchmarks/results/kept_ops.md``. Runs in well under two minutes::

    python benchmarks/studies/kept_ops.py
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnxruntime as ort
import torch
import torch.nn.functional as F

import pt2onnx

WARMUP, RUNS, ROUNDS = 5, 25, 3
RESULTS = Path(__file__).resolve().parents[1] / "results" / "kept_ops.md"


class Call(torch.nn.Module):
    def __init__(self, fn: Callable[..., torch.Tensor], **params: torch.Tensor) -> None:
        super().__init__()
        for name, value in params.items():
            self.register_buffer(name, value)
        self.fn = fn

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return self.fn(self, *args)


def _candidates() -> dict[str, tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]:
    g = torch.Generator().manual_seed(0)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g)

    x = randn(8, 128, 256)
    img = randn(2, 32, 32, 32)
    q, k, v = randn(2, 8, 128, 64), randn(2, 8, 128, 64), randn(2, 8, 128, 64)
    return {
        "aten::linear": (torch.nn.Linear(256, 256), (x,)),
        "aten::gelu": (torch.nn.GELU(), (x,)),
        "aten::silu": (torch.nn.SiLU(), (x,)),
        "aten::softmax": (Call(lambda m, x: F.softmax(x, -1)), (x,)),
        "aten::log_softmax": (Call(lambda m, x: F.log_softmax(x, -1)), (x,)),
        "aten::layer_norm": (torch.nn.LayerNorm(256), (x,)),
        "aten::rms_norm": (torch.nn.RMSNorm(256), (x,)),
        "aten::group_norm": (torch.nn.GroupNorm(8, 32), (img,)),
        "aten::instance_norm": (torch.nn.InstanceNorm2d(32, affine=True), (img,)),
        "aten::batch_norm": (torch.nn.BatchNorm2d(32).eval(), (img,)),
        "aten::conv2d": (torch.nn.Conv2d(32, 32, 3, padding=1), (img,)),
        "aten::scaled_dot_product_attention": (
            Call(lambda m, q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
            (q, k, v),
        ),
        "aten::upsample_nearest2d": (Call(lambda m, x: F.interpolate(x, scale_factor=2.0, mode="nearest")), (img,)),
        "aten::upsample_bilinear2d": (
            Call(lambda m, x: F.interpolate(x, scale_factor=2.0, mode="bilinear")),
            (img,),
        ),
        "aten::pixel_shuffle": (torch.nn.PixelShuffle(2), (img,)),
        "aten::embedding": (torch.nn.Embedding(1000, 256), (torch.randint(0, 1000, (8, 128), generator=g),)),
        "aten::index_put": (
            Call(
                lambda m, x, i: torch.index_put(x, (i,), torch.ones(())),
            ),
            (randn(1024, 64), torch.randint(0, 1024, (256,), generator=g)),
        ),
        "aten::flatten": (torch.nn.Flatten(), (img,)),
        "aten::dropout": (torch.nn.Dropout(0.1).eval(), (x,)),
    }


def _session(model_bytes: bytes) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])


def _latencies(models: list[bytes], args: tuple[torch.Tensor, ...]) -> list[float]:
    """Median ms per model (the lowest of ROUNDS medians); runs alternate between the models so
    the load of a shared machine hits both alike."""
    sessions = [_session(m) for m in models]
    feeds = [{i.name: a.numpy() for i, a in zip(s.get_inputs(), args)} for s in sessions]
    for session, feed in zip(sessions, feeds):
        for _ in range(WARMUP):
            session.run(None, feed)
    best = [float("inf")] * len(sessions)
    for _ in range(ROUNDS):
        times: list[list[float]] = [[] for _ in sessions]
        for _ in range(RUNS):
            for session, feed, spent in zip(sessions, feeds, times):
                start = time.perf_counter()
                session.run(None, feed)
                spent.append(time.perf_counter() - start)
        best = [min(b, statistics.median(t) * 1e3) for b, t in zip(best, times)]
    return best


def _op_types(result: Any) -> list[str]:
    return sorted(n.op_type for n in result.model.graph.all_nodes())


def _export(program_or_module: object, args: tuple[torch.Tensor, ...]) -> Any:
    return pt2onnx.export(program_or_module, args)


def main() -> None:
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    rows = []
    for op, (module, args) in _candidates().items():
        module.eval()
        try:
            kept = _export(module, args)
            if not any(u.op.startswith(f"{op}.") for u in kept.report.ops):
                raise RuntimeError(f"{op} did not reach a converter (captured graph differs)")
            decomposed = _export(torch.export.export(module, args).run_decompositions(), args)
            models = [r.model_proto.SerializeToString() for r in (kept, decomposed)]
            kept_ms, dec_ms = _latencies(models, args)
        except Exception as e:  # noqa: BLE001 -- a missing converter: report it, measure the rest
            rows.append(
                f"| `{op}` | - | - | - | - | not measured: {type(e).__name__}: {str(e).splitlines()[0][:120]} |"
            )
            print(op, "not measured:", str(e).splitlines()[0][:200])
            continue
        kept_nodes, dec_nodes = kept.report.nodes_final, decomposed.report.nodes_final
        if _op_types(kept) == _op_types(decomposed):
            verdict = "tie: same ONNX ops"
        elif kept_ms < 0.9 * dec_ms or (kept_nodes < dec_nodes and kept_ms <= 1.1 * dec_ms):
            verdict = "keep"
        else:
            verdict = "decompose"
        rows.append(f"| `{op}` | {kept_nodes} | {dec_nodes} | {kept_ms:.3f} | {dec_ms:.3f} | {verdict} |")
        print(f"{op:40s} nodes {kept_nodes:4d} vs {dec_nodes:4d}   ms {kept_ms:8.3f} vs {dec_ms:8.3f}   {verdict}")
    header = [
        "# Kept vs decomposed: node count and onnxruntime latency",
        "",
        f"Generated by `python benchmarks/studies/kept_ops.py` (torch {torch.__version__}, onnxruntime {ort.__version__}, "
        f"default opset, 1 intra-op thread, lowest of {ROUNDS} medians of {RUNS} alternating runs after {WARMUP} "
        "warm-up runs).",
        "Kept: the op converted whole. Decomposed: torch's default decomposition table applied first.",
        "Verdict `keep`: the kept form is >10% faster, or has fewer nodes and is at most 10% slower (the noise of this "
        "shared machine); `tie`: both forms are the same ONNX ops (torch decomposes the op into a core op converted "
        "the same way), so keeping it buys nothing; `decompose`: the decomposition is smaller or faster.",
        "",
        "| op | kept nodes | decomposed nodes | kept ms | decomposed ms | verdict |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(header + rows) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
