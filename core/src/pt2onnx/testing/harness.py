"""``assert_exports_like_eager``: export, run in onnxruntime, compare with eager PyTorch.

By default the model is exported with every dim dynamic (``dynamic_shapes="auto"``) and
checked on the example and on a second input whose symbolic dims all have other sizes,
so a converter's symbolic-size branch is proven on every test, not only its static one.

Without ``opset=``, the captured program is then translated again at the oldest opset
at which the plugins that did work still handle everything they did (:func:`oldest_opset`:
for each op or rewrite, the oldest ``since=`` of its plugin's forms, the highest of those,
else 14) and checked on the same inputs, so each converter is proven at its minimum
opset as well as at the default one, and an op with one form per opset range in its
oldest form too. The environment variable
``PT2ONNX_OLDEST_OPSET_EVERY`` says on which calls: ``1`` (the default) every call;
``N`` the first call of each test and about one in N of the others, picked by a digest
of the inputs (so a seed reproduces which, and hypothesis replaying a failing example
meets the same check); ``0`` none. This repository's ``conftest.py`` sets 4 (on the
unary and reduction tests every call costs +43% wall and +94% CPU time, 4 +12% CPU
time) except under ``HYPOTHESIS_PROFILE=thorough``, which checks every call.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import onnx
import torch
import torch.utils._pytree as pytree

from ..errors import Pt2OnnxError, UnsupportedArgumentError
from ..export import export
from ..interface.calling import captured_inputs, copy_inputs, flatten_inputs, normalize_args
from ..opnames import normalize_op_name
from ..opset import MIN_OPSET
from ..registration import Registration
from ..registry import session_registry
from ..result import ExportResult, _put_back
from ..runtime import Verification, tolerance
from .record import record, selected
from .witness import laid_out_like, witness_inputs

__all__ = [
    "OLDEST_OPSET_EVERY_ENV",
    "OtherSizes",
    "assert_exports_like_eager",
    "find_other_sizes",
    "oldest_opset",
    "other_sizes",
    "record_proof",
]

#: The environment variable that says which calls of the harness also check the oldest
#: opset: every call (``1``, the default), the first of each test and one in N by the inputs (``N``), none (``0``).
OLDEST_OPSET_EVERY_ENV = "PT2ONNX_OLDEST_OPSET_EVERY"

Inputs = tuple[tuple[Any, ...], dict[str, Any]]


def assert_exports_like_eager(
    model: Any,
    args: Any,
    kwargs: dict[str, Any] | None = None,
    *,
    other_inputs: Sequence[Inputs] = (),
    dynamic: bool = True,
    atol: float | None = None,
    rtol: float | None = None,
    check_model: bool = True,
    expect_ops: Iterable[str] | Mapping[str, str] = (),
    opset: int | None = None,
    **export_options: Any,
) -> ExportResult:
    """Export ``model`` through the full pipeline, run it in onnxruntime and compare with eager.

    Each output is compared by its own dtype (integers and bools exactly, floats within
    their dtype's tolerance, or ``atol``/``rtol``); shapes, dtypes and the positions of
    NaN and inf must agree exactly.

    Args:
        other_inputs: further ``(args, kwargs)`` checked on the same exported model.
            Without ``dynamic_shapes``, the dims that differ from ``args`` are dynamic.
        dynamic: when neither ``dynamic_shapes`` nor ``other_inputs`` is given, export with
            ``dynamic_shapes="auto"`` and also check an input whose symbolic dims all
            have other sizes (:func:`other_sizes`). ``dynamic=False`` exports the
            example's sizes only; a test that needs it says why.
        expect_ops: op names (``aten::add`` matches every overload) the export must have
            converted, so a test cannot pass without exercising its converter; a mapping
            ``{op: plugin}`` also names the plugin that must have converted each.
        opset: the one target opset to check. Left out, the default one
            (:func:`pt2onnx.export`'s) and then :func:`oldest_opset` on the calls that
            ``PT2ONNX_OLDEST_OPSET_EVERY`` selects: a converter is proven at its minimum
            and at the default opset. A failure there names that opset and says the
            default one passed.
        export_options: go to :func:`pt2onnx.export`.

    When the test passes, the pytest plugin of :mod:`pt2onnx.testing` counts every
    registration that did work in this export (converter, lowering, custom-op handler,
    applied decomposition, rewrite that changed the graph) as proven, if the export also
    matches eager on a witness input the harness draws itself
    (:mod:`pt2onnx.testing.witness`) and ``atol``/``rtol`` are within
    :data:`~pt2onnx.testing.TOLERANCE_FACTOR` times the outputs' dtypes' defaults or
    the ``tolerance=`` the registration declares. The witness never fails the test: it
    only decides what the test proves.

    A failure says what differs (the comparison table), on which inputs, and which plugins
    converted the ops; an export that fails raises its own error (which names the plugin,
    the op, the FX node and the test's line). pytest's traceback stops at the test's call:
    the harness's and the exporter's frames are hidden (``--full-trace`` shows the
    harness's).

    Returns the export result.
    """
    __tracebackhide__ = True
    args, kwargs = normalize_args(args), dict(kwargs or {})
    checks: list[Inputs] = [(args, kwargs), *((normalize_args(a), dict(k or {})) for a, k in other_inputs)]
    if "dynamic_shapes" not in export_options:
        if other_inputs:
            export_options["other_inputs"] = checks[1:]
        elif dynamic:
            export_options["dynamic_shapes"] = "auto"
    if isinstance(model, torch.nn.Module):
        model = model.eval()
    result = _export(model, args, kwargs, opset=opset, **export_options)
    _check_expected_ops(result, expect_ops)
    if check_model:
        onnx.checker.check_model(result.model_proto, full_check=True)
    unchecked = ""
    made = None
    if export_options.get("dynamic_shapes") == "auto":
        found = find_other_sizes(result, args, kwargs)
        if found.inputs is not None:
            made = found.inputs
            checks.append(made)
        elif found.eager_refused:
            raise AssertionError(
                "the dynamic check could not run: no other size of the symbolic dims "
                f"{found.symbols} is accepted by both the captured program and eager PyTorch:\n  "
                + "\n  ".join(found.attempts)
                + "\npass other_inputs=[(args, kwargs)] of valid other sizes, or dynamic=False and say why"
            )
        elif found.attempts:
            # One message per test, however many examples meet it; a failure below gives the sizes.
            warnings.warn(
                "pt2onnx.testing: the dynamic check did not run: the captured program's guards refuse every "
                "other size the harness tried (find_other_sizes(result, args, kwargs).attempts lists them); "
                "pass other_inputs=[(args, kwargs)] to check sizes they accept",
                stacklevel=2,
            )
            unchecked = f"the dynamic check did not run: {found.attempts[0]}"
    differs = "ONNX model differs from eager PyTorch" + (f" ({unchecked})" if unchecked else "")
    witness = witness_inputs(*checks[0], seed=_digest(model, checks[:1]))
    looseness = _looseness(_verify(result, checks, atol, rtol, differs, made=made))
    record(result.report.contributions, looseness=looseness, refuted=_refuted(result, checks[0], witness, atol, rtol))
    if opset is None and _oldest_opset_due(model, checks):
        _check_oldest_opset(model, result, checks, witness, atol, rtol, check_model, export_options, made)
    return result


def _export(model: Any, args: Any, kwargs: dict[str, Any], **options: Any) -> ExportResult:
    """:func:`pt2onnx.export`, whose own errors are raised from here: their messages name the
    plugin, the op, the FX node and the user's line, so the exporter's frames would only
    bury them (a converter's exception stays chained, from the converter's frame on)."""
    __tracebackhide__ = True
    try:
        return export(model, args, kwargs, **options)
    except Pt2OnnxError as e:
        raise _bare(e) from e.__cause__


def _bare(error: BaseException) -> BaseException:
    """``error`` without the frames it was raised through, if it is pt2onnx's own."""
    return error.with_traceback(None) if isinstance(error, Pt2OnnxError) else error


def oldest_opset(result: ExportResult, registrations: Iterable[Registration]) -> tuple[int, list[str]]:
    """The oldest opset at which the plugins that did work in ``result``'s export still handle
    everything they handled in it, and what sets it.

    For each contribution, the oldest opset its plugin serves that op (or rewrite) at, in any
    of its forms (``since=``, None counting as :data:`~pt2onnx.opset.MIN_OPSET`); the highest
    of those, and the contributions that need it (none when it is ``MIN_OPSET``).
    """
    forms: dict[tuple[str, str, str], int] = {}
    for r in registrations:
        key = (r.kind, r.op, r.plugin)
        forms[key] = min(forms.get(key, r.since or MIN_OPSET), r.since or MIN_OPSET)
    needs = {
        f"{c.kind} {c.name} of {c.plugin}": forms.get((c.kind, c.name, c.plugin), MIN_OPSET)
        for c in result.report.contributions
    }
    oldest = max([MIN_OPSET, *needs.values()])
    return oldest, sorted(name for name, since in needs.items() if since == oldest > MIN_OPSET)


def _oldest_opset_due(model: Any, checks: Sequence[Inputs]) -> bool:
    """Whether this call also checks the oldest opset (see ``PT2ONNX_OLDEST_OPSET_EVERY``)."""
    value = os.environ.get(OLDEST_OPSET_EVERY_ENV, "1")
    if not value.isdigit():
        raise ValueError(f"{OLDEST_OPSET_EVERY_ENV}={value!r}: expected 0 (never), 1 (every call) or N (one in N)")
    return selected(_digest(model, checks), int(value))


def _digest(model: Any, checks: Sequence[Inputs]) -> int:
    """A digest of the model's type and the inputs' values, the same on every run."""
    h = hashlib.blake2b(type(model).__qualname__.encode(), digest_size=8)
    for leaf in pytree.tree_leaves(list(checks)):
        if isinstance(leaf, torch.Tensor):
            h.update(f"{leaf.dtype}{tuple(leaf.shape)}".encode())
            t = leaf.detach().cpu()
            t = torch.view_as_real(t) if t.is_complex() else t
            # A fresh buffer: contiguous() keeps the strides of size-1 dims, which view() refuses.
            dense = torch.empty(t.shape, dtype=t.dtype).copy_(t).reshape(-1)
            h.update(dense.view(torch.uint8).numpy().tobytes())
        else:
            h.update(repr(leaf).encode())
    return int.from_bytes(h.digest(), "little")


def _check_oldest_opset(
    model: Any,
    result: ExportResult,
    checks: Sequence[Inputs],
    witness: Inputs | None,
    atol: float | None,
    rtol: float | None,
    check_model: bool,
    export_options: dict[str, Any],
    made: Inputs | None = None,
) -> None:
    """Translate the captured program again at :func:`oldest_opset` and verify it on the same inputs."""
    __tracebackhide__ = True
    registry = session_registry(export_options.get("plugins"), export_options.get("disable", ()))
    oldest, pinned = oldest_opset(result, registry.registrations)
    default = result.report.opset
    if oldest >= default:
        return
    why = f"registered since={oldest}: {', '.join(pinned)}" if pinned else "the oldest pt2onnx exports"
    failed = f"at opset {oldest} ({why}), after the default opset {default} passed"
    # dtype= converts the eager module before capture: only the module can be exported so again.
    source = model if "dtype" in export_options else result.program
    options = export_options if source is model else _for_a_program(export_options)
    try:
        while True:
            try:
                older = _export(source, checks[0][0], checks[0][1], opset=oldest, **options)
                break
            except UnsupportedArgumentError as e:
                # An argument its converter declares newer than the converter (op.unsupported(since=)):
                # proven at that opset instead.
                if e.since is None or not oldest < e.since < default:
                    raise
                oldest, why = e.since, f"argument {e.argument}={e.value!r} needs since={e.since}"
                failed = f"at opset {oldest} ({why}), after the default opset {default} passed"
        if check_model:
            onnx.checker.check_model(older.model_proto, full_check=True)
    except Exception as e:
        raise AssertionError(f"export failed {failed}: {type(e).__name__}: {e}") from e
    try:
        # Compared with the model itself, not with the program it was captured as.
        checked = _verify(
            older, checks, atol, rtol, f"ONNX model differs from eager PyTorch {failed}", result._eager, made
        )
    except AssertionError:
        raise
    except Exception as e:  # e.g. onnxruntime has no kernel for a node at this opset
        raise AssertionError(f"running the model failed {failed}: {type(e).__name__}: {e}") from e
    refuted = _refuted(older, checks[0], witness, atol, rtol, result._eager)
    record(older.report.contributions, looseness=_looseness(checked), refuted=refuted)


#: Options of :func:`pt2onnx.export` about capturing or writing files, which an
#: ``ExportedProgram`` exported again takes no part in.
_CAPTURE_AND_FILE_OPTIONS = frozenset(
    {"dynamic_shapes", "other_inputs", "strict", "fallback", "f", "report", "max_shard_bytes"}
)


def _for_a_program(export_options: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in export_options.items() if k not in _CAPTURE_AND_FILE_OPTIONS}


def _verify(
    result: ExportResult,
    checks: Sequence[Inputs],
    atol: float | None,
    rtol: float | None,
    what: str,
    eager: torch.nn.Module | None = None,
    made: Inputs | None = None,
) -> list[Verification]:
    """Verify ``result`` on each of ``checks`` (``made``: the one the harness made itself)."""
    __tracebackhide__ = True
    verified = []
    for index, (call_args, call_kwargs) in enumerate(checks):
        which = "the test's example" if index == 0 else f"other_inputs[{index - 1}]"
        if made is not None and (call_args, call_kwargs) is made:
            which = "the example at other sizes of its symbolic dims, made by the harness"
        inputs = f"inputs: {_describe(call_args)}{_values(call_args)} ({which})"
        try:
            check = result.verify(*call_args, _atol=atol, _rtol=rtol, _eager=eager, **call_kwargs)
        except Pt2OnnxError as e:
            raise _bare(e) from e.__cause__
        except Exception as e:
            if not type(e).__module__.startswith("onnxruntime"):
                raise
            # onnxruntime refusing the model (no kernel for a node's type): its message says why.
            raise AssertionError(
                f"onnxruntime cannot run the exported model: {_first_line(e)}\n{inputs}\n{_converted_by(result)}"
            ) from None
        if not check.ok:
            raise AssertionError(f"{what}:\n{check}\n{inputs}\n{_converted_by(result)}")
        verified.append(check)
    return verified


def _converted_by(result: ExportResult) -> str:
    """Who made the model: each op with the plugin that converted it, and the rewrites that changed it."""
    report = result.report
    lines = [f"converted at opset {report.opset} (capture {report.capture}) by:"]
    for u in sorted(report.ops, key=lambda u: u.op):
        how = " (decomposed)" if u.how == "decomposed" else ""
        shadows = f" (shadows {', '.join(u.shadowed)})" if u.shadowed else ""
        lines.append(f"  {u.op:<40} x{u.count:<4} {u.plugin} [{u.layer}]{how}{shadows}")
    rewrites = [c for c in report.contributions if c.kind == "rewrite"]
    if rewrites:
        lines.append("rewritten by: " + ", ".join(f"{c.name} ({c.plugin})" for c in rewrites))
    return "\n".join(lines)


def _values(args: Any) -> str:
    """The values of small input tensors, which a failure's reader needs to reproduce it."""
    small = [
        f"{leaf.tolist()}" for leaf in pytree.tree_leaves(args) if isinstance(leaf, torch.Tensor) and leaf.numel() <= 8
    ]
    return f" = {', '.join(small)}" if small else ""


def _refuted(
    result: ExportResult,
    example: Inputs,
    witness: Inputs | None,
    atol: float | None,
    rtol: float | None,
    eager: torch.nn.Module | None = None,
) -> str | None:
    """Why the export proves nothing although it matched on the test's inputs, or None.

    It does when it matches on the witness too, and when the example has no tensor to
    draw other values for (a factory's output depends only on its constants).
    """
    if witness is None:
        tensors = [leaf for leaf in pytree.tree_leaves(example) if isinstance(leaf, torch.Tensor)]
        if not tensors:
            return None
        return "the harness could not draw a witness: every input tensor is empty or an integer one of one value"
    try:
        check = result.verify(*witness[0], _atol=atol, _rtol=rtol, _eager=eager, **witness[1])
    except Exception as e:  # noqa: BLE001 - eager or onnxruntime refusing the witness is the reason to report
        return f"the witness input could not be checked ({type(e).__name__}: {_first_line(e)})"
    if check.ok:
        return None
    bad = next(o for o in check.outputs if not o.ok)
    return (
        f"matched eager on the test's inputs but not on the witness (same shapes and dtypes, other values): "
        f"output {bad.name!r} max abs difference {bad.max_abs:.3g}"
    )


def _looseness(checks: Sequence[Verification]) -> float:
    """How far the tolerance applied is above the outputs' dtypes' defaults (1: at or below them).

    An ``atol`` counts against the default scaled by the largest finite eager value, so a
    tolerance that grows with the values compared is not loose (see ``TOLERANCE_FACTOR``).
    """
    worst = 1.0
    for check in checks:
        for o in check.outputs:
            dtype = getattr(torch, o.dtype, None)
            if not isinstance(dtype, torch.dtype) or not (dtype.is_floating_point or dtype.is_complex):
                continue
            default_atol, default_rtol = tolerance(dtype.to_real())
            worst = max(worst, o.atol / (default_atol * max(1.0, o.scale)), o.rtol / default_rtol)
    return worst


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0][:200] if lines else ""


def record_proof(result: ExportResult) -> None:
    """Count ``result``'s contributions as proven if the calling test passes.

    For tests that check the exported model's outputs themselves because they cannot
    equal eager's (random ops, checked by their statistics); every other test proves
    through :func:`assert_exports_like_eager`.
    """
    record(result.report.contributions)


def _check_expected_ops(result: ExportResult, expect_ops: Iterable[str] | Mapping[str, str]) -> None:
    __tracebackhide__ = True
    providers = expect_ops if isinstance(expect_ops, Mapping) else dict.fromkeys(expect_ops)
    converted = {(u.op, u.plugin) for u in result.report.ops}
    for expected_op, plugin in providers.items():
        name = normalize_op_name(expected_op)
        found = {p for op, p in converted if op == name or op.startswith(f"{name}.")}
        if not found:
            raise AssertionError(f"expected {name} in the exported graph; converted ops: {sorted(converted)}")
        if plugin is not None and plugin not in found:
            raise AssertionError(f"expected {name} to be converted by plugin {plugin!r}, but {sorted(found)} did")


@dataclass
class OtherSizes:
    """What :func:`find_other_sizes` found: the inputs at other sizes, or why there are none.

    ``attempts`` says, for each size tried and refused, who refused it and how;
    ``eager_refused`` whether eager PyTorch refused (or computed other shapes at) a size
    the captured program accepts. With no inputs found, all attempts refused by the
    program's own guards mean torch tied the dims to the example's sizes (or to each
    other, as ``s0 * s1 == 12``) in ways the harness does not solve; a size eager refuses
    means the program claims sizes eager does not take.
    """

    inputs: Inputs | None
    symbols: dict[str, int] = field(default_factory=dict)
    attempts: list[str] = field(default_factory=list)
    eager_refused: bool = False


def other_sizes(result: ExportResult, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Inputs | None:
    """The example inputs with the symbolic dims of the exported program at other sizes, or None.

    :func:`find_other_sizes`'s inputs, without its account of the sizes refused.
    """
    return find_other_sizes(result, args, kwargs).inputs


def find_other_sizes(result: ExportResult, args: tuple[Any, ...], kwargs: dict[str, Any]) -> OtherSizes:
    """The example inputs with the symbolic dims of the exported program at other sizes.

    Each input grows (or shrinks) along its symbolic dims by repeating its own slices, so
    index-like inputs stay valid; in floating inputs each repeated copy is moved by as many
    units in the last place as its number, so growing adds no ties (which sort, top-k and
    arg-max may break either way) where the example had none. A size counts only where the
    captured program's shape guards accept it and eager PyTorch computes outputs of the
    program's structure and shapes with it. All symbols are moved together if possible,
    else one at a time, by small steps and by doubling (a dim that must stay a multiple of
    its size). The result says which sizes were refused, by whom and how.
    """
    program = result.program
    leaves = flatten_inputs(program, args, kwargs)
    fakes = list(captured_inputs(program).values())
    symbols: dict[Any, int] = {}  # sympy symbols (torch's) -> example sizes
    for fake, leaf in zip(fakes, leaves):
        for expr, size in _symbolic_sizes(fake, leaf):
            if expr.is_symbol:
                symbols.setdefault(expr, size)
    found = OtherSizes(None, {str(s): v for s, v in symbols.items()})
    if not symbols:
        return found
    eager = result._eager if result._eager is not None else program.module()
    guarded = program.module()
    # Buffers and parameters the model updates in place are put back after each call, so
    # that trying sizes leaves the state verify() starts from as it was.
    state = list(result._mutations()[0].values())

    def attempt(changed: dict[Any, int]) -> Inputs | None:
        values = {**symbols, **changed}
        grown = [_resize(leaf, fake, values) for fake, leaf in zip(fakes, leaves)]
        grown += leaves[len(fakes) :]
        new_args, new_kwargs = pytree.tree_unflatten(grown, program.call_spec.in_spec)
        sizes = ", ".join(f"{s}={v}" for s, v in changed.items())
        with torch.no_grad():
            try:
                with _put_back(guarded, state):
                    traced = guarded(*copy_inputs(new_args), **copy_inputs(new_kwargs))
            except Exception as e:  # noqa: BLE001 - the program's guards refusing a size is an answer
                found.attempts.append(
                    f"{sizes}: the captured program refuses it ({type(e).__name__}: {_first_line(e)})"
                )
                return None
            try:
                with _put_back(eager, state):
                    expected = eager(*copy_inputs(new_args), **copy_inputs(new_kwargs))
            except Exception as e:  # noqa: BLE001 - eager refusing a size the guards accept is an answer too
                found.attempts.append(f"{sizes}: eager PyTorch refuses it ({type(e).__name__}: {_first_line(e)})")
                found.eager_refused = True
                return None
        if not _same_layout(traced, expected):
            found.attempts.append(f"{sizes}: eager returns other shapes than the captured program")
            found.eager_refused = True
            return None
        return tuple(new_args), dict(new_kwargs)

    def candidates(value: int) -> list[int]:
        # Small steps first; then steps and multiples that keep a dim's parity or divisibility,
        # which guards such as ``s0 % 2 == 0`` or ``s0 // 2 % 2 == 0`` ask for.
        return [value + step for step in (1, -1, 2, -2, 3, -3, 4, 5, 6, 8)] + [2 * value, 3 * value]

    for index in range(len(candidates(2))):
        moved = {s: candidates(v)[index] for s, v in symbols.items()}
        if all(v >= 2 and _in_range(program, s, v) for s, v in moved.items()):
            found.inputs = attempt(moved)
            if found.inputs is not None:
                return found
    for symbol, value in symbols.items():
        for size in candidates(value):
            if size >= 2 and _in_range(program, symbol, size):
                found.inputs = attempt({symbol: size})
                if found.inputs is not None:
                    return found
    return found


def _same_layout(a: Any, b: Any) -> bool:
    """Same output structure and shapes: torch's guards were sound for these sizes."""
    a_leaves, a_spec = pytree.tree_flatten(a)
    b_leaves, b_spec = pytree.tree_flatten(b)
    return a_spec == b_spec and all(
        not isinstance(x, torch.Tensor) or (isinstance(y, torch.Tensor) and x.shape == y.shape)
        for x, y in zip(a_leaves, b_leaves)
    )


def _symbolic_sizes(fake: Any, leaf: Any) -> list[tuple[Any, int]]:
    if isinstance(fake, torch.Tensor) and isinstance(leaf, torch.Tensor):
        sizes: list[Any] = list(fake.shape)
        return [(s.node.expr, leaf.shape[i]) for i, s in enumerate(sizes) if isinstance(s, torch.SymInt)]
    if isinstance(fake, torch.SymInt) and isinstance(leaf, int):
        return [(fake.node.expr, leaf)]
    return []


def _in_range(program: Any, symbol: Any, value: int) -> bool:
    bounds = program.range_constraints.get(symbol)
    return bounds is None or bool(bounds.lower <= value <= bounds.upper)


def _resize(leaf: Any, fake: Any, values: dict[Any, int]) -> Any:
    if isinstance(fake, torch.SymInt) and isinstance(leaf, int):
        return int(fake.node.expr.subs(values))
    if not isinstance(fake, torch.Tensor) or not isinstance(leaf, torch.Tensor):
        return leaf
    # In the example's memory layout: a program captured from a strided input guards its strides.
    return laid_out_like(leaf, _grown(leaf, fake, values))


def _grown(leaf: torch.Tensor, fake: torch.Tensor, values: dict[Any, int]) -> torch.Tensor:
    # Copies along later axes move by multiples of the copies so far (mixed radix), so no
    # two copies of one value, along one axis or several, move by as many units.
    radix = 1
    for axis, size in enumerate(fake.shape):
        if isinstance(size, torch.SymInt):
            new = int(size.node.expr.subs(values))
            old = leaf.shape[axis]
            if new != old and old > 0:
                # Tiled, not index_select: that has no kernel for uint16/32/64.
                copies = -(-new // old)
                tiles = [copies if d == axis else 1 for d in range(leaf.dim())]
                leaf = leaf.repeat(tiles)
                if leaf.is_floating_point() and copies > 1:
                    leaf = _untied(leaf, axis, old, copies, radix)
                    radix *= copies
                leaf = leaf.narrow(axis, 0, new)
    return leaf


def _untied(leaf: torch.Tensor, axis: int, length: int, copies: int, step: int) -> torch.Tensor:
    """``leaf`` made of ``copies`` repeats of ``length`` slices along ``axis``, the k-th repeat's
    finite values moved ``k * step`` units in the last place up, so no finite value of a copy
    ties with its original (NaN and infinities stay as they are)."""
    parts = list(leaf.split(length, dim=axis))
    for k in range(1, copies):
        finite = parts[k].isfinite()
        up = torch.full_like(parts[k], float("inf"))
        moved = parts[k]
        for _ in range(k * step):
            moved = torch.nextafter(moved, up)
        parts[k] = torch.where(finite & moved.isfinite(), moved, parts[k])
    return torch.cat(parts, dim=axis)


def _describe(args: Any) -> str:
    return ", ".join(
        f"{tuple(a.shape)}:{a.dtype}" if isinstance(a, torch.Tensor) else repr(a) for a in pytree.tree_leaves(args)
    )
