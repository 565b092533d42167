"""The model zoo: every model of the world's model libraries through pt2onnx and torch.onnx, side by side.

    python benchmarks/zoo/run.py [--library torchvision,timm,diffusers,transformers]
        [--sample N --seed S] [--models A,B] [--timeout 600] [--exporters pt2onnx,torch.onnx]
        [--out benchmarks/results/zoo]

Each model runs in a process of its own per exporter (``--timeout`` seconds for all of that
exporter's steps; a crash or a timeout is a row, not a dead run). Per model, exporter and
mode (``static``: the example's shapes; ``auto``: every dim dynamic where the model allows
it), the steps are:

1. export (pt2onnx: ``export(model, args, dynamic_shapes="auto")`` for auto; torch.onnx:
   ``torch.onnx.export(..., dynamo=True)``, with ``Dim.AUTO`` on every dim of every tensor
   input for auto);
2. onnxruntime on the example input against eager (atol 1e-4, rtol 1e-3), and for auto
   also on the second input of other sizes, unless torch's own captured program refuses
   its sizes (its guards narrow a dim; the row says so in ``other_input``). Past that
   tolerance, a run still passes as float32 noise where it is no farther from eager in
   float64 than 4 times eager's own float32 run is (a random-weight ResNet-152's outputs
   reach 1e7, and eager float32 is 10 from its float64 result);
3. OpenVINO (CPU, f32 precision hint), where it is importable, the same way.

Each step is ``pass`` or ``fail: <phase>: <first line of the error>`` (phases: capture,
translate, onnxruntime, numerics, openvino). ``--sample N`` takes N models per library,
drawn with ``--seed``. Writes ``<out>.json`` (every row) and ``<out>.md`` (pass rates per
library, exporter and mode, then every failure).
"""

from __future__ import annotations

import argparse
import copy
import datetime
import importlib.metadata
import inspect
import json
import random
import re
import shlex
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.utils._pytree as pytree

if __package__ in (None, ""):  # run as a script: the repository root on the path, for `benchmarks.zoo`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.zoo.catalogue import (
    LIBRARIES,
    ROOT,
    Case,
    Entry,
    NotBuilt,
    entries,
    entry,
    expected_failure,
    first_line,
)

EXPORTERS = ("pt2onnx", "torch.onnx")
MODES = ("static", "auto")
RUNTIMES = ("onnxruntime", "openvino")
ATOL, RTOL = 1e-4, 1e-3
NOT_COMPARED = "not compared (random-weight detections)"
PACKAGES = ("torch", "transformers", "timm", "torchvision", "diffusers", "onnxruntime", "openvino")


# -- one model, in the worker process ---------------------------------------------------


#: An input's tensors in the forward signature's order, pytree-flattened: (the argument's
#: name where the argument is one tensor, else None; the values).
Feeds = list[tuple[str | None, np.ndarray]]


def flat_inputs(model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Feeds:
    """The tensors of an input, as :data:`Feeds`."""
    signature = inspect.signature(model.forward)
    bound = signature.bind(*args, **kwargs)
    arguments = dict(bound.arguments)
    for name, value in bound.arguments.items():
        if signature.parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
            del arguments[name]  # keywords ``**kwargs`` catches: each by its own name, as the exporters name them
            arguments |= value
    feeds: Feeds = []
    for name, value in arguments.items():
        leaves = [leaf for leaf in pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor)]
        lone = isinstance(value, torch.Tensor)
        feeds += [(name if lone else None, leaf.detach().numpy()) for leaf in leaves]
    return feeds


def _match(names: list[str], feeds: Feeds) -> dict[str, np.ndarray]:
    """The feeds by the model's input names: by name where every input is a named tensor, else in order.

    By name first: exporters need not order keyword inputs as the signature does.
    """
    named = {name: value for name, value in feeds if name is not None}
    if all(name in named for name in names):
        return {name: named[name] for name in names}
    if len(names) != len(feeds):
        raise RuntimeError(f"the model has {len(names)} inputs, the example {len(feeds)} tensors")
    return dict(zip(names, (value for _, value in feeds)))


