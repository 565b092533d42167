"""A model larger than memory allows: export a Llama checkpoint through the meta device and ``weights=``.

    python benchmarks/studies/scale.py                       # ~6.7 GB fp32 checkpoint (30 layers, hidden 2048)
    python benchmarks/studies/scale.py --layers 2 --hidden 256 --intermediate 688 --vocab 1000   # a quick run

Each stage runs in its own process, so each peak RSS is its own:

1. ``write``: a random Llama checkpoint written as safetensors shards, one layer a shard
   (plus the embedding and the head), with its ``model.safetensors.index.json``: never more
   than one layer in memory.
2. ``export``: the model built on the meta device (its rotary embedding on the CPU: its
   buffers are computed, no checkpoint holds them), exported with ``weights=`` the folder
   and saved as external data in shards of ``--shard-gb``. Reports the export and save
   times, the streaming rate and the process's peak RSS.
3. ``cp``: the same files copied with ``cp`` and synced, as the save syncs them: the rate
   the disk allows; once before the export and once after (the page cache then holds
   more of the checkpoint).
4. ``check``: the real model built from the same checkpoint (its tensors memory-mapped)
   runs a short input, then onnxruntime loads the saved model as it lies on disk and runs
   the same input; the largest difference of the logits.

Writes ``benchmarks/results/scale.json`` and ``scale.md`` and deletes the multi-GB files
(``--keep`` keeps them). Needs about three times the checkpoint's size on disk.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[1] / "results"


def _config(args: argparse.Namespace) -> Any:
    import transformers

    return transformers.LlamaConfig(
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.heads,
        vocab_size=args.vocab,
        tie_word_embeddings=False,
        max_position_embeddings=4096,
    )


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        line = next(x for x in f if x.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


# -- stages (each in its own process) -------------------------------------------------------------


def write_checkpoint(args: argparse.Namespace) -> dict[str, Any]:
    """The checkpoint, shard by shard: each layer's tensors made, written and dropped."""
    import torch
    from safetensors.torch import save_file
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    config = _config(args)
    folder = Path(args.dir) / "checkpoint"
    folder.mkdir(parents=True)
    start = time.perf_counter()
    groups: list[tuple[str, Any]] = [("model.embed_tokens.", lambda: torch.nn.Embedding(args.vocab, args.hidden))]
    for i in range(args.layers):
        groups.append((f"model.layers.{i}.", lambda i=i: LlamaDecoderLayer(config, i)))
    groups.append(("", lambda: _head(config)))
    weight_map, total = {}, 0
    for index, (prefix, make) in enumerate(groups, start=1):
        torch.manual_seed(index)
        with torch.no_grad():
            module = make()
            for p in module.parameters():
                if p.dim() > 1:
                    p.normal_(0, 0.02)
        tensors = {prefix + name: t.contiguous() for name, t in module.state_dict().items()}
        name = f"model-{index:05d}-of-{len(groups):05d}.safetensors"
        save_file(tensors, folder / name, metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(tensors, name))
        total += sum(t.numel() * t.element_size() for t in tensors.values())
        del module, tensors
    index_file = folder / "model.safetensors.index.json"
    index_file.write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=1))
    config.save_pretrained(folder)
    return {
        "bytes": total,
        "shards": len(groups),
        "seconds": time.perf_counter() - start,
        "peak_rss_mb": _peak_rss_mb(),
    }


def _head(config: Any) -> Any:
    import torch
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    head = torch.nn.Module()
    head.model = torch.nn.Module()
    head.model.norm = LlamaRMSNorm(config.hidden_size)
    head.lm_head = torch.nn.Linear(config.hidden_size, config.vocab_size, bias=False)
    return head


def _meta_model(config: Any) -> Any:
    import torch
    import transformers
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config).eval()
    model.model.rotary_emb = LlamaRotaryEmbedding(config)  # computed buffers: in no checkpoint
    return model


