"""op_db's samples as exportable modules, and what one export of one sample came to.

Shared by the OpInfo test module (``test_opinfo.py``) and the measurement beside
torch.onnx (``benchmarks/studies/opinfo_compare.py``), so both run exactly the same samples.

A sample ``op(input, *args, **kwargs)`` becomes a module whose inputs are the sample's
tensors (in pytree order) and whose constants are everything else, so the tensors
are graph inputs with dynamic sizes where the op allows them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from unittest import mock

import torch
import torch.utils._pytree as pytree

__all__ = [
    "STILL_RIGHT",
    "HarnessError",
    "Outcome",
    "SampleModule",
    "check_still_right",
    "classify",
    "eager_outcome",
    "run_sample",
    "op_id",
    "opinfos",
    "refuses_a_dtype",
    "sample_inputs",
    "sample_module",
    "skip_reason",
]


@functools.cache
def opinfos() -> dict[str, Any]:
    """Every OpInfo of torch's op_db, by :func:`op_id`."""
    from torch.testing._internal.common_methods_invocations import op_db

    return {op_id(info): info for info in op_db}


def op_id(info: Any) -> str:
    """``name`` or ``name.variant`` (op_db's own test names)."""
    return f"{info.name}.{info.variant_test_name}" if info.variant_test_name else info.name


#: Marks a tensor slot among a sample's constants. Not None: None is a constant of many
#: samples (``scale_factor=None``, ``dim=None``), and taking it for a slot wired the tensors
#: wrongly or ran out of them, which read as eager rejecting the sample.
_TENSOR = object()


class SampleModule(torch.nn.Module):
    """Calls ``fn`` on the sample's structure, with its tensor leaves taken from ``forward``'s inputs."""

    def __init__(self, fn: Callable[..., Any], leaves: list[Any], spec: pytree.TreeSpec) -> None:
        super().__init__()
        self.fn = fn
        self.constants = [_TENSOR if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves]
        self.spec = spec

    def forward(self, *tensors: torch.Tensor) -> Any:
        given = iter(tensors)
        leaves = [next(given) if c is _TENSOR else c for c in self.constants]
        args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        return self.fn(*args, **kwargs)


def sample_module(info: Any, sample: Any) -> tuple[SampleModule, tuple[torch.Tensor, ...]]:
    """The module calling ``info``'s op on ``sample``, and its tensor inputs."""
    structure = ((sample.input, *sample.args), dict(sample.kwargs))
    leaves, spec = pytree.tree_flatten(structure)
    leaves = [leaf.detach() if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves]
    tensors = tuple(leaf for leaf in leaves if isinstance(leaf, torch.Tensor))
    fn = _keeping_contract(info.op, CONTRACTS[info.name]) if info.name in CONTRACTS else info.op
    return SampleModule(fn, leaves, spec).eval(), tensors


