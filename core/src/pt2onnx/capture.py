"""Capture: ``torch.export.export`` in the mode the user asked for, with documented fallbacks.

Some models capture in one mode only. When capture fails in the asked mode it is
retried in the other one, with a warning; the report says which mode produced the
graph. One known failure has its own fallback: calls of ``torch.ops.higher_order.scan``
with the keywords ``dim``, ``reverse`` and ``additional_inputs`` (the seeds' scan
example; torch >= 2.6 rejects them in both modes) are retried with those calls routed
through ``torch._higher_order_ops.scan.scan``, which computes the same thing.
``fallback=False`` turns every fallback off. The hint of a capture error reflects what
was tried (after both modes failed it does not suggest the other one) and names the line
of the user's code the failure comes from.

torch.export keeps its tracing state in process-wide globals (the proxy dispatch mode
slot, the module hierarchy being exported), so two threads tracing at once corrupt each
other. Every trace — capture and every re-trace (``run_decompositions``) — holds
:data:`tracing_lock`; the fallback is decided per call, so one thread's failure never
changes another's capture mode.

``torch.vmap`` (also what ``associative_scan(combine_mode="generic")`` uses) is captured
as batching markers (``torch._functorch.predispatch``) around per-sample ops; such a
program is re-traced once (``run_decompositions({})``), which applies the batching.

Keywords a model's ``**kwargs`` catches are captured as named parameters of ``forward``
(for the capture only, then undone): torch.export lays them out two ways and fails on any
dynamic shape among them (transformers >= 5.24 takes ``past_key_values`` so).

``torch.distributions`` checks their arguments' values by default (``validate_args``): a
Python ``if`` on tensor values, which no trace can take (BLT's patcher builds a
``Categorical`` from its logits). The checks are off while capture runs, as torch's own
assertions on values vanish from an export (TorchDynamo turns them off for the whole
process the first time it runs, so without this a model's capture would depend on whether
a strict capture came first); a distribution built with ``validate_args=True`` keeps them
and still fails.

Functions marked with ``torch.compiler.nested_compile_region`` stay ``invoke_subgraph``
calls (torch would inline single-use regions), so they become ONNX local functions.

With ``refine=True`` (``dynamic_shapes="auto"``: dims pt2onnx and its plugins' hints
chose, not the user), a capture that fails only because the model bounds a dim (a
position-embedding table of 128 rows) or ties dims together is retried with torch's own
suggested fixes (ranges of named dims; a constant hands the dim to torch as ``Dim.AUTO``),
or, where torch suggests none for a guard it cannot prove over a named range, with that dim
as ``Dim.AUTO``; ``Captured.refined`` lists them, and the report shows them. Where the
capture still fails, it is retried with only the batch dims (axis 0) dynamic, then with every
dim static, and ``Captured.narrowed`` says why the other dims are static (torch's symbolic
shapes cannot take every model: S3D's pooling sends sympy an inequality it cannot solve).
A capture with every dim dynamic that runs past :func:`auto_capture_seconds` (sympy
simplifying the floor divisions of window attention's reshapes for many minutes: timm's
DaViT and LaMHaloBotNet, torchvision's MaxViT) is stopped and narrowed the same way.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import signal
import sysconfig
import threading
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.export import Dim, ExportedProgram

from .errors import CaptureError
from .interface.calling import keywords_as_parameters

__all__ = ["CaptureFallbackWarning", "Captured", "capture", "tracing_lock", "user_frame"]

#: Held by every torch.export trace in this process (capture and re-traces): they are not re-entrant across threads.
tracing_lock = threading.RLock()


class CaptureFallbackWarning(UserWarning):
    """Capture failed as asked and succeeded another way: in the other mode, or, for
    ``dynamic_shapes="auto"``, with fewer dims dynamic."""


@dataclass(frozen=True)
class Captured:
    """The captured program and how it was obtained."""

    program: ExportedProgram
    strict: bool | None
    strategy: str
    fallback_reason: str | None = None
    #: torch's suggested fixes applied to the dynamic shapes (``refine=True``), as torch words them.
    refined: tuple[str, ...] = ()
    #: Why dims were captured static that ``dynamic_shapes`` left dynamic (the fallback of
    #: ``narrow=True``), or None when the capture took the shapes as given.
    narrowed: str | None = None


class _CallableModule(torch.nn.Module):
    """Wraps a plain callable so torch.export can capture it; keeps its signature for naming."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn
        self.forward = fn


