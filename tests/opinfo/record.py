"""Run op_db's samples through pt2onnx and write every outcome: the data behind the expected failures.

Not a test: the OpInfo test module checks the outcomes against ``opinfo_expected.py``; this
script shows them all at once (and is how ``opinfo_expected.py`` was drafted)::

    python tests/opinfo/record.py --samples 1 --jobs 2 --out /tmp/opinfo.json
    python tests/opinfo/record.py --dtypes float32 --ops nn.functional.normalize,norm

Each (op, dtype) gets the outcome of its first failing sample, else ``pass``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import warnings
from collections import Counter
from multiprocessing import get_context
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))

from opinfo_samples import opinfos, run_sample, sample_inputs, skip_reason


def _pt2onnx_check(module, tensors, atol):
    from pt2onnx.testing import assert_exports_like_eager

    return assert_exports_like_eager(module, tensors, atol=atol)


def run_op(name: str, dtypes: list[str] | None, samples: int | None) -> dict[str, list]:
    """``{dtype: [kind, detail, converted ops]}`` for one op, at the default opset only (as the test)."""
    from pt2onnx.testing import OLDEST_OPSET_EVERY_ENV

    os.environ[OLDEST_OPSET_EVERY_ENV] = "0"
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    info = opinfos()[name]
    results = {}
    for dtype in sorted(info.supported_dtypes("cpu"), key=str):
        key = str(dtype).removeprefix("torch.")
        if dtypes is not None and key not in dtypes:
            continue
        outcome, converted, skipped = None, set(), []
        for sample in sample_inputs(info, dtype, samples):
            got = run_sample(info, sample, _pt2onnx_check)
            converted.update(got.converted)
            if got.kind == "skip":
                skipped.append(got.detail)
                continue
            if outcome is None or outcome.kind == "pass":
                outcome = got
            if not got.ok:
                break
        kind, detail = (outcome.kind, outcome.detail) if outcome else ("skip", skip_reason(skipped))
        results[key] = [kind, detail, sorted(converted)]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", help="comma-separated op ids (default: all of op_db)")
    parser.add_argument("--dtypes", help="comma-separated dtypes, e.g. float32,int64 (default: all supported)")
    parser.add_argument("--samples", type=int, default=1, help="samples per op and dtype (0: all)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--write-expected", action="store_true", help="rewrite opinfo_expected.py from the outcomes")
    parser.add_argument("--from-json", action="store_true", help="read the outcomes from --out instead of running")
    args = parser.parse_args()
    if args.from_json:
        write_expected(json.loads(args.out.read_text()), Path(__file__).parent / "opinfo_expected.py")
        return
    names = args.ops.split(",") if args.ops else list(opinfos())
    dtypes = args.dtypes.split(",") if args.dtypes else None
    samples = args.samples or None
    start = time.perf_counter()
    outcomes: dict[str, dict[str, list[str]]] = {}
    # Fresh workers now and then: exports leave onnxruntime sessions and traced graphs behind.
    with get_context("spawn").Pool(args.jobs, maxtasksperchild=25) as pool:
        jobs = [(name, pool.apply_async(run_op, (name, dtypes, samples))) for name in names]
        for name, job in jobs:
            try:
                outcomes[name] = job.get()
            except Exception as e:  # noqa: BLE001 - record it as a crash of every dtype
                outcomes[name] = {"*": ["crash", f"{type(e).__name__}: {e}"[:300]]}
            print(name, {d: r[0] for d, r in outcomes[name].items()}, flush=True)
    args.out.write_text(json.dumps(outcomes, indent=1, sort_keys=True))
    kinds = Counter(r[0] for per_op in outcomes.values() for r in per_op.values())
    print(f"{len(outcomes)} ops, {sum(kinds.values())} (op, dtype) pairs: {dict(kinds)}")
    print(f"{time.perf_counter() - start:.0f} s; wrote {args.out}")
    if args.write_expected:
        write_expected(outcomes, Path(__file__).parent / "opinfo_expected.py")


def _reason(kind: str, detail: str) -> str:
    """The expected-failure reason an outcome stands for (the draft ``opinfo_expected.py`` says)."""
    if kind == "random":
        return detail if "uninitialized" in detail else "the op draws random numbers: no export can equal eager"
    if kind == "wrong":
        return f"DEFECT, silently wrong: {detail}"
    if kind == "runtime":
        return f"DEFECT, onnxruntime fails at run time: {detail}"
    if kind == "crash":
        return f"DEFECT, the exporter crashes: {detail}"
    if kind == "dtype":
        return f"the export refuses the dtype: {detail.split('] ', 1)[-1]}"
    if detail.startswith("UnsupportedOpsError"):
        return f"no converter and no usable torch decomposition: {detail.partition('for ')[2] or detail}"
    if detail.startswith("CaptureError"):
        return f"torch.export cannot capture it: {detail.split('] ', 1)[-1]}"
    if detail.startswith("UnsupportedArgumentError"):
        return f"ONNX cannot express an argument: {detail.split('] ', 1)[-1]}"
    return detail


def write_expected(outcomes: dict[str, dict[str, list]], path: Path) -> None:
    """Rewrite ``EXPECTED`` in ``opinfo_expected.py`` from recorded outcomes: every failing
    (op, dtype) that needs an entry, with its reason.

    An op that passes in no dtype and fails the same way in several gets one ``*`` entry
    (and its own entry for each dtype that fails otherwise). A listed entry whose outcome
    stays the same is kept as it is: its reason may be written by hand, and a ``wrong`` one
    names what is still right, which no recording can tell (a new ``wrong`` entry is written
    without it, and the test of the entries asks for it).
    """
    from opinfo_expected import EXPECTED, WITHOUT_ONEDNN_BFLOAT16, accepted_without_entry
    from opinfo_samples import Outcome

    rows = []
    for name in sorted(outcomes):
        listed = EXPECTED.get(name, {})
        needed = {
            dtype: (kind, detail)
            for dtype, (kind, detail, *_) in sorted(outcomes[name].items())
            if kind not in ("pass", "skip")
            and (dtype == "float32" or not accepted_without_entry(Outcome(kind, detail)))
            # Whether these fail depends on the CPU: their own table holds them.
            and not (dtype == "bfloat16" and name in WITHOUT_ONEDNN_BFLOAT16)
        }
        if not needed:
            continue
        common = Counter(needed.values()).most_common(1)[0]
        every = not any(r[0] == "pass" for r in outcomes[name].values()) and (common[1] > 1 or "*" in listed)
        entries = {}
        for dtype, (kind, detail) in needed.items():
            key = "*" if every and (kind, detail) == common[0] else dtype
            # A kept entry: the key's own, else (a float32 entry becoming "*") the dtype's.
            kept = [e for e in (listed.get(key), listed.get(dtype)) if e is not None and e[0] == kind]
            if kept:
                entries[key] = kept[0]
            else:
                entries.setdefault(key, (kind, _reason(kind, detail)))
        body = "".join(f"        {d!r}: {e!r},\n" for d, e in sorted(entries.items()))
        rows.append(f"    {name!r}: {{\n{body}    }},\n")
    text = path.read_text()
    start = text.index("EXPECTED: dict")
    head, tail = text[: text.index("{", start) + 1], text[text.index("\n}\n", start) + 1 :]
    path.write_text(f"{head}\n{''.join(rows)}{tail}")


if __name__ == "__main__":
    main()
