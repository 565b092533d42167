"""Testing converters: hypothesis strategies and ``assert_exports_like_eager``.

Public so that third-party packs test their converters exactly as the builtin ones:

```python
import torch
from hypothesis import given, settings

from pt2onnx.testing import assert_exports_like_eager, covers, tensors


@covers("aten::gelu.default")
@settings(deadline=None)  # an export takes longer than hypothesis' 200 ms default
@given(x=tensors(dtype="float32"))
def test_gelu(x):
    assert_exports_like_eager(torch.nn.GELU(), (x,), expect_ops=["aten::gelu"])
```

``tensors(dtype=...)`` takes one dtype (a ``torch.dtype``, its name, or a strategy such
as ``dtypes(["float32", "float16"])`` to draw one per example).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from types import ModuleType
from typing import Any, TypeVar

import onnx
import torch
from hypothesis import strategies as st

from .export import export
from .opnames import normalize_op_name
from .registry import session_registry
from .result import ExportResult

F = TypeVar("F", bound=Callable[..., Any])
_COVERS = "__pt2onnx_covers__"

__all__ = [
    "ALL_DTYPES",
    "FLOAT_DTYPES",
    "INT_DTYPES",
    "TOLERANCES",
    "assert_exports_like_eager",
    "broadcast_shapes",
    "covers",
    "dims",
    "dtypes",
    "shapes",
    "tensors",
    "untested_converters",
]

#: (atol, rtol) per output dtype; integer and bool outputs must match exactly.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-10, 1e-7),
    torch.float32: (1e-5, 1e-4),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (5e-2, 2e-2),
}

FLOAT_DTYPES = ("float32", "float64", "float16", "bfloat16")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8")
ALL_DTYPES = (*FLOAT_DTYPES, *INT_DTYPES, "bool")


def _tolerance(outputs: Any) -> tuple[float, float]:
    leaves = [t for t in torch.utils._pytree.tree_leaves(outputs) if isinstance(t, torch.Tensor)]
    atol, rtol = 0.0, 0.0
    for t in leaves:
        a, r = TOLERANCES.get(t.dtype, (0.0, 0.0))
        atol, rtol = max(atol, a), max(rtol, r)
    return atol, rtol


def assert_exports_like_eager(
    model: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None = None,
    *,
    other_inputs: Sequence[tuple[tuple[Any, ...], dict[str, Any]]] = (),
    atol: float | None = None,
    rtol: float | None = None,
    check_model: bool = True,
    expect_ops: Iterable[str] = (),
    **export_options: Any,
) -> ExportResult:
    """Export ``model`` through the full pipeline, run it in onnxruntime and compare with eager.

    Tolerances default per output dtype (:data:`TOLERANCES`); shapes, dtypes and the
    positions of NaN and inf must agree exactly. ``other_inputs`` are further
    ``(args, kwargs)`` pairs checked on the same exported model (e.g. other dynamic sizes).
    ``expect_ops`` are op names (``aten::add`` matches every overload) the exported graph
    must have converted, so a test cannot pass without exercising its converter.
    ``export_options`` go to :func:`pt2onnx.export`. Returns the export result.
    """
    if isinstance(model, torch.nn.Module):
        model = model.eval()
    result = export(model, args, kwargs, **export_options)
    used = {u.op for u in result.report.ops}
    for expected_op in expect_ops:
        name = normalize_op_name(expected_op)
        if not any(u == name or u.startswith(f"{name}.") for u in used):
            raise AssertionError(f"expected {name} in the exported graph; converted ops: {sorted(used)}")
    if check_model:
        onnx.checker.check_model(result.model_proto, full_check=True)
    for call_args, call_kwargs in [(args, kwargs or {}), *other_inputs]:
        eager_model = result._eager if result._eager is not None else result.program.module()
        with torch.no_grad():
            expected = eager_model(*_clone(call_args), **_clone(call_kwargs))
        default_atol, default_rtol = _tolerance(expected)
        check = result.verify(
            *call_args,
            _atol=default_atol if atol is None else atol,
            _rtol=default_rtol if rtol is None else rtol,
            **call_kwargs,
        )
        if not check.ok:
            raise AssertionError(
                f"ONNX model differs from eager PyTorch (atol={check.atol}, rtol={check.rtol}):\n{check}\n"
                f"inputs: {_describe(call_args)}\nexport report:\n{result.report}"
            )
    return result


def covers(*ops: str) -> Callable[[F], F]:
    """Declare which converters a property test proves (checked by :func:`untested_converters`)."""
    names = [normalize_op_name(op) for op in ops]

    def mark(test: F) -> F:
        setattr(test, _COVERS, [*getattr(test, _COVERS, []), *names])
        return test

    return mark


def untested_converters(plugin: str, test_modules: Iterable[ModuleType]) -> list[str]:
    """Ops ``plugin`` registers a converter for that no ``@covers`` test in ``test_modules`` declares."""
    declared: set[str] = set()
    for module in test_modules:
        for obj in vars(module).values():
            declared.update(getattr(obj, _COVERS, ()))
            if isinstance(obj, type):
                for member in vars(obj).values():
                    declared.update(getattr(member, _COVERS, ()))
    registered = {r.op for r in session_registry().registrations if r.plugin == plugin and r.converts}
    return sorted(registered - declared)


def _clone(tree: Any) -> Any:
    return torch.utils._pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, tree)


def _describe(args: Any) -> str:
    return ", ".join(
        f"{tuple(a.shape)}:{a.dtype}" if isinstance(a, torch.Tensor) else repr(a)
        for a in torch.utils._pytree.tree_leaves(args)
    )


# -- strategies -----------------------------------------------------------------------


def shapes(
    *, min_rank: int = 0, max_rank: int = 4, min_side: int = 1, max_side: int = 5
) -> st.SearchStrategy[tuple[int, ...]]:
    """Tensor shapes; ``min_side=0`` allows zero-size dims."""
    return st.lists(st.integers(min_side, max_side), min_size=min_rank, max_size=max_rank).map(tuple)


def broadcast_shapes(
    count: int = 2, *, min_rank: int = 0, max_rank: int = 4, min_side: int = 1, max_side: int = 4
) -> st.SearchStrategy[tuple[tuple[int, ...], ...]]:
    """``count`` shapes that broadcast together (different ranks, size-1 dims)."""
    from hypothesis.extra.numpy import mutually_broadcastable_shapes

    return mutually_broadcastable_shapes(
        num_shapes=count, min_dims=min_rank, max_dims=max_rank, min_side=min_side, max_side=max_side
    ).map(lambda b: tuple(tuple(s) for s in b.input_shapes))


def dtypes(names: Sequence[str] = FLOAT_DTYPES) -> st.SearchStrategy[torch.dtype]:
    """torch dtypes drawn from ``names`` (e.g. ``pt2onnx.testing.ALL_DTYPES``)."""
    return st.sampled_from([getattr(torch, n) for n in names])


def dims(rank: int, *, negative: bool = True) -> st.SearchStrategy[int]:
    """A valid dim index for a tensor of ``rank`` (negative ones too)."""
    low = -max(rank, 1) if negative else 0
    return st.integers(low, max(rank, 1) - 1)


@st.composite
def tensors(
    draw: st.DrawFn,
    shape: tuple[int, ...] | st.SearchStrategy[tuple[int, ...]] | None = None,
    dtype: torch.dtype | str | st.SearchStrategy[torch.dtype] | None = None,
    *,
    low: float = -3.0,
    high: float = 3.0,
    special: bool = False,
) -> torch.Tensor:
    """A tensor of the given (or a drawn) shape and dtype, values in ``[low, high]``.

    ``special=True`` sprinkles NaN, inf and -inf into floating tensors.
    """
    shape = draw(shapes()) if shape is None else shape if isinstance(shape, tuple) else draw(shape)
    if dtype is None:
        dtype = draw(dtypes())
    elif isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    elif not isinstance(dtype, torch.dtype):
        dtype = draw(dtype)
    assert isinstance(dtype, torch.dtype)
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    if dtype == torch.bool:
        return torch.rand(shape, generator=generator) > 0.5
    if dtype.is_floating_point:
        values = torch.rand(shape, generator=generator, dtype=torch.float64) * (high - low) + low
        if special and values.numel():
            mask = torch.rand(shape, generator=generator) < 0.1
            values[mask] = torch.tensor([float("nan"), float("inf"), -float("inf")], dtype=torch.float64)[
                torch.randint(0, 3, (int(mask.sum()),), generator=generator)
            ]
        return values.to(dtype)
    info = torch.iinfo(dtype)
    lo, hi = max(int(low), info.min), min(int(high), info.max)
    return torch.randint(lo, hi + 1, shape, generator=generator, dtype=torch.int64).to(dtype)
