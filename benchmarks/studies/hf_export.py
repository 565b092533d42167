"""Export time of Hugging Face checkpoints: pt2onnx(-transformers) against optimum-onnx, in fresh processes.

    python benchmarks/studies/hf_export.py --optimum-python /work/optimum-venv/bin/python [--rounds 5]

Builds tiny checkpoints from config classes with random weights (Llama, Qwen2, GPT-2: causal
LMs; BERT: an encoder), each saved with ``save_pretrained`` into a temporary folder, and
exports each, in rounds, with four commands, every one a fresh process:

* ``pt2onnx CLI``: ``pt2onnx-transformers causal-lm CKPT -o OUT/model.onnx`` (BERT:
  ``pt2onnx export factory.py:make -o OUT/model.onnx``, a factory that loads CKPT with
  ``AutoModel`` and asks for ``dynamic_shapes="auto"``, as the pack offers no encoder command);
* ``pt2onnx call``: this script's child in this venv: imports, ``from_pretrained``,
  ``torch.export.export`` alone with the options pt2onnx passes it (the transformers pack's
  cache pytree, patches and dim hints), the export call (``export_causal_lm``, or
  ``pt2onnx.export`` for BERT) with its phases, and the save, each timed in the process;
  torch.export alone runs before the export in odd rounds and after it in even ones;
* ``optimum CLI``: ``optimum-cli export onnx --model CKPT --task text-generation-with-past OUT``
  (BERT: ``--task feature-extraction``), in its own venv (``--optimum-python``);
* ``optimum call``: this script's child in that venv: import of ``optimum.exporters.onnx``,
  then ``main_export`` with the CLI's arguments, timed.

Round r runs every checkpoint's four commands in an order rotated by r, so none always
runs first. Figures: medians over rounds; a ratio is the median of the per-round ratios
(min-max). Writes ``results/hf_export.{json,md}``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[1] / "results"
KINDS = ("pt2onnx CLI", "pt2onnx call", "optimum CLI", "optimum call")

_DECODER = {
    "vocab_size": 1000,
    "hidden_size": 128,
    "intermediate_size": 344,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 512,
}

#: name -> (task, config class, model class, config arguments), all from transformers.
CHECKPOINTS: dict[str, tuple[str, str, str, dict[str, Any]]] = {
    "llama": ("causal-lm", "LlamaConfig", "LlamaForCausalLM", _DECODER),
    "qwen2": ("causal-lm", "Qwen2Config", "Qwen2ForCausalLM", _DECODER),
    "gpt2": (
        "causal-lm",
        "GPT2Config",
        "GPT2LMHeadModel",
        {"vocab_size": 1000, "n_embd": 128, "n_layer": 2, "n_head": 4, "n_positions": 512},
    ),
    "bert": (
        "feature-extraction",
        "BertConfig",
        "BertModel",
        {
            "vocab_size": 1000,
            "hidden_size": 128,
            "intermediate_size": 512,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "max_position_embeddings": 512,
        },
    ),
}
OPTIMUM_TASKS = {"causal-lm": "text-generation-with-past", "feature-extraction": "feature-extraction"}

#: The BERT factory ``pt2onnx export`` loads: the checkpoint named by $HF_EXPORT_CKPT, batch 2 x 8 tokens.
ENCODER_FACTORY = """
import os

import torch
from transformers import AutoModel


def make():
    model = AutoModel.from_pretrained(os.environ["HF_EXPORT_CKPT"]).eval()
    ids = torch.randint(0, model.config.vocab_size, (2, 8), generator=torch.Generator().manual_seed(0))
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
    return model, {"kwargs": inputs}, {"dynamic_shapes": "auto"}