def as_module(model: Any) -> torch.nn.Module:
    """``model`` itself when it is an ``nn.Module``, else a module calling it."""
    if isinstance(model, torch.nn.Module):
        return model
    if callable(model):
        return _CallableModule(model)
    raise CaptureError(
        f"cannot export an object of type {type(model).__name__}",
        hint="pass an nn.Module, a callable, or a torch.export.ExportedProgram",
    )


# Frames of these directories are torch's (sympy is its symbolic-shape engine, found without
# importing it), pt2onnx's or Python's own, never the user's code.
_SYMPY = importlib.util.find_spec("sympy")
_SYMPY_DIRS = [Path(_SYMPY.origin).parent] if _SYMPY is not None and _SYMPY.origin is not None else []
_LIBRARY_DIRS = tuple(
    str(Path(p).resolve())
    for p in (Path(torch.__file__).parent, *_SYMPY_DIRS, Path(__file__).parent, Path(sysconfig.get_paths()["stdlib"]))
)
_USER_CODE_FRAME = re.compile(
    r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+)\n\s*(?P<code>.*)$', re.M
)


def _is_library(filename: str) -> bool:
    if filename.startswith("<"):
        return True
    resolved = str(Path(filename).resolve())
    return any(resolved == d or resolved.startswith(d + os.sep) for d in _LIBRARY_DIRS)


def user_frame(error: BaseException) -> tuple[str, bool] | None:
    """The innermost frame of the user's code an error passed through, as ``file:line in fn: code``.

    The traceback of ``error`` and of its causes is searched (non-strict capture runs the
    user's code), then the "from user code:" frames TorchDynamo writes into its messages
    (strict capture). The flag says whether the error was raised in that very frame.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        frames = traceback.extract_tb(current.__traceback__)
        users = [f for f in frames if not _is_library(f.filename)]
        if users:
            f = users[-1]
            where = f"{f.filename}:{f.lineno} in {f.name}" + (f": {f.line.strip()}" if f.line else "")
            return where, f is frames[-1]
        text = str(current)
        if "from user code:" in text:
            found = _USER_CODE_FRAME.finditer(text.split("from user code:", 1)[1])
            users_in_text = [m for m in found if not _is_library(m["file"])]
            if users_in_text:
                m = users_in_text[-1]
                code = m["code"].strip()
                where = f"{m['file']}:{m['line']} in {m['func'].strip()}" + (f": {code}" if code else "")
                # TorchDynamo reports an exception the user's code raised as an "observed exception".
                return where, "Observed exception" in text
        current = current.__cause__ or current.__context__
    return None


def _accelerator(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.device | None:
    """The first device other than the CPU (and meta) that the model's weights or inputs are on."""
    inputs = (leaf for leaf in pytree.tree_leaves((args, kwargs)) if isinstance(leaf, torch.Tensor))
    tensors = (*module.parameters(), *module.buffers(), *inputs)
    return next((t.device for t in tensors if t.device.type not in ("cpu", "meta")), None)


def _hint(
    error: BaseException,
    strict: bool,
    modes_tried: set[bool],
    where: tuple[str, bool] | None,
    device: torch.device | None = None,
) -> str:
    text = f"{type(error).__name__}: {error}"
    at = f" (at {where[0]})" if where else ""
    if "data-dependent" in text or "GuardOnDataDependentSymNode" in text:
        return (
            f"the model branches on tensor values{at}; express the branch with torch.cond, or tell "
            "torch what holds with torch._check(...) (see the torch.export tutorial)"
        )
    if _is_legacy_scan_call(error):
        return (
            "torch.ops.higher_order.scan no longer takes dim/reverse/additional_inputs; call "
            "torch._higher_order_ops.scan.scan(fn, init, xs, dim=..., reverse=...) or pass fallback=True"
        )
    if "Constraints violated" in text or "dynamic_shapes" in text or "Dim(" in text:
        fix = "fix dynamic_shapes as torch's message above suggests (it names the dims and their relations)"
        if device is None:
            return fix
        # Seen on an H200: cuDNN's pooling guards a batch <= 65535, memory-efficient attention
        # a sequence in multiples of 8; the ONNX graph is the same from the CPU.
        return (
            f"the model is on {device}, whose kernels guard sizes the CPU's do not: export it with its "
            f"inputs on the CPU (model.cpu()), the ONNX model is the same; or {fix}"
        )
    if where is not None and where[1]:
        return (
            f"your model's code raised this at {where[0]}; check that the model runs eagerly on these "
            "inputs (model(*args, **kwargs)) and fix that line"
        )
    if len(modes_tried) == 2:
        return (
            f"both strict=True and strict=False failed; simplify the Python code the first error points at{at}, "
            "or capture the model with torch.export yourself and pass the ExportedProgram"
        )
    if strict:
        return f"strict mode (TorchDynamo) could not trace the model{at}; try strict=False"
    return f"non-strict tracing failed{at}; try strict=True, or simplify the failing Python code"


