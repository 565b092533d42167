"""op_db's samples as exportable modules, and what one export of one sample came to.

Shared by the OpInfo test module (``test_opinfo.py``) and the measurement beside
torch.onnx (``benchmarks/opinfo_compare.py``), so both run exactly the same samples.

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

import torch
import torch.utils._pytree as pytree

__all__ = [
    "Outcome",
    "SampleModule",
    "classify",
    "eager_outcome",
    "run_sample",
    "op_id",
    "opinfos",
    "sample_inputs",
    "sample_module",
]


@functools.cache
def opinfos() -> dict[str, Any]:
    """Every OpInfo of torch's op_db, by :func:`op_id`."""
    from torch.testing._internal.common_methods_invocations import op_db

    return {op_id(info): info for info in op_db}


def op_id(info: Any) -> str:
    """``name`` or ``name.variant`` (op_db's own test names)."""
    return f"{info.name}.{info.variant_test_name}" if info.variant_test_name else info.name


class SampleModule(torch.nn.Module):
    """Calls ``fn`` on the sample's structure, with its tensor leaves taken from ``forward``'s inputs."""

    def __init__(self, fn: Callable[..., Any], leaves: list[Any], spec: pytree.TreeSpec) -> None:
        super().__init__()
        self.fn = fn
        self.constants = [None if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves]
        self.spec = spec

    def forward(self, *tensors: torch.Tensor) -> Any:
        given = iter(tensors)
        leaves = [next(given) if c is None else c for c in self.constants]
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
    torch.manual_seed(0)
    for index, sample in enumerate(info.sample_inputs("cpu", dtype, requires_grad=False)):
        if limit is not None and index >= limit:
            return
        yield sample


@dataclass(frozen=True)
class Outcome:
    """What exporting one sample came to.

    ``kind`` is one of:

    * ``pass``: exported, ran in onnxruntime, matched eager;
    * ``error``: export raised a documented pt2onnx error (``detail`` names its class);
    * ``wrong``: exported and ran, but differs from eager (silently wrong);
    * ``runtime``: exported, but onnxruntime failed to load or run it;
    * ``crash``: the exporter failed with an exception that is not a pt2onnx error;
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


def _same(a: Any, b: Any) -> bool:
    """Bit for bit the same results (NaN equal to NaN)."""
    try:
        torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)
    except (AssertionError, TypeError, ValueError):
        return False
    return True


def eager_outcome(module: SampleModule, tensors: tuple[torch.Tensor, ...]) -> Outcome | None:
    """``skip`` or ``random`` when the sample cannot be compared with eager, else None."""
    try:
        with torch.no_grad():
            torch.manual_seed(0)
            first = module(*[t.clone() for t in tensors])
            torch.manual_seed(1)
            second = module(*[t.clone() for t in tensors])
    except Exception as e:  # noqa: BLE001 - eager itself rejects the sample
        return Outcome("skip", f"eager fails: {_first_line(e)}")
    if not returns_tensors(first):
        return Outcome("skip", f"returns no tensor: {type(first).__name__}")
    if not _same(first, second):
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
    early = eager_outcome(module, tensors)
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
    from pt2onnx.errors import Pt2OnnxError, UnsupportedOpsError, VerificationError

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
    if isinstance(error, Pt2OnnxError):
        return Outcome("error", _first_line(error))
    module = type(error).__module__ or ""
    if module.startswith(("onnxruntime", "onnx")):
        return Outcome("runtime", _first_line(error))
    return Outcome("crash", _first_line(error))


def returns_tensors(value: Any) -> bool:
    """Whether eager's result holds a tensor an ONNX graph can return."""
    leaves = pytree.tree_leaves(value)
    return any(isinstance(leaf, torch.Tensor) for leaf in leaves) and all(
        isinstance(leaf, torch.Tensor) or leaf is None or (isinstance(leaf, (int, float, bool)) and math.isfinite(leaf))
        for leaf in leaves
    )