"""


def _versions(names: list[str]) -> dict[str, str]:
    found = {}
    for name in names:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


# -- the children: one export each, timed inside the process -----------------------------------


def _encoder_inputs(model: Any) -> dict[str, Any]:
    import torch

    ids = torch.randint(0, model.config.vocab_size, (2, 8), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}


def _torch_export_alone(model: Any, kwargs: dict[str, Any]) -> float:
    """Seconds of one ``torch.export.export`` as pt2onnx's capture calls it, plugins' preparations applied.

    The preparations (the transformers pack's cache pytree, patches and ``"auto"`` dim hints)
    are made before the clock starts. Where ``"auto"`` needs torch's suggested fixes (pt2onnx
    captures again with them applied), the attempts that fail are not counted: the figure is
    one capture with the final shapes, what a user passing those shapes would pay.
    """
    import torch

    from pt2onnx.capture import _refined, _suggested_fixes, tracing_lock
    from pt2onnx.opset import check_opset
    from pt2onnx.plugin_manager import load_plugins
    from pt2onnx.prepare import prepare_capture, register_pytrees
    from pt2onnx.registry import build_registry

    registry = build_registry(load_plugins(None), check_opset(None))
    preparation = prepare_capture(registry, register_pytrees(registry), model, (), kwargs, "auto", [])
    shapes = preparation.dynamic_shapes
    while True:
        start = time.perf_counter()
        try:
            with tracing_lock, preparation.around():
                torch.export.export(model, (), kwargs, dynamic_shapes=shapes, strict=False)
        except Exception as e:
            refined = _refined(shapes, _suggested_fixes(e))
            if refined is None or refined == shapes:
                raise
            shapes = refined
            continue
        return time.perf_counter() - start


def child_pt2onnx(checkpoint: Path, task: str, out: Path, capture_first: bool) -> dict[str, Any]:
    """From imports to the saved file in this process, each step timed."""
    times: dict[str, float] = {}
    start = time.perf_counter()
    import torch
    import transformers

    import pt2onnx
    import pt2onnx_transformers

    times["import"] = time.perf_counter() - start
    start = time.perf_counter()
    if task == "causal-lm":
        model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint).eval()
        kwargs = {
            **pt2onnx_transformers.causal_lm_inputs(model, batch=2, sequence_length=3, past_sequence_length=5),
            "use_cache": True,
        }
    else:
        model = transformers.AutoModel.from_pretrained(checkpoint).eval()
        kwargs = _encoder_inputs(model)
    times["load"] = time.perf_counter() - start
    torch.set_num_threads(1)
    if capture_first:
        times["torch.export alone"] = _torch_export_alone(model, kwargs)
    start = time.perf_counter()
    if task == "causal-lm":
        result = pt2onnx_transformers.export_causal_lm(model, quiet=True)
    else:
        result = pt2onnx.export(model, (), kwargs, dynamic_shapes="auto", quiet=True)
    times["export call"] = time.perf_counter() - start
    start = time.perf_counter()
    result.save(out, quiet=True)
    times["save"] = time.perf_counter() - start
    if not capture_first:
        times["torch.export alone"] = _torch_export_alone(model, kwargs)
    return {
        "times": times,
        "phases": dict(result.report.timings),
        "shapes_refined": list(result.report.shapes_refined),
        "versions": _versions(["torch", "transformers", "pt2onnx", "pt2onnx-transformers", "onnx", "onnxruntime"]),
    }


def child_optimum(checkpoint: Path, task: str, out: Path) -> dict[str, Any]:
    """optimum's import and ``main_export`` call, timed in this process (the optimum venv)."""
    start = time.perf_counter()
    from optimum.exporters.onnx import main_export

    imported = time.perf_counter() - start
    start = time.perf_counter()
    main_export(model_name_or_path=str(checkpoint), output=str(out), task=OPTIMUM_TASKS[task])
    return {
        "times": {"import": imported, "export call": time.perf_counter() - start},
        "versions": _versions(["torch", "transformers", "optimum", "optimum-onnx", "onnx", "onnxruntime"]),
    }


# -- the parent: checkpoints, rounds, the page -----------------------------------------------------


def build_checkpoints(folder: Path, names: list[str]) -> dict[str, Path]:
    """Each checkpoint of ``names``, random weights, ``save_pretrained`` into ``folder/NAME``."""
    import torch
    import transformers

    paths = {}
    for name in names:
        _, config_cls, model_cls, config = CHECKPOINTS[name]
        torch.manual_seed(0)
        model = getattr(transformers, model_cls)(getattr(transformers, config_cls)(**config)).eval()
        model.save_pretrained(folder / name)
        paths[name] = folder / name
    return paths