def _sorted_sequence(position: int) -> Callable[..., tuple[list[Any], dict[str, Any]]]:
    """Sort the sequence at ``position`` (or recompute its ``sorter``)."""

    def keep(args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        if kwargs.get("sorter") is not None:
            kwargs["sorter"] = torch.argsort(args[position], dim=-1, stable=True)
        else:
            args[position] = torch.sort(args[position], dim=-1).values
        return args, kwargs

    return keep


def _bag_offsets(args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """Non-decreasing offsets, the last one ``len(indices)`` with ``include_last_offset``
    (torch's contract: outside it, its float32 and float64 kernels disagree)."""
    offsets = kwargs.get("offsets")
    if offsets is not None:
        offsets = torch.sort(offsets).values
        if kwargs.get("include_last_offset"):
            offsets = torch.cat([offsets[:-1], offsets.new_full((1,), args[1].numel())])
        kwargs["offsets"] = offsets
    return args, kwargs


#: Ops whose arguments obey a contract the harness's grown inputs (other sizes, by repeating
#: slices) break: a sorted sequence unsorted, a ``sorter`` or bag offsets made invalid.
CONTRACTS: dict[str, Callable[..., tuple[list[Any], dict[str, Any]]]] = {
    "searchsorted": _sorted_sequence(0),
    "bucketize": _sorted_sequence(1),
    "nn.functional.embedding_bag": _bag_offsets,
}


def _keeping_contract(op: Callable[..., Any], keep: Callable[..., Any]) -> Callable[..., Any]:
    """``op`` with its arguments brought into its contract in the module: a no-op on op_db's
    own samples, valid arguments for the harness's grown ones."""

    def call(*args: Any, **kwargs: Any) -> Any:
        new_args, new_kwargs = keep(list(args), dict(kwargs))
        return op(*new_args, **new_kwargs)

    return call


def sample_inputs(info: Any, dtype: torch.dtype, limit: int | None) -> Iterator[Any]:
    """The first ``limit`` (all if None) samples of ``info`` for ``dtype`` on the CPU."""
    from torch.testing._internal import common_utils
    from torch.testing._internal.opinfo import core as opinfo_core

    torch.manual_seed(0)
    # op_db looks for the unittest method calling it (per-test seeds, sample skips) by walking
    # inspect.stack(), to find none here (these tests are functions): 55 ms a call run alone,
    # more in the whole suite (each frame's module is looked up among every module imported):
    # the module took 5.9 CPU-min there against 8.9. Told so at once, it seeds and samples the same.
    with (
        mock.patch.object(common_utils, "extract_test_fn", return_value=None),
        mock.patch.object(opinfo_core, "extract_test_fn", return_value=None),
    ):
        samples = info.sample_inputs("cpu", dtype, requires_grad=False)
    for index, sample in enumerate(samples):
        if limit is not None and index >= limit:
            return
        yield sample


@dataclass(frozen=True)
class Outcome:
    """What exporting one sample came to.

    ``kind`` is one of:

    * ``pass``: exported, ran in onnxruntime, matched eager;
    * ``error``: export refused the sample with a documented pt2onnx error (no converter, an
      argument ONNX cannot express, a program torch.export cannot capture; ``detail`` names its class);
    * ``dtype``: export refused the dtype of a tensor with a documented error (onnxruntime has no
      kernel for it, complex values; see :func:`refuses_a_dtype`);
    * ``wrong``: exported and ran, but differs from eager (silently wrong);
    * ``runtime``: exported, but onnxruntime failed to load or run it;
    * ``crash``: the exporter failed with an exception that is not a pt2onnx error, or with a
      ``ConversionError`` or ``OptimizationError``: a converter or pass that raised;
    * ``random``: the op draws random numbers, so no export can equal eager;
    * ``skip``: the sample cannot be a test (eager fails on it, or it returns no tensor).
    """

    kind: str
    detail: str = ""
    #: The ops the export converted (``aten::add.Tensor``), when it got that far.
    converted: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.kind == "pass"


def _close(a: Any, b: Any) -> bool:
    """The same results within the dtype's tolerance (NaN equal to NaN): some kernels (LAPACK's
    gelsy) differ by an ulp from call to call, which is neither a random op nor a harness defect."""
    try:
        torch.testing.assert_close(a, b, equal_nan=True)
    except (AssertionError, TypeError, ValueError):
        return False
    return True


class HarnessError(AssertionError):
    """The sample's module does not compute what the sample itself computes in eager: a
    defect of this harness, never an outcome of the export."""


def _cloned(tree: Any) -> Any:
    """``tree`` with fresh copies of its tensors, so an in-place op leaves the sample as it was."""
    return pytree.tree_map(lambda leaf: leaf.detach().clone() if isinstance(leaf, torch.Tensor) else leaf, tree)


def eager_outcome(info: Any, sample: Any, module: SampleModule, tensors: tuple[torch.Tensor, ...]) -> Outcome | None:
    """``skip`` or ``random`` when the sample cannot be compared with eager, else None.

    Only the op itself, called on the sample as op_db gives it, decides a skip. The module
    must then compute the same, or :class:`HarnessError` is raised: a harness that wires a
    sample wrongly must fail loudly, not read as eager rejecting the sample (a None argument
    taken for a tensor slot once skipped 76 cases so).
    """
    args, kwargs = _cloned(((sample.input, *sample.args), dict(sample.kwargs)))
    try:
        with torch.no_grad():
            torch.manual_seed(0)
            direct = info.op(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - eager itself rejects the sample
        return Outcome("skip", f"eager fails: {_first_line(e)}")
    if not returns_tensors(direct):
        return Outcome("skip", f"returns no tensor: {type(direct).__name__}")
    try:
        with torch.no_grad():
            torch.manual_seed(0)
            first = module(*_cloned(tensors))
            torch.manual_seed(1)
            second = module(*_cloned(tensors))
    except Exception as e:
        raise HarnessError(f"{op_id(info)}: the sample's module fails where the op does not: {_first_line(e)}") from e
    if not _close(first, direct):
        raise HarnessError(f"{op_id(info)}: the sample's module computes other values than the op on the sample")
    if not _close(first, second):
        return Outcome("random", "two eager runs differ: the op draws random numbers")
    return None


#: Ops whose result is uninitialized memory: undefined values that no export can equal.
UNINITIALIZED = frozenset({"empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided"})


#: float32 absolute tolerances torch's own op_db sets for an op (its ``toleranceOverride``).
TORCH_TOLERANCES = {"nn.functional.conv_transpose3d": 2e-4}


def tolerance(info: Any, tensors: tuple[torch.Tensor, ...]) -> float | None:
    """The absolute tolerance of an op whose every output sums every input (the FFTs): a few
    dozen roundings of the inputs' total magnitude, as torch's own FFT tests allow; torch's
    own override (:data:`TORCH_TOLERANCES`); None (the dtype's tolerance) for every other op."""
    if info.name in TORCH_TOLERANCES and all(t.dtype == torch.float32 for t in tensors if t.is_floating_point()):
        return TORCH_TOLERANCES[info.name]
    if not info.name.startswith("fft."):
        return None
    # Integer and bool inputs count too: torch transforms them in float32 (the default dtype).
    reals = [torch.view_as_real(t) if t.is_complex() else t for t in tensors]
    if not reals:
        return None
    eps = torch.finfo(reals[0].dtype if reals[0].is_floating_point() else torch.get_default_dtype()).eps
    return 64 * eps * (sum(float(t.double().abs().sum()) for t in reals) + 1)


def run_sample(info: Any, sample: Any, check: Callable[..., Any]) -> Outcome:
    """Export one sample with ``check(module, tensors, atol)`` (which raises on failure) and classify it."""
    if info.name in UNINITIALIZED:
        return Outcome("random", "the op returns uninitialized memory: no export can equal eager")
    module, tensors = sample_module(info, sample)
    early = eager_outcome(info, sample, module, tensors)
    if early is not None:
        return early
    try:
        result = check(module, tensors, tolerance(info, tensors))
    except Exception as e:  # noqa: BLE001 - every failure is an outcome to classify
        return classify(e)
    report = getattr(result, "report", None)
    return Outcome("pass", converted=tuple(sorted({u.op for u in report.ops})) if report is not None else ())


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


def classify(error: BaseException | None) -> Outcome:
    """The outcome of an export whose check raised ``error`` (None: it passed)."""
    from pt2onnx.errors import (
        ConversionError,
        OptimizationError,
        Pt2OnnxError,
        UnsupportedArgumentError,
        UnsupportedOpsError,
        VerificationError,
    )

    if error is None:
        return Outcome("pass")
    if isinstance(error, AssertionError) and "differs from eager" in str(error):
        # The first output row of the comparison table that differs.
        rows = [line for line in str(error).splitlines() if line.endswith("BAD")]
        return Outcome("wrong", " ".join(rows[0].split())[:300] if rows else "")
    if isinstance(error, VerificationError):
        return Outcome("runtime", _first_line(error))
    if isinstance(error, UnsupportedOpsError):
        return Outcome("error", f"UnsupportedOpsError: no converter for {', '.join(sorted(error.unsupported))}")
    if isinstance(error, UnsupportedArgumentError) and refuses_a_dtype(error):
        return Outcome("dtype", _first_line(error))
    if isinstance(error, (ConversionError, OptimizationError)):
        # Documented classes, but of defects: a converter or pass raised, or a converter returned
        # what torch's metadata contradicts (or every converter declined, which no builtin one does).
        return Outcome("crash", _first_line(error))
    if isinstance(error, Pt2OnnxError):
        return Outcome("error", _first_line(error))
    module = type(error).__module__ or ""
    if module.startswith(("onnxruntime", "onnx")):
        return Outcome("runtime", _first_line(error))
    return Outcome("crash", _first_line(error))


def refuses_a_dtype(error: Any) -> bool:
    """Whether an ``UnsupportedArgumentError`` refuses a dtype rather than a value: its argument
    is a dtype, or its value names the dtype of the tensor refused (``op.unsupported("self",
    x.dtype.name, ...)``: onnxruntime has no kernel for it), or is a complex tensor, which the
    core refuses for every converter not declaring ``complex_values``."""
    import onnx_ir as ir

    value = error.value
    return (
        error.argument == "dtype"
        or isinstance(value, (torch.dtype, ir.DataType))
        or (isinstance(value, str) and (value in ir.DataType.__members__ or value == "a complex tensor"))
    )


def skip_reason(details: list[str]) -> str:
    """Why no sample of an (op, dtype) was tested, from the ``skip`` outcomes of its samples."""
    if not details:
        return "op_db has no sample for it"
    return "; ".join(sorted(set(details)))


def returns_tensors(value: Any) -> bool:
    """Whether eager's result holds a tensor an ONNX graph can return."""
    leaves = pytree.tree_leaves(value)
    return any(isinstance(leaf, torch.Tensor) for leaf in leaves) and all(
        isinstance(leaf, torch.Tensor) or leaf is None or (isinstance(leaf, (int, float, bool)) and math.isfinite(leaf))
        for leaf in leaves
    )


# -- what a ``wrong`` outcome still gets right -------------------------------------------


# Stubs of torch's signatures, argument names included: a sample may pass any of them by keyword.
def _sort_dim(input: Any, dim: int = -1, descending: bool = False, *, stable: bool = False) -> int:  # noqa: A002
    return dim


def _topk_dim(input: Any, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> int:  # noqa: A002
    return dim


#: The dim each sorting op sorts along, from the sample's arguments as the op takes them.
_SORT_DIMS: dict[str, Callable[..., int]] = {"sort": _sort_dim, "argsort": _sort_dim, "topk": _topk_dim}


def _sorted_values(info: Any, sample: Any, inputs: tuple[torch.Tensor, ...], expected: Any, got: Any) -> None:
    """The values equal eager's bit for bit; the indices are distinct along the dim and select them."""
    x = inputs[0]
    dim = _SORT_DIMS[info.name](sample.input, *sample.args, **sample.kwargs) if x.dim() else 0
    if info.name == "argsort":
        values, indices = x.gather(dim, expected) if x.dim() else x, got
    else:
        (values, _), (got_values, indices) = expected, got
        torch.testing.assert_close(got_values, values, rtol=0, atol=0, equal_nan=True, msg="the values differ")
    if x.dim():
        ordered = indices.sort(dim).values
        assert bool((ordered.diff(dim=dim) > 0).all()), "an index repeats along the dim"
        selected = x.gather(dim, indices)
    else:
        selected = x
    torch.testing.assert_close(selected, values, rtol=0, atol=0, equal_nan=True, msg="the indices select other values")


def _in_float64(module: SampleModule, dtype: torch.dtype) -> SampleModule:
    """``module`` computing in float64 where it computes in ``dtype`` (a dtype argument such as logspace's)."""
    constants = [torch.float64 if c == dtype else c for c in module.constants]
    return SampleModule(module.fn, constants, module.spec)


def _max_error(y: torch.Tensor, exact: torch.Tensor, where: torch.Tensor) -> float:
    """The largest distance of ``y`` from ``exact`` at the positions ``where``."""
    errors = (y.double() - exact)[where].abs()
    return float(errors.max()) if errors.numel() else 0.0


def _closer_to_float64(info: Any, sample: Any, inputs: tuple[torch.Tensor, ...], expected: Any, got: Any) -> None:
    """Every floating output is no farther from the sample computed in float64 than eager's is."""
    dtype = next(t.dtype for t in pytree.tree_leaves(expected) if isinstance(t, torch.Tensor))
    module, _ = sample_module(info, sample)
    wide = [t.double() if t.is_floating_point() else t for t in inputs]
    with torch.no_grad():
        exact = _in_float64(module, dtype)(*wide)
    for e, g, x in zip(pytree.tree_leaves(expected), pytree.tree_leaves(got), pytree.tree_leaves(exact)):
        if not (isinstance(e, torch.Tensor) and e.is_floating_point()):
            continue
        assert torch.equal(e.isfinite(), g.isfinite()), "non-finite values at other positions"
        eager_error, export_error = (_max_error(y, x, e.isfinite()) for y in (e, g))
        assert export_error <= eager_error, (
            f"the export is {export_error:.3g} from the float64 result, eager {eager_error:.3g}: not closer"
        )


#: What a ``wrong`` entry says the export still gets right, by name, with its check:
#: ``check(info, sample, inputs, eager's outputs, the export's outputs)`` raises AssertionError where it does not.
STILL_RIGHT: dict[str, Callable[..., None]] = {
    "sorted values": _sorted_values,
    "closer to float64": _closer_to_float64,
}


def check_still_right(claim: str, info: Any, sample: Any) -> None:
    """Export ``sample`` as the test does and check ``claim`` (a key of :data:`STILL_RIGHT`) on
    every input the test compares: the sample's and, where the export has symbolic dims, the
    input of other sizes. Raises AssertionError naming the input where the claim fails."""
    from pt2onnx import export
    from pt2onnx.testing import other_sizes

    module, tensors = sample_module(info, sample)
    result = export(module, tensors, dynamic_shapes="auto", quiet=True)
    grown = other_sizes(result, tensors, {})
    for which, inputs in [("the sample", tensors), ("other sizes", grown[0] if grown else None)]:
        if inputs is None:
            continue
        with torch.no_grad():
            expected = module(*_cloned(inputs))
        got = result.run(*_cloned(inputs))
        try:
            STILL_RIGHT[claim](info, sample, tuple(inputs), expected, got)
        except AssertionError as e:
            raise AssertionError(f"{op_id(info)}: {claim!r} does not hold on {which}: {e}") from e