def _capture_error(
    message: str,
    first: Exception,
    strict: bool,
    errors: list[tuple[bool, Exception]],
    device: torch.device | None = None,
) -> CaptureError:
    # Non-strict errors first: their tracebacks hold the user's frames themselves.
    where = next((w for _, e in sorted(errors, key=lambda me: me[0]) if (w := user_frame(e)) is not None), None)
    tried = {mode for mode, _ in errors}
    if where is not None:
        message += f"\nin your code: {where[0]}"
    return CaptureError(message, hint=_hint(first, strict, tried, where, device))


#: How many rounds of torch's suggested fixes a capture takes (a fix can reveal the next constraint).
_REFINE_ROUNDS = 3


def _suggested_fixes(error: BaseException) -> list[str]:
    """The fixes of named dims under "Suggested fixes:" of torch's constraint-violation message.

    Fixes of an unnamed (``Dim.AUTO``) dim, which torch writes by its source
    (``L['attention_mask'].size()[1] = sequence_length``), are left out: such a dim follows
    the others by itself, and torch's refinement cannot name it.
    """
    text = str(error)
    if "Constraints violated" not in text or "Suggested fixes:" not in text:
        return []
    fixes = []
    for line in text.split("Suggested fixes:", 1)[1].splitlines()[1:]:
        if not line.strip():
            break
        if re.match(r"^[A-Za-z_]\w* = ", line.strip()):
            fixes.append(line.strip())
    return fixes


_BOUNDED = re.compile(r"^(\w+) = Dim\('(\w+)'(?:, min=(\d+))?(?:, max=(\d+))?\)$")
_FIXED = re.compile(r"^(\w+) = (\d+)$")


def _refined(dynamic_shapes: Any, fixes: list[str]) -> Any:
    """``dynamic_shapes`` with torch's fixes of named dims applied: a range (``x = Dim('x', max=128)``)
    or a constant (``x = 4``: the dim is static). None when a fix is another kind (a relation
    between dims), which is left to the user.

    torch's own ``refine_dynamic_shapes_from_suggested_fixes`` cannot take the ``Dim.AUTO``
    hints the rest of an ``"auto"`` spec holds.
    """
    replaced: dict[str, Any] = {}
    for fix in fixes:
        if bounded := _BOUNDED.match(fix):
            name, low, high = bounded[2], bounded[3], bounded[4]
            bounds = {k: int(v) for k, v in (("min", low), ("max", high)) if v is not None}
            replaced[bounded[1]] = Dim(name, **bounds)
        elif fixed := _FIXED.match(fix):
            replaced[fixed[1]] = Dim.AUTO
        else:
            return None
    return _replaced(dynamic_shapes, replaced)


_UNPROVEN = re.compile(
    r"Not all values of (\w+) = \S+ in the specified range .* satisfy the generated guard (.*?)\.?$", re.MULTILINE
)


def _unproven(error: BaseException) -> dict[str, str]:
    """Named dims whose range torch's guards cannot be proven over, with the guard (by name).

    torch reports a guard it cannot prove for every size of a named range as a constraint
    violation even where it holds for each size but one (XLNet: ``(2*S - 1) % S != 0``,
    false at 1 only), and suggests no fix for it.
    """
    text = str(error)
    if "Constraints violated" not in text:
        return {}
    return {name: guard for name, guard in _UNPROVEN.findall(text)}


def _replaced(dynamic_shapes: Any, replaced: dict[str, Any]) -> Any:
    """``dynamic_shapes`` with each ``Dim`` named in ``replaced`` swapped for its value there."""

    def swap(leaf: Any) -> Any:
        name = getattr(leaf, "__name__", None)
        return replaced[name] if isinstance(name, str) and name in replaced else leaf

    return pytree.tree_map(swap, dynamic_shapes)


