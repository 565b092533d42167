"""pt2onnx beside torch.onnx.export(dynamo=True) on op_db's samples: which ops pass every sample.

The same samples as the OpInfo test module (``tests/opinfo/opinfo_samples.py``): the first
``--samples`` float32 samples of each op of torch's op_db, each wrapped in a module whose
inputs are the sample's tensors, exported with static shapes by both exporters, run in
onnxruntime (CPU) and compared with eager by pt2onnx's per-dtype comparison. An op
passes when every sample matches; it is silently wrong when some sample exported and
ran but differs from eager. Writes ``benchmarks/results/opinfo_compare.{json,md}``::

    python benchmarks/studies/opinfo_compare.py --samples 2 --jobs 2
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import sys
import time
import warnings
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from multiprocessing import get_context
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "opinfo"))

from opinfo_samples import opinfos, run_sample, sample_inputs

RESULTS = Path(__file__).resolve().parents[1] / "results"


def _check_pt2onnx(module, tensors, atol):
    import pt2onnx

    result = pt2onnx.export(module, tensors)
    check = result.verify(*tensors, _atol=atol)
    if not check.ok:
        raise AssertionError(f"ONNX model differs from eager PyTorch:\n{check}")
    return result


def _check_torch_onnx(module, tensors, atol):
    import onnxruntime as ort
    import torch.utils._pytree as pytree

    from pt2onnx.errors import Pt2OnnxError, VerificationError
    from pt2onnx.runtime import compare, from_ort, to_ort

    try:
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            program = torch.onnx.export(module, tensors, dynamo=True, verbose=False)
    except Exception as e:
        # torch.onnx's own export error: counted as an export error, as pt2onnx's are.
        raise Pt2OnnxError(f"torch.onnx: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from e
    proto = program.model_proto
    try:
        session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        feeds = dict(zip(names, (to_ort(t) for t in tensors)))
        got = [from_ort(v) for v in session.run_with_ort_values([o.name for o in session.get_outputs()], feeds)]
    except Exception as e:
        raise VerificationError(f"onnxruntime: {type(e).__name__}: {e}") from e
    with torch.no_grad():
        expected = pytree.tree_leaves(module(*[t.clone() for t in tensors]))
    expected = [e for e in expected if isinstance(e, torch.Tensor)]
    if len(expected) != len(got):
        raise AssertionError(f"ONNX model differs from eager PyTorch:\n{len(got)} outputs, eager {len(expected)}")
    check = compare([f"output_{i}" for i in range(len(got))], expected, got, atol=atol)
    if not check.ok:
        raise AssertionError(f"ONNX model differs from eager PyTorch:\n{check}")
    return None


CHECKS = {"pt2onnx": _check_pt2onnx, "torch.onnx": _check_torch_onnx}


def run_op(name: str, samples: int) -> dict[str, list[str]]:
    """``{exporter: [kind, detail]}``: the first failing sample's outcome, else pass."""
    warnings.simplefilter("ignore")
    logging.disable(logging.CRITICAL)
    torch.set_num_threads(1)
    info = opinfos()[name]
    results = {}
    for exporter, check in CHECKS.items():
        outcome = None
        for sample in sample_inputs(info, torch.float32, samples):
            got = run_sample(info, sample, check)
            if got.kind == "skip":
                continue
            if outcome is None or outcome.ok:
                outcome = got
            if not got.ok:
                break
        results[exporter] = [outcome.kind, outcome.detail] if outcome else ["skip", "no sample"]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--ops", help="comma-separated op ids (default: every op_db op with float32 samples)")
    args = parser.parse_args()
    names = (
        args.ops.split(",")
        if args.ops
        else [n for n, i in opinfos().items() if torch.float32 in i.supported_dtypes("cpu")]
    )
    start = time.perf_counter()
    outcomes: dict[str, dict[str, list[str]]] = {}
    with get_context("spawn").Pool(args.jobs, maxtasksperchild=10) as pool:
        jobs = [(n, pool.apply_async(run_op, (n, args.samples))) for n in names]
        for name, job in jobs:
            try:
                outcomes[name] = job.get(timeout=600)
            except Exception as e:  # noqa: BLE001 - a worker died or hung: both count as failures
                outcomes[name] = {x: ["crash", f"{type(e).__name__}: {e}"[:200]] for x in CHECKS}
            print(name, {x: r[0] for x, r in outcomes[name].items()}, flush=True)
    tested = {n: r for n, r in outcomes.items() if any(k != "skip" for k, _ in r.values())}
    summary = {}
    for exporter in CHECKS:
        kinds = Counter(r[exporter][0] for r in tested.values())
        summary[exporter] = {"ops": len(tested), **dict(kinds)}
    only = {
        x: sorted(n for n, r in tested.items() if r[x][0] == "pass" and r[y][0] != "pass")
        for x, y in (("pt2onnx", "torch.onnx"), ("torch.onnx", "pt2onnx"))
    }
    wrong = {x: sorted(n for n, r in tested.items() if r[x][0] == "wrong") for x in CHECKS}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "opinfo_compare.json").write_text(
        json.dumps({"summary": summary, "only": only, "wrong": wrong, "outcomes": outcomes}, indent=1, sort_keys=True)
    )
    lines = [
        "# op_db samples: pt2onnx beside torch.onnx.export(dynamo=True)",
        "",
        f"`python benchmarks/studies/opinfo_compare.py --samples {args.samples} --jobs {args.jobs}` (torch {torch.__version__}); "
        f"the first {args.samples} float32 samples of each op, static shapes, {time.perf_counter() - start:.0f} s.",
        "",
        "| exporter | ops tested | pass every sample | silently wrong | export error | onnxruntime failure | crash | random |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for x, s in summary.items():
        lines.append(
            f"| {x} | {s['ops']} | {s.get('pass', 0)} | {s.get('wrong', 0)} | {s.get('error', 0)} | "
            f"{s.get('runtime', 0)} | {s.get('crash', 0)} | {s.get('random', 0)} |"
        )
    lines += ["", f"Pass only with pt2onnx ({len(only['pt2onnx'])}): {', '.join(only['pt2onnx'])}", ""]
    lines += [f"Pass only with torch.onnx ({len(only['torch.onnx'])}): {', '.join(only['torch.onnx'])}", ""]
    for x in CHECKS:
        lines.append(f"Silently wrong with {x} ({len(wrong[x])}): {', '.join(wrong[x])}")
    (RESULTS / "opinfo_compare.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