def auto_dynamic_shapes(model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """torch.export's spec for "every dim of every tensor input dynamic where the model allows it": ``Dim.AUTO`` on each."""
    bound = inspect.signature(model.forward).bind(*args, **kwargs)

    def spec(value: Any) -> Any:
        return dict.fromkeys(range(value.dim()), torch.export.Dim.AUTO) if isinstance(value, torch.Tensor) else None

    return {name: pytree.tree_map(spec, value) for name, value in bound.arguments.items()}


def _error(phase: str, error: BaseException) -> str:
    """``fail: <phase>: <type>: <first line>``; for an error that wraps another, the first line of the innermost.

    torch.onnx wraps torch.export's errors in one whose first line says only which step failed.
    """
    root = error
    while root.__cause__ is not None:
        root = root.__cause__
    cause = "" if root is error else f"{type(root).__name__}: "
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(root))  # terminal colours
    return f"fail: {phase}: {type(error).__name__}: {cause}{first_line(text)}"


#: Why an exporter's captured program refuses inputs' sizes (torch's guards), or None.
Refusal = Callable[[tuple[Any, ...], dict[str, Any]], "str | None"]


def export(case: Case, exporter: str, mode: str, path: Path) -> Refusal:
    """Export ``case`` with ``exporter`` in ``mode`` to ``path``; raises what the exporter raises.

    Returns what says whether the captured program takes other inputs' sizes: pt2onnx's
    ``guard_failure``; for torch.onnx, its exported program's own guard check (which refuses
    nothing: torch.onnx's decomposition drops the program's guards, so its users are not told).
    """
    if exporter == "pt2onnx":
        import pt2onnx

        dynamic = "auto" if mode == "auto" else None
        result = pt2onnx.export(
            case.model, case.args, case.kwargs, dynamic_shapes=dynamic, opset=case.opset, f=path, quiet=True
        )
        return lambda args, kwargs: result.guard_failure(*args, **kwargs)
    if exporter == "torch.onnx":
        dynamic = auto_dynamic_shapes(case.model, case.args, case.kwargs) if mode == "auto" else None
        program = torch.onnx.export(
            case.model,
            case.args,
            kwargs=case.kwargs,
            dynamic_shapes=dynamic,
            opset_version=case.opset,
            dynamo=True,
            verbose=False,
        )
        program.save(str(path))
        return lambda args, kwargs: _guard_failure(program.exported_program, args, kwargs)
    raise ValueError(f"unknown exporter {exporter!r}")