def _export_refining(
    module: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    dynamic_shapes: Any,
    strict: bool,
    refine: bool,
) -> tuple[ExportedProgram, tuple[str, ...]]:
    """:func:`_export`, retried with torch's suggested fixes to ``dynamic_shapes`` when ``refine``."""
    applied: list[str] = []
    for _ in range(_REFINE_ROUNDS):
        try:
            return _export(module, args, kwargs, dynamic_shapes, strict), tuple(applied)
        except Exception as e:
            if not refine or not isinstance(dynamic_shapes, (dict, tuple, list)):
                raise
            fixes = _suggested_fixes(e)
            refined = _refined(dynamic_shapes, fixes) if fixes else None
            if refined is not None:
                applied.extend(
                    f"{fix} suggested; the dim left to torch (Dim.AUTO)" if _FIXED.match(fix) else fix for fix in fixes
                )
            elif unproven := _unproven(e):
                # Dim.AUTO keeps the dim dynamic under the guard, which the report lists.
                refined = _replaced(dynamic_shapes, dict.fromkeys(unproven, Dim.AUTO))
                applied.extend(
                    f"{name}: torch cannot prove {guard} for every size; the dim left to torch (Dim.AUTO)"
                    for name, guard in unproven.items()
                )
            else:
                raise
            dynamic_shapes = refined
    return _export(module, args, kwargs, dynamic_shapes, strict), tuple(applied)


def _export(
    module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], dynamic_shapes: Any, strict: bool
) -> ExportedProgram:
    # Keep every nested_compile_region call as invoke_subgraph (-> ONNX local function); torch 2.11 lacks the flag.
    flag = "inline_single_use_invoke_subgraph"
    keep: dict[str, Any] = {flag: False} if hasattr(torch._dynamo.config, flag) else {}
    with torch._dynamo.config.patch(keep):
        return torch.export.export(module, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict)


def _is_legacy_scan_call(error: BaseException) -> bool:
    text = str(error)
    return "scan" in text.lower() and "unexpected keyword argument" in text


def _legacy_scan_call(op: Any, combine_fn: Callable[..., Any], init: Any, xs: Any, *rest: Any, **legacy: Any) -> Any:
    """``scan_op(...)``, also accepting the pre-2.6 keywords ``dim``, ``reverse``, ``additional_inputs``."""
    if not legacy.keys() & {"dim", "reverse"}:
        return _ORIGINAL_SCAN_CALL(op, combine_fn, init, xs, *rest, **legacy)
    from torch._higher_order_ops.scan import scan

    additional_inputs = list(legacy.get("additional_inputs", rest[0] if rest else ()))
    count = len(init)

    def step(carry: list[Any], x: list[Any]) -> tuple[list[Any], list[Any]]:
        out = list(combine_fn(*carry, *x, *additional_inputs))
        # The old op allowed one tensor as carry and as output; scan() forbids the aliasing.
        ys = [y.clone() if any(y is o for o in out[:i]) else y for i, y in enumerate(out) if i >= count]
        return out[:count], ys

    carry, ys = scan(step, list(init), list(xs), dim=legacy.get("dim", 0), reverse=legacy.get("reverse", False))
    return [*carry, *ys]


_ORIGINAL_SCAN_CALL = type(torch.ops.higher_order.scan).__call__


@contextlib.contextmanager
def _legacy_scan_signature() -> Iterator[None]:
    # Only the op's Python entry point is patched: TorchDynamo (strict=True) intercepts the
    # call before it and still rejects the old keywords, so this fallback captures non-strict.
    # The patch is a class attribute, so it is applied under tracing_lock only: no other
    # thread traces meanwhile, and an eager call elsewhere passes through unchanged.
    scan_type = type(torch.ops.higher_order.scan)
    scan_type.__call__ = _legacy_scan_call
    try:
        yield
    finally:
        scan_type.__call__ = _ORIGINAL_SCAN_CALL


@contextlib.contextmanager
def _without_distribution_checks() -> Iterator[None]:
    # A process-wide default, so set under tracing_lock only, like the scan patch.
    checked = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(False)
    try:
        yield
    finally:
        torch.distributions.Distribution.set_default_validate_args(checked)