def export_checkpoint(args: argparse.Namespace) -> dict[str, Any]:
    """Export through the meta device with ``weights=``, save in shards; times and the peak RSS."""
    import torch

    import pt2onnx

    imported_rss = _rss_mb()
    config = _config(args)
    checkpoint = Path(args.dir) / "checkpoint"
    out = Path(args.dir) / "onnx"
    out.mkdir()
    ids = torch.randint(0, args.vocab, (2, 8))
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("sequence", max=4096)
    start = time.perf_counter()
    model = _meta_model(config)
    result = pt2onnx.export(
        model,
        (ids,),
        {"use_cache": False},
        dynamic_shapes={"input_ids": {0: batch, 1: seq}, "use_cache": None},
        weights=checkpoint,
    )
    exported = time.perf_counter()
    exported_rss = _peak_rss_mb()
    files = result.save(out / "model.onnx", max_shard_bytes=int(args.shard_gb * 2**30), quiet=not sys.stderr.isatty())
    saved = time.perf_counter()
    written = sum(f.stat().st_size for f in files)
    save_s = saved - exported
    return {
        "export_s": exported - start,
        "save_s": save_s,
        "total_s": saved - start,
        "bytes_written": written,
        "files": len(files),
        "model_file_bytes": files[-1].stat().st_size,
        "save_mb_per_s": written / save_s / 1e6,
        "rss_after_imports_mb": imported_rss,
        "peak_rss_after_export_mb": exported_rss,
        "peak_rss_mb": _peak_rss_mb(),
        "nodes": result.report.nodes_final,
    }


def check_against_eager(args: argparse.Namespace) -> dict[str, Any]:
    """The real model from the same checkpoint (memory-mapped) against onnxruntime on the saved files."""
    import gc

    import onnxruntime as ort
    import torch
    from safetensors.torch import load_file

    from pt2onnx.runtime import TOLERANCES

    config = _config(args)
    checkpoint = Path(args.dir) / "checkpoint"
    torch.manual_seed(0)
    ids = torch.randint(0, args.vocab, (3, 5))  # other sizes than the export's example
    model = _meta_model(config)
    state: dict[str, Any] = {}
    for shard in sorted(checkpoint.glob("*.safetensors")):
        state.update(load_file(shard))  # memory-mapped
    model.load_state_dict(state, strict=False, assign=True)
    with torch.no_grad():
        expected = model(ids, use_cache=False).logits
    del model, state
    gc.collect()
    session = ort.InferenceSession(str(Path(args.dir) / "onnx" / "model.onnx"), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"input_ids": ids.numpy()})
    got = torch.from_numpy(got)
    atol, rtol = TOLERANCES[torch.float32]
    difference = (got - expected).abs()
    return {
        "max_abs_diff": difference.max().item(),
        "max_abs_logit": expected.abs().max().item(),
        "within_fp32_tolerance": bool(torch.allclose(got, expected, atol=atol, rtol=rtol)),
        "peak_rss_mb": _peak_rss_mb(),
    }


STAGES = {"write": write_checkpoint, "export": export_checkpoint, "check": check_against_eager}


# -- the driver -------------------------------------------------------------------------------


def _stage(name: str, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, __file__, "--stage", name, *_passed(args)]
    print(f"== {name}", flush=True)
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"stage {name} failed ({done.returncode})")
    record = json.loads(done.stdout.strip().splitlines()[-1])
    print(json.dumps(record, indent=1), flush=True)
    return record


def _passed(args: argparse.Namespace) -> list[str]:
    keys = ["dir", "layers", "hidden", "intermediate", "heads", "vocab", "shard_gb"]
    return [x for k in keys for x in (f"--{k.replace('_', '-')}", str(getattr(args, k)))]