def _guard_failure(program: torch.export.ExportedProgram, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """The guard torch's program fails on these inputs (its module checks them before it runs), or None."""
    try:
        with torch.no_grad():
            program.module()(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 (only a failed guard or range check is a refusal)
        text = str(e)
        if "Guard failed" in text or "to be <=" in text or "to be >=" in text:
            return first_line(text)
    return None


def export_phase(exporter: str, error: BaseException) -> str:
    """Which phase an export error came from: ``capture`` (torch.export) or ``translate`` (everything after)."""
    name = type(error).__name__
    if exporter == "pt2onnx":
        return "capture" if name == "CaptureError" else "translate"
    return "capture" if name == "TorchExportError" else "translate"


def _run_onnxruntime(path: Path, feeds: Feeds) -> list[np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # one model at a time on a shared machine
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs() if not _is_update(o.name)]
    return session.run(names, _match([i.name for i in session.get_inputs()], feeds))


def _is_update(output: str) -> bool:
    """Whether a file's output is a buffer or input the model updates in place (pt2onnx's
    ``<name>.updated``: CTRL reassigns its position table), beside the model's own outputs."""
    return output.endswith(".updated")


def _run_openvino(path: Path, feeds: Feeds) -> list[np.ndarray]:
    import openvino

    # f32 as asked; one thread, as onnxruntime, on a shared machine.
    compiled = openvino.Core().compile_model(
        str(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1}
    )
    # An input's any_name may be another name OpenVINO merged into it (Llama 4's pixel_values
    # came out as "pad"): the one the feeds hold, where it has one.
    named = {name for name, _ in feeds}
    names = [next((n for n in sorted(i.get_names()) if n in named), i.any_name) for i in compiled.inputs]
    results = compiled(_match(names, feeds))
    return [np.asarray(results[output]) for output in compiled.outputs if not _is_update(output.any_name)]


class Check:
    """One input of a model: its feeds, eager's float32 outputs, and (on demand) eager's in float64."""

    def __init__(self, case: Case, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.case, self.args, self.kwargs = case, args, kwargs
        self.feeds = flat_inputs(case.model, args, kwargs)
        self._outputs = _eager(case.model, args, kwargs)
        self._exact: list[torch.Tensor] | None = None

    @property
    def expected(self) -> list[torch.Tensor]:
        """Eager's output tensors, flattened when compared: after an export registered the packs'
        pytree nodes (a transformers cache in the output is then its tensors, as in the file)."""
        return _tensors(self._outputs)

    def expected_for(self, got: list[np.ndarray]) -> list[torch.Tensor]:
        """:attr:`expected`, or with eager's ints too where ``got`` has that many outputs: a dynamic
        export returns the sizes a model outputs (MaskFormer-Swin's stages'), symbolic there, as
        outputs, where a static one folds them away."""
        if len(got) == len(self.expected):
            return self.expected
        with_ints = _tensors(self._outputs, ints=True)
        return with_ints if len(got) == len(with_ints) else self.expected

    def exact(self) -> list[torch.Tensor] | None:
        """Eager's outputs computed in float64 (model and floating inputs), or None where the model cannot."""
        if self._exact is None:
            args, kwargs = pytree.tree_map_only(
                torch.Tensor, lambda t: t.double() if t.is_floating_point() else t, (self.args, self.kwargs)
            )
            try:
                self._exact = _tensors(_eager(copy.deepcopy(self.case.model).double(), args, kwargs))
            except Exception:  # noqa: BLE001 (no float64 kernel, a dtype check: no float64 reference)
                self._exact = []
        return self._exact or None


#: How much farther from eager in float64 than eager's own float32 run a runtime may be, as float32
#: noise: another order of summation (OpenVINO's convolutions) lands within a few times torch's.
NOISE_FACTOR = 4


def float32_noise(check: Check, got: list[np.ndarray]) -> tuple[float, float] | None:
    """How far ``got`` and eager's float32 outputs are from eager's in float64 (the max over floating
    outputs), or None without a float64 reference."""
    exact = check.exact()
    if exact is None or not len(exact) == len(got) == len(check.expected):
        return None
    ours = theirs = 0.0
    for e32, e64, array in zip(check.expected, exact, got):
        g = torch.from_numpy(np.asarray(array)).double()
        if not g.shape == e32.shape == e64.shape:
            return None  # a structural difference: compare()'s message stands
        if e64.is_floating_point() and e64.numel():
            ours = max(ours, (g - e64).abs().nan_to_num(0.0).max().item())
            theirs = max(theirs, (e32.double() - e64).abs().nan_to_num(0.0).max().item())
    return ours, theirs


def compare(expected: list[torch.Tensor], got: list[np.ndarray]) -> float:
    """The max abs difference between eager's outputs and a runtime's; AssertionError past the tolerance."""
    if len(expected) != len(got):
        raise AssertionError(f"{len(got)} outputs, eager has {len(expected)}")
    worst = 0.0
    for i, (e, array) in enumerate(zip(expected, got)):
        g = torch.from_numpy(np.asarray(array))
        if g.shape != e.shape:
            raise AssertionError(f"output {i}: shape {tuple(g.shape)}, eager {tuple(e.shape)}")
        if not e.numel():
            continue
        if e.is_floating_point():
            # assert_close's criterion, |got - eager| <= atol + rtol * |eager|, with the difference in the message.
            difference = (g.double() - e.double()).abs().nan_to_num(0.0).max().item()
            worst = max(worst, difference)
            if not torch.allclose(g.to(e.dtype), e, atol=ATOL, rtol=RTOL, equal_nan=True):
                raise AssertionError(f"output {i}: max abs diff {difference:.3g} (atol {ATOL:g}, rtol {RTOL:g})")
        elif not torch.equal(g.to(e.dtype), e):
            raise AssertionError(f"output {i}: {int((g.to(e.dtype) != e).sum())} of {e.numel()} elements differ")
    return worst


def check_runtime(runtime: str, path: Path, case: Case, checks: list[Check]) -> dict[str, Any]:
    """Run the file in ``runtime`` on each check's input: the status and the max abs difference."""
    run = _run_onnxruntime if runtime == "onnxruntime" else _run_openvino
    worst, noise = 0.0, []
    for which, check in zip(("example", "other input"), checks):
        try:
            got = run(path, check.feeds)
        except Exception as e:  # noqa: BLE001 (the runtime's failure is the row's status)
            return {"status": _error(runtime, e) + ("" if which == "example" else f" (on the {which})")}
        if not case.compare:
            if len(got) == 0:
                return {"status": f"fail: {runtime}: no outputs"}
            continue
        try:
            worst = max(worst, compare(check.expected_for(got), got))
        except AssertionError as e:
            distances = float32_noise(check, got)
            if distances is None:
                return {"status": f"fail: numerics: on the {which}: {first_line(str(e))}", "max_abs_diff": worst}
            ours, theirs = distances
            measured = f"{ours:.3g} from eager in float64, eager's own float32 run {theirs:.3g}"
            if ours > NOISE_FACTOR * theirs + ATOL:
                return {
                    "status": f"fail: numerics: on the {which}: {first_line(str(e))}; {measured}",
                    "max_abs_diff": worst,
                }
            noise.append(f"on the {which}: float32 noise: {measured}")
    if not case.compare:
        return {"status": "pass", "numerics": NOT_COMPARED, "outputs": len(got)}
    return {"status": "pass", "max_abs_diff": worst, **({"numerics": "; ".join(noise)} if noise else {})}


def _eager(model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    with torch.no_grad():
        return model(*args, **kwargs)


def _tensors(outputs: Any, *, ints: bool = False) -> list[torch.Tensor]:
    """The tensors among ``outputs``' leaves; with ``ints``, its ints too, as 0-d int64 tensors."""
    leaves = pytree.tree_leaves(outputs)
    if ints:
        leaves = [torch.tensor(leaf) if type(leaf) is int else leaf for leaf in leaves]
    return [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]


def model_rows(
    item: Entry, exporters: Sequence[str], modes: Sequence[str], runtimes: Sequence[str], directory: Path
) -> Iterator[dict[str, Any]]:
    """The rows of one model: one per exporter and mode, each yielded as soon as it is done."""
    base = {"library": item.library, "model": item.name}
    start = time.perf_counter()
    try:
        case = item.build()
        # Eager's outputs on both inputs: a model that does not run on them is not built either.
        example = Check(case, case.args, case.kwargs)
        other = Check(case, case.other_args, case.other_kwargs)
    except NotBuilt as e:
        built = f"not built: {e}"
    except Exception as e:  # noqa: BLE001 (a builder's own failure is the model's row too)
        built = f"not built: {type(e).__name__}: {first_line(str(e))}"
    else:
        built = "built"
    build_s = time.perf_counter() - start
    if built != "built":
        for exporter in exporters:
            for mode in modes:
                yield {**base, "exporter": exporter, "mode": mode, "built": built, "build_s": build_s}
        return
    runtimes = [r for r in runtimes if r != "openvino" or _openvino_importable()]
    for exporter in exporters:
        for mode in modes:
            row: dict[str, Any] = {**base, "exporter": exporter, "mode": mode, "built": built, "build_s": build_s}
            path = directory / f"{exporter}-{mode}.onnx"
            start = time.perf_counter()
            try:
                refusal = export(case, exporter, mode, path)
            except Exception as e:  # noqa: BLE001 (an export failure is the row's status)
                row["export"] = _error(export_phase(exporter, e), e)
                row["traceback"] = traceback.format_exc()[-4000:]
            else:
                row["export"] = "pass"
            row["export_s"] = round(time.perf_counter() - start, 3)
            if row["export"] == "pass":
                checks = [example, other] if mode == "auto" else [example]
                refused = refusal(case.other_args, case.other_kwargs) if mode == "auto" else None
                if refused is not None:
                    # torch's own program refuses those sizes: no exporter's graph can be held to them.
                    row["other_input"] = f"refused by torch's guards: {first_line(refused)}"
                    checks = [example]
                for runtime in runtimes:
                    result = check_runtime(runtime, path, case, checks)
                    row[runtime] = result.pop("status")
                    row.update({f"{runtime}_{key}": value for key, value in result.items()})
            yield row


def _openvino_importable() -> bool:
    try:
        import openvino  # noqa: F401
    except ImportError:
        return False
    return True


def worker(
    library: str, name: str, exporters: Sequence[str], modes: Sequence[str], runtimes: Sequence[str], rows: Path
) -> None:
    """Write the rows of one model to ``rows``, one JSON line each, flushed as each is done."""
    torch.set_num_threads(1)  # one model at a time on a shared machine
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as directory, rows.open("a") as out:
        for row in model_rows(entry(library, name), exporters, modes, runtimes, Path(directory)):
            out.write(json.dumps(row) + "\n")
            out.flush()


# -- the driver ---------------------------------------------------------------------------


def run_model(
    library: str,
    name: str,
    exporters: Sequence[str] = EXPORTERS,
    modes: Sequence[str] = MODES,
    runtimes: Sequence[str] = RUNTIMES,
    timeout: float = 600,
) -> list[dict[str, Any]]:
    """The rows of one model, each exporter's in a process of its own under ``timeout`` seconds
    (one exporter's slow capture does not eat the other's time); a crash or timeout fills the missing rows."""
    rows: list[dict[str, Any]] = []
    seconds = 0.0
    for exporter in exporters:
        exporter_rows, exporter_seconds = _run_worker(library, name, exporter, modes, runtimes, timeout)
        rows += exporter_rows
        seconds += exporter_seconds
    for row in rows:
        row["model_s"] = round(seconds, 2)
    return rows


def _run_worker(
    library: str, name: str, exporter: str, modes: Sequence[str], runtimes: Sequence[str], timeout: float
) -> tuple[list[dict[str, Any]], float]:
    """One exporter's rows of one model from a worker process, and the seconds the process took."""
    with tempfile.TemporaryDirectory() as directory:
        rows_file = Path(directory) / "rows.jsonl"
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--worker",
            f"{library}:{name}",
            "--exporters",
            exporter,
            "--modes",
            ",".join(modes),
            "--runtimes",
            ",".join(runtimes),
            "--rows",
            str(rows_file),
        ]
        start = time.perf_counter()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
            failure = (
                None if done.returncode == 0 else f"fail: crash: exit {done.returncode}: {_last_line(done.stderr)}"
            )
        except subprocess.TimeoutExpired:
            failure = f"fail: timeout after {timeout:g} s"
        seconds = time.perf_counter() - start
        rows = [json.loads(line) for line in rows_file.read_text().splitlines()] if rows_file.exists() else []
    seen = {r["mode"] for r in rows}
    for mode in modes:
        if mode not in seen:
            rows.append(
                {
                    "library": library,
                    "model": name,
                    "exporter": exporter,
                    "mode": mode,
                    "built": "built",
                    "export": failure or "fail: no row",
                }
            )
    return rows, seconds


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def select(libraries: Sequence[str], sample: int | None, seed: int, names: Sequence[str] = ()) -> list[Entry]:
    """The models to run: every one of each library (of ``names`` only, if given), or ``sample`` of each drawn with ``seed``."""
    chosen: list[Entry] = []
    for library in libraries:
        items = [e for e in entries(library) if not names or e.name in names]
        if sample is not None and sample < len(items):
            items = sorted(random.Random(seed).sample(items, sample), key=lambda e: e.name)
        chosen += items
    return chosen


def versions() -> dict[str, str]:
    """The versions of the packages the zoo runs, ``-`` where one is not installed."""
    # torchvision lives beside the environment, not in it (catalogue.setup_torchvision).
    path = [*sys.path, str(ROOT / ".venv" / "torchvision-site")]
    found = {}
    for package in PACKAGES:
        distribution = next(iter(importlib.metadata.distributions(name=package, path=path)), None)
        found[package] = distribution.version if distribution is not None else "-"
    return found


def _steps(row: dict[str, Any]) -> dict[str, str]:
    """The row's steps that have a status, as (mode, step) -> status."""
    return {step: row[step] for step in ("export", *RUNTIMES) if step in row}


def markdown(rows: list[dict[str, Any]], command: str, when: str, package_versions: dict[str, str]) -> str:
    """The results table: pass rates per library, exporter and mode, then every failure."""
    lines = [
        "# Model zoo: pt2onnx beside torch.onnx",
        "",
        f"Command: `{command}`  ",
        f"Date: {when}  ",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in package_versions.items()),
        "",
        "Per library and exporter: models built, then per mode (static / auto) the models whose export,",
        "onnxruntime run and OpenVINO run passed, out of those built (a run counts as passed only",
        "after its export did; `not built` models are counted apart, not as failures).",
        "",
        "| library | exporter | models | not built | static export | static onnxruntime | static openvino"
        " | auto export | auto onnxruntime | auto openvino |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["library"], row["exporter"]), []).append(row)
    for (library, exporter), group in groups.items():
        models = {r["model"] for r in group}
        built = {r["model"] for r in group if r["built"] == "built"}
        cells = []
        for mode in MODES:
            mode_rows = [r for r in group if r["mode"] == mode and r["built"] == "built"]
            for step in ("export", *RUNTIMES):
                passed = sum(r.get(step) == "pass" for r in mode_rows)
                cells.append(f"{passed}/{len(mode_rows)}" if mode_rows else "-")
        lines.append(
            f"| {library} | {exporter} | {len(models)} | {len(models) - len(built)} | " + " | ".join(cells) + " |"
        )
    lines += [
        "",
        "## Failures",
        "",
        "pt2onnx's failures in `EXPECTED_FAILURES` (`benchmarks/zoo/catalogue.py`) say why; any other is new.",
        "",
        "| library | model | exporter | mode | step | status | expected because |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        for step, status in _steps(row).items():
            if status != "pass":
                why = expected_failure(row["library"], row["model"], row["mode"], step)
                known = _cell(why) if why is not None and row["exporter"] == "pt2onnx" else ""
                lines.append(
                    f"| {row['library']} | {row['model']} | {row['exporter']} | {row['mode']} | {step} "
                    f"| {_cell(status)} | {known} |"
                )
    lines += [
        "",
        "## Other inputs torch's program refuses",
        "",
        "With `auto`, a model whose second input torch's own captured program refuses (guards on",
        "the sizes, from the model's code) runs at the example only. pt2onnx's report lists the",
        "sizes those guards accept (`report.guarded_sizes`) and its `run()` warns at the others.",
        "",
        "| library | model | exporter | why |",
        "|---|---|---|---|",
    ]
    for row in rows:
        if "other_input" in row:
            lines.append(f"| {row['library']} | {row['model']} | {row['exporter']} | {_cell(row['other_input'])} |")
    lines += [
        "",
        "## Passed as float32 noise",
        "",
        f"Runs past atol {ATOL:g} + rtol {RTOL:g} that are no farther from eager in float64 than {NOISE_FACTOR} times",
        "eager's own float32 run is (outputs of large magnitude).",
        "",
        "| library | model | exporter | mode | runtime | how far |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        for runtime in RUNTIMES:
            note = row.get(f"{runtime}_numerics", "")
            if "float32 noise" in note:
                lines.append(
                    f"| {row['library']} | {row['model']} | {row['exporter']} | {row['mode']} | {runtime} "
                    f"| {_cell(note)} |"
                )
    lines += ["", "## Not built", "", "| library | model | reason |", "|---|---|---|"]
    reported = set()
    for row in rows:
        if row["built"] != "built" and (row["library"], row["model"]) not in reported:
            reported.add((row["library"], row["model"]))
            lines.append(f"| {row['library']} | {row['model']} | {_cell(row['built'])} |")
    lines += [
        "",
        "## Seconds per model",
        "",
        "Export seconds per exporter and mode; then the model's whole process, all steps.",
        "",
    ]
    columns = [
        (e, m) for e in dict.fromkeys(r["exporter"] for r in rows) for m in dict.fromkeys(r["mode"] for r in rows)
    ]
    lines += [
        "| library | model | " + " | ".join(f"{e} {m}" for e, m in columns) + " | process |",
        "|---|---|" + "---|" * (len(columns) + 1),
    ]
    by_model: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]] = {}
    for row in rows:
        by_model.setdefault((row["library"], row["model"]), {})[row["exporter"], row["mode"]] = row
    for (library, model), cells in by_model.items():
        seconds = [str(cells.get(column, {}).get("export_s", "-")) for column in columns]
        process = next(iter(cells.values())).get("model_s", "-")
        lines.append(f"| {library} | {model} | " + " | ".join(seconds) + f" | {process} |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--library", default=",".join(LIBRARIES), help="comma-separated libraries")
    parser.add_argument("--sample", type=int, default=None, help="models per library, drawn with --seed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", default="", help="comma-separated model names: only these")
    # 600: room for an "auto" capture stopped at pt2onnx's 300 s bound, then narrowed (pt2onnx.capture).
    parser.add_argument("--timeout", type=float, default=600, help="seconds per model and exporter, all its steps")
    parser.add_argument("--exporters", default=",".join(EXPORTERS))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--runtimes", default=",".join(RUNTIMES))
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "zoo")
    parser.add_argument(
        "--resume", action="store_true", help="keep the models <out>.json already holds and run only the others"
    )
    parser.add_argument(
        "--shard", metavar="K/N", help="only every N-th chosen model from the K-th (0-based): N runs side by side"
    )
    parser.add_argument(
        "--merge",
        metavar="A.json,B.json",
        help="run nothing: write <out> from these runs' rows, a later file's row of a model, exporter and mode "
        "replacing an earlier one's",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # LIBRARY:NAME, in the model's own process
    parser.add_argument("--rows", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    exporters, modes, runtimes = (options.exporters.split(","), options.modes.split(","), options.runtimes.split(","))
    if options.worker:
        library, name = options.worker.split(":", 1)
        worker(library, name, exporters, modes, runtimes, options.rows)
        return

    command = shlex.join(["python", "benchmarks/zoo/run.py", *(sys.argv[1:] if argv is None else argv)])
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    if options.merge:
        record = merged([json.loads(Path(f).read_text()) for f in options.merge.split(",")])
        _write(options.out, record)
        print(f"wrote {options.out}.json and {options.out}.md: {len(record['rows'])} rows")
        return
    chosen = select(
        options.library.split(","), options.sample, options.seed, options.models.split(",") if options.models else ()
    )
    if options.shard:
        k, n = (int(part) for part in options.shard.split("/"))
        chosen = chosen[k::n]
    rows: list[dict[str, Any]] = []
    package_versions = versions()
    options.out.parent.mkdir(parents=True, exist_ok=True)
    if options.resume and Path(f"{options.out}.json").exists():
        rows, chosen = resumed(json.loads(Path(f"{options.out}.json").read_text()), chosen, package_versions)
        print(f"resuming {options.out}.json: {len({(r['library'], r['model']) for r in rows})} models kept", flush=True)
    for i, item in enumerate(chosen, 1):
        model_rows_ = run_model(item.library, item.name, exporters, modes, runtimes, options.timeout)
        rows += model_rows_
        summary = ", ".join(f"{r['exporter']}/{r['mode']}: {_short(r)}" for r in model_rows_)
        print(f"[{i}/{len(chosen)}] {item.library} {item.name} ({model_rows_[0]['model_s']} s): {summary}", flush=True)
        # Written after every model: a run of hours stopped early keeps the models it finished.
        _write(options.out, {"command": command, "date": when, "versions": package_versions, "rows": rows})
    print(f"wrote {options.out}.json and {options.out}.md")


def _write(out: Path, record: dict[str, Any]) -> None:
    Path(f"{out}.json").write_text(json.dumps(record, indent=1) + "\n")
    Path(f"{out}.md").write_text(markdown(record["rows"], record["command"], record["date"], record["versions"]))


def merged(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One record of several runs of the same packages (shards, or some exporters and modes of a model
    run again with more time): each row (model, exporter, mode) from the last run that has it, in the
    order rows first appear."""
    versions_ = records[0]["versions"]
    for record in records[1:]:
        if record["versions"] != versions_:
            raise SystemExit(f"--merge: runs of other packages ({versions_} and {record['versions']}) do not mix")
    latest = {(r["library"], r["model"], r["exporter"], r["mode"]): r for record in records for r in record["rows"]}
    dates = [date for record in records for date in record["date"].split(" to ")]
    return {
        "command": " + ".join(r["command"] for r in records),
        # Each run's date, or range of dates for a merged one: the earliest to the latest of them all
        # (a resumed run's own date is when it resumed).
        "date": " to ".join(sorted({min(dates), max(dates)})),
        "versions": versions_,
        "rows": list(latest.values()),
    }


def resumed(
    record: dict[str, Any], chosen: Sequence[Entry], package_versions: dict[str, str]
) -> tuple[list[dict[str, Any]], list[Entry]]:
    """The rows an earlier run of the same packages wrote, and the chosen models it has not run.

    A run of hours, stopped (a machine given back, a session's end), goes on where it stopped;
    rows from other package versions would mix two runs in one table, so they stop it.
    """
    if record["versions"] != package_versions:
        raise SystemExit(f"--resume: the earlier run had {record['versions']}, this one {package_versions}")
    done = {(r["library"], r["model"]) for r in record["rows"]}
    wanted = {(e.library, e.name) for e in chosen}
    rows = [r for r in record["rows"] if (r["library"], r["model"]) in wanted]
    return rows, [e for e in chosen if (e.library, e.name) not in done]


def _short(row: dict[str, Any]) -> str:
    if row["built"] != "built":
        return row["built"][:80]
    failed = [f"{step} {status[:80]}" for step, status in _steps(row).items() if status != "pass"]
    return "; ".join(failed) or "pass"


if __name__ == "__main__":
    main()