def _has_vmap_markers(gm: torch.fx.GraphModule) -> bool:
    for node in gm.graph.nodes:
        if node.op == "call_function" and getattr(node.target, "__module__", "") == "torch._functorch.predispatch":
            return True
        if node.op == "get_attr":
            sub = getattr(gm, str(node.target), None)
            if isinstance(sub, torch.fx.GraphModule) and _has_vmap_markers(sub):
                return True
    return False


def _captured(
    program: ExportedProgram, strict: bool, strategy: str, reason: str | None = None, refined: tuple[str, ...] = ()
) -> Captured:
    if _has_vmap_markers(program.graph_module):
        program = program.run_decompositions({})
        strategy += "; vmap applied by re-tracing"
    return Captured(program, strict, strategy, reason, refined)


def _first_lines(error: BaseException, count: int = 12) -> str:
    lines = f"{type(error).__name__}: {error}".strip().splitlines()
    return "\n".join(lines[:count]) + ("\n    ..." if len(lines) > count else "")


def capture(
    model: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None,
    *,
    dynamic_shapes: Any,
    strict: bool,
    fallback: bool,
    around: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    refine: bool = False,
    narrow: bool = False,
) -> Captured:
    """Capture ``model`` with torch.export (or take a given ExportedProgram as is).

    ``around()`` is entered around every ``torch.export`` attempt, under :data:`tracing_lock`
    (the plugins' capture patches). ``refine``: apply torch's suggested fixes to
    ``dynamic_shapes`` when the model constrains a dim; ``narrow``: where the capture fails,
    retry with fewer dynamic dims (see the module's docstring).
    """
    if isinstance(model, ExportedProgram):
        return Captured(model, None, "given ExportedProgram")
    module = as_module(model)
    train_only = (torch.nn.Dropout, torch.nn.modules.batchnorm._BatchNorm)
    if module.training and any(isinstance(m, train_only) for m in module.modules()):
        warnings.warn(
            f"{type(module).__name__} is in training mode: dropout and batch-norm statistics are "
            "exported as in training. Call model.eval() before exporting for inference.",
            UserWarning,
            stacklevel=3,
        )
    kwargs = dict(kwargs or {})
    limit = auto_capture_seconds() if narrow else None
    with tracing_lock, around(), keywords_as_parameters(module, kwargs), _without_distribution_checks():
        try:
            with _time_limit(limit):
                return _capture_module(module, args, kwargs, dynamic_shapes, strict, fallback, refine)
        except CaptureError as error:
            if not narrow:
                raise
            cause = error.__cause__ or error
            first = next((line.strip() for line in str(cause).splitlines() if line.strip()), "")
            failed = f"failed ({type(cause).__name__}: {first[:200]})"
            failure: CaptureError | None = error
        except _OutOfTime:
            failed = f"ran past {limit:g} s (torch's symbolic shapes; {AUTO_CAPTURE_SECONDS}=0 waits for it)"
            failure = None
        last: CaptureError | None = None
        for spec, kept in ((_batch_dims_only(dynamic_shapes), "the batch dims (axis 0)"), (None, "no dim")):
            try:
                # The static capture, last, is not bounded: it is the export as the user would write it.
                with _time_limit(limit if spec is not None else None):
                    captured = _capture_module(module, args, kwargs, spec, strict, fallback, refine)
            except CaptureError as error:
                last = error
                continue
            except _OutOfTime:
                continue
            why = f"with every dim dynamic the capture {failed}; {kept} kept dynamic"
            device = _accelerator(module, args, kwargs)
            on_cpu = f" (the model is on {device}: exported from the CPU it may keep more)" if device else ""
            warnings.warn(
                f'dynamic_shapes="auto": {why}{on_cpu}; report.static_dims lists the static dims',
                CaptureFallbackWarning,
                stacklevel=3,
            )
            return replace(captured, narrowed=why)
        # Out of time with every dim dynamic: the static capture's own error (it is never bounded).
        stopped = failure or last
        assert stopped is not None  # the static capture returns or raises a CaptureError
        raise stopped


#: The environment variable that bounds an ``"auto"`` capture with dims narrowed after it (0: no bound).
AUTO_CAPTURE_SECONDS = "PT2ONNX_AUTO_CAPTURE_SECONDS"
_DEFAULT_AUTO_CAPTURE_SECONDS = 300.0