def _command(
    kind: str, name: str, checkpoint: Path, out: Path, json_out: Path, args: argparse.Namespace, r: int
) -> list[str]:
    task = CHECKPOINTS[name][0]
    bin_dir = Path(sys.executable).parent
    optimum_bin = Path(args.optimum_python).parent
    if kind == "pt2onnx CLI":
        if task == "causal-lm":
            return [str(bin_dir / "pt2onnx-transformers"), "causal-lm", str(checkpoint), "-o", str(out / "model.onnx")]
        return [
            str(bin_dir / "pt2onnx"),
            "export",
            str(checkpoint.parent / "factory.py:make"),
            "-o",
            str(out / "model.onnx"),
        ]
    if kind == "optimum CLI":
        return [
            str(optimum_bin / "optimum-cli"), "export", "onnx", "--model", str(checkpoint),
            "--task", OPTIMUM_TASKS[task], str(out),
        ]  # fmt: skip
    python = sys.executable if kind == "pt2onnx call" else args.optimum_python
    child = ["--child", kind.split()[0], "--task", task, str(checkpoint), str(out / "model.onnx"), str(json_out)]
    if kind == "pt2onnx call" and r % 2 == 1:
        child.append("--capture-first")
    return [python, __file__, *child]


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _ratio_spread(ours: list[float | None], theirs: list[float | None]) -> tuple[float, float, float] | None:
    ratios = [a / b for a, b in zip(ours, theirs) if a is not None and b]
    return (statistics.median(ratios), min(ratios), max(ratios)) if ratios else None


def _fmt(value: float | tuple[float, float, float] | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, tuple):
        return f"{value[0]:.{digits}f} ({value[1]:.{digits}f}-{value[2]:.{digits}f})"
    return f"{value:.{digits}f}"