def _cp(args: argparse.Namespace) -> dict[str, Any]:
    """``cp`` of the checkpoint's files, synced as the save syncs what it writes: the disk's rate."""
    source = Path(args.dir) / "checkpoint"
    target = Path(args.dir) / "cp"
    start = time.perf_counter()
    subprocess.run(["cp", "-r", str(source), str(target)], check=True)
    subprocess.run(["sync", *map(str, sorted(target.iterdir()))], check=True)
    seconds = time.perf_counter() - start
    copied = sum(f.stat().st_size for f in target.iterdir())
    shutil.rmtree(target)
    return {"seconds": seconds, "bytes": copied, "mb_per_s": copied / seconds / 1e6}


def _markdown(record: dict[str, Any]) -> str:
    w, e, k = record["write"], record["export"], record["check"]
    cps = [record["cp_before"], record["cp"]]
    gb = w["bytes"] / 1e9
    return "\n".join(
        [
            "# Scale: a Llama checkpoint exported through the meta device and `weights=`",
            "",
            f"`{record['command']}` on {record['machine']}, {record['date']}.",
            "",
            f"Checkpoint: {gb:.2f} GB fp32 ({record['config']}), {w['shards']} safetensors shards.",
            "",
            "| | value |",
            "| --- | --- |",
            f"| export (capture to optimized graph, weights matched) | {e['export_s']:.1f} s |",
            f"| save (every tensor read, transposed where folded, written, synced) | {e['save_s']:.1f} s |",
            f"| streaming rate (bytes written / save time) | {e['save_mb_per_s']:.0f} MB/s |",
            "| `cp` of the checkpoint + `sync`, before / after the export | "
            + " / ".join(f"{c['seconds']:.1f} s, {c['mb_per_s']:.0f} MB/s" for c in cps)
            + " |",
            f"| load average (1 min) before / after | {record['load_before']:.1f} / {record['load_after']:.1f} |",
            f"| peak RSS of the export process | {e['peak_rss_mb']:.0f} MB |",
            f"| RSS after importing torch, transformers, pt2onnx | {e['rss_after_imports_mb']:.0f} MB |",
            f"| written | {e['bytes_written'] / 1e9:.2f} GB in {e['files']} files (model file"
            f" {e['model_file_bytes'] / 1e3:.0f} kB) |",
            f"| onnxruntime vs eager (real model, same checkpoint), logits | max abs diff {k['max_abs_diff']:.2e}"
            f" (max |logit| {k['max_abs_logit']:.2f}); within fp32 tolerance: {k['within_fp32_tolerance']} |",
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", default="/tmp/pt2onnx-scale", help="where the checkpoint and the export go")
    parser.add_argument("--layers", type=int, default=30)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--intermediate", type=int, default=5632)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--shard-gb", type=float, default=2.0, help="max size of an external data file (GiB)")
    parser.add_argument("--keep", action="store_true", help="keep the checkpoint and the export")
    parser.add_argument("--no-results", action="store_true", help="do not write benchmarks/results/scale.*")
    parser.add_argument("--stage", choices=sorted(STAGES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stage:
        print(json.dumps(STAGES[args.stage](args)))
        return
    folder = Path(args.dir)
    if folder.exists():
        raise SystemExit(f"{folder} exists: remove it or pass another --dir")
    try:
        record: dict[str, Any] = {
            "command": "python benchmarks/studies/scale.py " + " ".join(sys.argv[1:]),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
            f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB",
            "date": time.strftime("%Y-%m-%d"),
            "config": f"{args.layers} layers, hidden {args.hidden}, intermediate {args.intermediate}, "
            f"vocabulary {args.vocab}",
        }
        record["load_before"] = os.getloadavg()[0]
        record["write"] = _stage("write", args)
        # cp before and after the export: the page cache may hold more of the checkpoint
        # after the export read it; both rates bound what the save can do.
        record["cp_before"] = _cp(args)
        record["export"] = _stage("export", args)
        record["cp"] = _cp(args)
        record["check"] = _stage("check", args)
        record["load_after"] = os.getloadavg()[0]
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    if not args.no_results:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "scale.json").write_text(json.dumps(record, indent=1) + "\n")
        (RESULTS / "scale.md").write_text(_markdown(record))
    print(_markdown(record))


if __name__ == "__main__":
    main()