def auto_capture_seconds() -> float | None:
    """How long a ``dynamic_shapes="auto"`` capture may run before it is retried with fewer dims
    dynamic: ``$PT2ONNX_AUTO_CAPTURE_SECONDS``, 300 by default; None (no bound) for 0."""
    text = os.environ.get(AUTO_CAPTURE_SECONDS, "").strip()
    try:
        seconds = float(text) if text else _DEFAULT_AUTO_CAPTURE_SECONDS
    except ValueError:
        raise CaptureError(
            f"{AUTO_CAPTURE_SECONDS}={text!r} is not a number of seconds",
            hint=f"set it to the seconds a capture may take, or 0 for no bound (default {_DEFAULT_AUTO_CAPTURE_SECONDS:g})",
        ) from None
    return seconds if seconds > 0 else None


class _OutOfTime(BaseException):
    """The capture ran past its time: a BaseException, as KeyboardInterrupt, so that no capture
    retry or torch code catching ``Exception`` takes it for the model's failure."""


@contextlib.contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`_OutOfTime` in this thread ``seconds`` from now, and every half second after
    until the block ends (a retry inside the block is stopped too).

    By SIGALRM, so only in the main thread of a process that does not handle SIGALRM itself, where
    the OS has it; elsewhere the block runs unbounded.
    """
    usable = (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None)
    )
    if seconds is None or not usable:
        yield
        return
    active = [True]

    def expire(signum: int, frame: Any) -> None:
        if active[0]:
            raise _OutOfTime

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.5)
    try:
        yield
    finally:
        active[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _batch_dims_only(dynamic_shapes: Any) -> Any:
    """``dynamic_shapes`` with each tensor's spec (a dict of axes) cut to its axis 0."""
    if isinstance(dynamic_shapes, dict) and dynamic_shapes and all(isinstance(k, int) for k in dynamic_shapes):
        return {0: dynamic_shapes[0]} if 0 in dynamic_shapes else None
    if isinstance(dynamic_shapes, dict):
        return {key: _batch_dims_only(value) for key, value in dynamic_shapes.items()}
    if isinstance(dynamic_shapes, (list, tuple)):
        return type(dynamic_shapes)(_batch_dims_only(value) for value in dynamic_shapes)
    return dynamic_shapes


def _capture_module(
    module: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    dynamic_shapes: Any,
    strict: bool,
    fallback: bool,
    refine: bool,
) -> Captured:
    try:
        program, refined = _export_refining(module, args, kwargs, dynamic_shapes, strict, refine)
        return _captured(program, strict, f"strict={strict}", refined=refined)
    except Exception as e:  # noqa: BLE001 (any capture failure may succeed in the other mode)
        first: Exception = e
    if not fallback:
        raise _capture_error(
            f"torch.export.export(strict={strict}) failed:\n{_first_lines(first)}",
            first,
            strict,
            [(strict, first)],
            _accelerator(module, args, kwargs),
        ) from first
    reason = _first_lines(first, 3)
    errors: list[tuple[str, bool, Exception]] = [(f"strict={strict}", strict, first)]
    for mode in (strict, not strict):
        for legacy in (False, True) if _is_legacy_scan_call(first) else (False,):
            if (mode == strict and not legacy) or (mode and legacy):
                continue
            label = f"strict={mode}" + (" with the legacy scan signature routed through scan()" if legacy else "")
            try:
                with _legacy_scan_signature() if legacy else contextlib.nullcontext():
                    program, refined = _export_refining(module, args, kwargs, dynamic_shapes, mode, refine)
            except Exception as e:  # noqa: BLE001
                errors.append((label, mode, e))
                continue
            warnings.warn(
                f"torch.export.export(strict={strict}) failed ({reason.splitlines()[0][:200]}); "
                f"the graph was captured with {label} instead. Pass fallback=False to turn this off.",
                CaptureFallbackWarning,
                stacklevel=4,
            )
            return _captured(program, mode, f"{label} (fallback: strict={strict} failed)", reason, refined)
    details = "\n".join(f"{label}:\n{_first_lines(e)}" for label, _, e in errors)
    raise _capture_error(
        f"torch.export.export failed in every mode.\n{details}",
        first,
        strict,
        [(m, e) for _, m, e in errors],
        _accelerator(module, args, kwargs),
    ) from first