def markdown(data: dict[str, Any]) -> str:
    """The page: how it was measured, whole-process and call times, the ratios, pt2onnx's steps."""
    runs = data["runs"]
    venvs = data["versions"]
    lines = [
        "# Hugging Face checkpoints: pt2onnx against optimum-onnx, export time",
        "",
        f"Command: `{data['command']}`  ",
        f"{data['started']} UTC; {data['rounds']} rounds; {data['cpu']}, {data['cores']} cores (shared: "
        f"load average {data['load'][0]:.2f} at the start, {data['load'][1]:.2f} at the end).",
        "",
        "- pt2onnx venv: " + ", ".join(f"{k} {v}" for k, v in venvs.get("pt2onnx", {}).items()) + ".",
        "- optimum venv: " + ", ".join(f"{k} {v}" for k, v in venvs.get("optimum", {}).items()) + f"; made with "
        f"`{data['optimum_venv_made_with']}`.",
        "- Checkpoints: random weights from config classes, `save_pretrained` (safetensors, fp32): "
        + "; ".join(f"{n} {c[2]} ({c[1]})" for n, c in CHECKPOINTS.items() if n in data["checkpoints"])
        + ". Decoders: 2 layers, hidden 128, 4 query and 2 key/value heads (GPT-2: 4 heads), vocabulary 1000.",
        "- Each figure: a fresh process; rounds interleave the four commands, their order rotated by round. "
        "Seconds: median over rounds; ratio: median of the per-round ratios (min-max).",
        "",
        "## Whole process (wall seconds, start to exit)",
        "",
        "| checkpoint | pt2onnx CLI | optimum CLI | pt2onnx / optimum | pt2onnx call process | optimum call process |",
        "|---|---|---|---|---|---|",
    ]
    for name in data["checkpoints"]:
        wall = {k: [r["wall_s"] if r["ok"] else None for r in runs[name][k]] for k in KINDS}
        lines.append(
            f"| {name} | {_fmt(_median([w for w in wall['pt2onnx CLI'] if w]))} | "
            f"{_fmt(_median([w for w in wall['optimum CLI'] if w]))} | "
            f"{_fmt(_ratio_spread(wall['pt2onnx CLI'], wall['optimum CLI']))} | "
            f"{_fmt(_median([w for w in wall['pt2onnx call'] if w]))} | "
            f"{_fmt(_median([w for w in wall['optimum call'] if w]))} |"
        )
    lines += [
        "",
        "## The export call (seconds in the process)",
        "",
        'pt2onnx: `export_causal_lm(model)` (BERT: `pt2onnx.export(model, (), inputs, dynamic_shapes="auto")`), '
        "without the save; optimum: `main_export(...)`, which also loads the checkpoint, saves and validates "
        "the model in onnxruntime (its process imported the model classes before: its `from_pretrained` is "
        "cheaper than the one timed apart in pt2onnx's process). torch.export alone: `torch.export.export` with "
        "the options pt2onnx passes it (target: export call ≤ 1.2x of it). The first torch.export of a process "
        "pays about 0.7 s of one-time initialization, so the export call is compared with torch.export alone "
        "in the same position: both first in their process (cold: the call from even rounds, torch.export "
        "alone from odd ones) and both second (warm). Where pt2onnx needs torch's suggested fixes to "
        '`dynamic_shapes="auto"` (shapes refined), torch.export alone is timed with the refined shapes '
        "and its failed first try (which warms the process) is not counted: its cold figure is a warm one.",
        "",
        "| checkpoint | pt2onnx export call | + save | optimum main_export | torch.export alone, cold / warm "
        "| pt2onnx capture phase, cold / warm | export call / torch.export alone, cold | warm |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in data["checkpoints"]:
        rounds = runs[name]["pt2onnx call"]
        ours = [r for r in rounds if r["ok"]]
        opt = [r["times"]["export call"] for r in runs[name]["optimum call"] if r["ok"]]
        # Round r times torch.export alone first when r is odd (see _command).
        first = {"call": [r for i, r in enumerate(rounds) if r["ok"] and i % 2 == 0]}
        first["alone"] = [r for i, r in enumerate(rounds) if r["ok"] and i % 2 == 1]
        second = {"call": first["alone"], "alone": first["call"]}

        def median_of(records: list[dict[str, Any]], get: Any) -> float | None:
            return _median([get(r) for r in records])

        def call_s(r: dict[str, Any]) -> float:
            return float(r["times"]["export call"])

        def alone_s(r: dict[str, Any]) -> float:
            return float(r["times"]["torch.export alone"])

        def capture_s(r: dict[str, Any]) -> float:
            return float(r["phases"]["capture"])

        cells = []
        for pair in (first, second):
            call, alone = median_of(pair["call"], call_s), median_of(pair["alone"], alone_s)
            cells.append(_fmt(call / alone) if call is not None and alone else "-")
        lines.append(
            f"| {name} | {_fmt(median_of(ours, call_s))} | {_fmt(_median([r['times']['save'] for r in ours]), 3)} | "
            f"{_fmt(_median(opt))} | {_fmt(median_of(first['alone'], alone_s))} / "
            f"{_fmt(median_of(second['alone'], alone_s))} | {_fmt(median_of(first['call'], capture_s))} / "
            f"{_fmt(median_of(second['call'], capture_s))} | {cells[0]} | {cells[1]} |"
        )
    phase_names = ["plugins", "weights", "capture", "decompose", "translate", "assemble", "optimize"]
    lines += [
        "",
        "## pt2onnx call process, step by step (seconds, median over rounds)",
        "",
        "| checkpoint | import | from_pretrained | " + " | ".join(phase_names) + " | save | shapes refined |",
        "|---|---|---|" + "---|" * len(phase_names) + "---|---|",
    ]
    for name in data["checkpoints"]:
        ours = [r for r in runs[name]["pt2onnx call"] if r["ok"]]
        if not ours:
            continue
        cells = [_fmt(_median([r["times"][k] for r in ours]), 3) for k in ("import", "load")]
        cells += [_fmt(_median([r["phases"].get(p, 0.0) for r in ours]), 3) for p in phase_names]
        cells.append(_fmt(_median([r["times"]["save"] for r in ours]), 3))
        cells.append(", ".join(ours[0]["shapes_refined"]) or "none")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "## optimum call process (seconds, median over rounds)", "", "| checkpoint | import | main_export |"]
    lines.append("|---|---|---|")
    for name in data["checkpoints"]:
        theirs = [r for r in runs[name]["optimum call"] if r["ok"]]
        cells = [_fmt(_median([r["times"][k] for r in theirs]), 3) for k in ("import", "export call")]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    failures = [
        f"- {name}, {kind}, round {i}: {r['error'][:300]}"
        for name in data["checkpoints"]
        for kind in KINDS
        for i, r in enumerate(runs[name][kind])
        if not r["ok"]
    ]
    if failures:
        lines += ["", "Failures:", "", *failures]
    return "\n".join(lines) + "\n"


def _run(command: list[str], env: dict[str, str], json_out: Path | None, timeout: float) -> dict[str, Any]:
    start = time.perf_counter()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timeout after {timeout:.0f} s", "wall_s": None}
    wall = time.perf_counter() - start
    record: dict[str, Any] = {"ok": proc.returncode == 0, "wall_s": wall}
    if proc.returncode != 0:
        record["error"] = f"exit {proc.returncode}: " + " / ".join(proc.stderr.strip().splitlines()[-5:])
    elif json_out is not None:
        record.update(json.loads(json_out.read_text()))
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--optimum-python", default="/work/optimum-venv/bin/python", help="the optimum venv's python")
    parser.add_argument(
        "--optimum-venv-made-with",
        default="python3 -m venv /work/optimum-venv && /work/optimum-venv/bin/pip install "
        "'optimum-onnx[onnxruntime]' torch==2.13.0",
        help="how that venv was made, for the page",
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--checkpoints", default=",".join(CHECKPOINTS))
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per process")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where hf_export.{json,md} go")
    parser.add_argument("--render", type=Path, help="only rewrite the page from this hf_export.json")
    parser.add_argument("--child", choices=["pt2onnx", "optimum"], help=argparse.SUPPRESS)
    parser.add_argument("--task", help=argparse.SUPPRESS)
    parser.add_argument("--capture-first", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("child_args", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        checkpoint, out, json_out = (Path(a) for a in args.child_args)
        if args.child == "pt2onnx":
            record = child_pt2onnx(checkpoint, args.task, out, args.capture_first)
        else:
            record = child_optimum(checkpoint, args.task, out.parent)
        json_out.write_text(json.dumps(record))
        return

    if args.render:
        (args.out / "hf_export.md").write_text(markdown(json.loads(args.render.read_text())))
        return
    names = [n for n in args.checkpoints.split(",") if n]
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    load_start = os.getloadavg()[0]
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {n: {k: [] for k in KINDS} for n in names}
    versions: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        checkpoints = build_checkpoints(folder, names)
        (folder / "factory.py").write_text(ENCODER_FACTORY)
        for r in range(args.rounds):
            print(f"round {r + 1}/{args.rounds}", flush=True)
            for name in names:
                shift = r % len(KINDS)
                for kind in KINDS[shift:] + KINDS[:shift]:
                    out = folder / "out" / f"{name}-{kind.replace(' ', '-')}-{r}"
                    out.mkdir(parents=True)
                    json_out = out / "times.json" if kind.endswith("call") else None
                    command = _command(kind, name, checkpoints[name], out, out / "times.json", args, r)
                    env = {**os.environ, "HF_EXPORT_CKPT": str(checkpoints[name]), "PYTHONWARNINGS": "ignore"}
                    record = _run(command, env, json_out, args.timeout)
                    if "versions" in record:
                        versions[kind.split()[0]] = record.pop("versions")
                    runs[name][kind].append(record)
                    state = f"{record['wall_s']:.2f} s" if record["ok"] else "FAILED " + record["error"][:200]
                    print(f"  {name:<6} {kind:<13} {state}", flush=True)
                    for file in sorted(out.rglob("*"), reverse=True):
                        file.unlink() if file.is_file() else file.rmdir()
    cpu = next(
        (ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines() if "model name" in ln),
        "?",
    )
    data = {
        "command": " ".join(["python", "benchmarks/studies/hf_export.py", *sys.argv[1:]]),
        "started": started,
        "rounds": args.rounds,
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load": [load_start, os.getloadavg()[0]],
        "optimum_venv_made_with": args.optimum_venv_made_with,
        "versions": versions,
        "checkpoints": names,
        "runs": runs,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "hf_export.json").write_text(json.dumps(data, indent=1))
    text = markdown(data)
    (args.out / "hf_export.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
