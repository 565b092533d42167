"""Hypothesis strategies for converter property tests: shapes, dtypes, dims and tensors.

:func:`tensors` searches where converters break: by default it draws edge values where
the dtype has them (NaN, ±inf, ±0, subnormals, the dtype's extremes) and values at
several magnitudes, and integers over wide ranges up to the dtype's limits. A test that
must avoid them (a domain, an index range) narrows it with ``low``/``high`` and
``edge_values`` and says why. It also draws non-contiguous tensors (the same values in
another memory layout), as a model meets after a transpose or a slice.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import torch
from hypothesis import assume
from hypothesis import strategies as st

__all__ = [
    "ALL_DTYPES",
    "EDGE_KINDS",
    "FLOAT_DTYPES",
    "INT_DTYPES",
    "LAYOUTS",
    "broadcast_shapes",
    "dims",
    "dtypes",
    "shapes",
    "tensors",
]

FLOAT_DTYPES = ("float32", "float64", "float16", "bfloat16")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8")
ALL_DTYPES = (*FLOAT_DTYPES, *INT_DTYPES, "bool")

#: The kinds of edge values :func:`tensors` sprinkles in: ``nan``, ``inf`` (both signs),
#: ``zero`` (``0.0`` and ``-0.0``), ``subnormal`` (both signs) and ``extreme`` (the
#: dtype's largest and lowest finite values; for integers its min and max).
EDGE_KINDS = ("nan", "inf", "zero", "subnormal", "extreme")
_INT_EDGE_KINDS = ("extreme",)

#: Magnitudes of the ordinary (non-edge) floating values, when no ``low``/``high`` is given.
_FLOAT_SCALES = ("unit", "wide", "tiny", "huge")
#: Ranges of ordinary integer values, when no ``low``/``high`` is given.
_INT_SCALES = ("small", "wide", "full")


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


def _edge_kinds(draw: st.DrawFn, edge_values: bool | Collection[str], allowed: Sequence[str]) -> set[str]:
    """The edge kinds one tensor gets: a drawn subset, so hypothesis can shrink to none."""
    if edge_values is True:
        candidates = list(allowed)
    elif edge_values is False:
        candidates = []
    else:
        unknown = set(edge_values) - set(EDGE_KINDS)
        if unknown:
            raise ValueError(f"unknown edge value kind(s) {sorted(unknown)}; known: {EDGE_KINDS}")
        candidates = [k for k in allowed if k in edge_values]
    return draw(st.sets(st.sampled_from(candidates))) if candidates else set()


def _float_edges(dtype: torch.dtype, kinds: Collection[str]) -> list[float]:
    info = torch.finfo(dtype)
    table = {
        "nan": [float("nan")],
        "inf": [float("inf"), -float("inf")],
        "zero": [0.0, -0.0],
        "subnormal": [info.tiny / 4, -info.tiny / 4],
        "extreme": [info.max, info.min],
    }
    return [v for kind in kinds for v in table[kind]]


def _float_range(dtype: torch.dtype, scale: str) -> tuple[float, float]:
    info = torch.finfo(dtype)
    return {
        "unit": (-3.0, 3.0),
        "wide": (-1e3, 1e3),
        "tiny": (-1e3 * info.tiny, 1e3 * info.tiny),
        "huge": (info.min / 4, info.max / 4),
    }[scale]


def _int_range(dtype: torch.dtype, scale: str) -> tuple[int, int]:
    info = torch.iinfo(dtype)
    low, high = {"small": (-8, 8), "wide": (-10_000, 10_000), "full": (info.min, info.max)}[scale]
    return max(low, info.min), min(high, info.max)


def _randint(low: int, high: int, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Uniform int64 values in ``[low, high]``, both included, over up to the whole int64 range."""
    span = high - low + 1
    if span <= 2**62:
        return torch.randint(0, span, shape, generator=generator, dtype=torch.int64) + low
    # torch.randint cannot span 2**64 values: draw the high and low 32 bits apart.
    upper = torch.randint(-(2**31), 2**31, shape, generator=generator, dtype=torch.int64)
    lower = torch.randint(0, 2**32, shape, generator=generator, dtype=torch.int64)
    values = upper * 2**32 + lower
    return values.clamp(low, high)


#: The non-contiguous layouts :func:`tensors` draws: ``swapped`` (two dims swapped in
#: memory: the transpose of a contiguous transposed tensor, as channels-last is) and
#: ``strided`` (every other element along one dim of a larger buffer, from an offset: a
#: slice with step 2; the skipped elements hold the dtype's largest value, so reading them
#: shows).
LAYOUTS = ("swapped", "strided")


def _layouts(shape: tuple[int, ...]) -> list[str]:
    """The layouts in which a tensor of ``shape`` is not contiguous (none with <= 1 element)."""
    if 0 in shape:
        return []
    wide = sum(n >= 2 for n in shape)
    return [name for name, needs in (("swapped", 2), ("strided", 1)) if wide >= needs]


def _relaid(draw: st.DrawFn, values: torch.Tensor, layout: str) -> torch.Tensor:
    """``values`` (contiguous) as a non-contiguous view with the same shape and values."""
    wide = [d for d, n in enumerate(values.shape) if n >= 2]
    if layout == "swapped":
        a, b = draw(st.lists(st.sampled_from(wide), min_size=2, max_size=2, unique=True))
        view = values.transpose(a, b).contiguous().transpose(a, b)
    else:
        dim, step = draw(st.sampled_from(wide)), draw(st.integers(2, 3))
        offset = draw(st.integers(0, step - 1))
        gap = True if values.dtype == torch.bool else _largest(values.dtype)
        buffer = torch.full([n * step if d == dim else n for d, n in enumerate(values.shape)], gap, dtype=values.dtype)
        view = buffer[(slice(None),) * dim + (slice(offset, None, step),)]
        view.copy_(values)
    # Not a view (no ``_base``) of the buffer, only its memory: torch.export guards a view
    # input on its base's sizes too, which no other input of the test could meet.
    tensor = torch.empty(0, dtype=values.dtype).set_(
        view.untyped_storage(), view.storage_offset(), view.shape, view.stride()
    )
    assert not tensor.is_contiguous() and tensor._base is None
    return tensor


def _largest(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).max if dtype.is_floating_point else torch.iinfo(dtype).max


@st.composite
def tensors(
    draw: st.DrawFn,
    shape: tuple[int, ...] | st.SearchStrategy[tuple[int, ...]] | None = None,
    dtype: torch.dtype | str | st.SearchStrategy[torch.dtype] | None = None,
    *,
    low: float | None = None,
    high: float | None = None,
    edge_values: bool | Collection[str] = True,
    contiguous: bool | None = None,
) -> torch.Tensor:
    """A tensor of the given (or a drawn) shape and dtype.

    Ordinary values lie in ``[low, high]`` when given; otherwise hypothesis draws their
    magnitude (floats: around 1, 1e3, tiny or a quarter of the dtype's range; integers:
    small, ±10,000, or the dtype's whole range). ``edge_values`` (default: every kind of
    :data:`EDGE_KINDS` the dtype has) sprinkles edge values in, outside ``[low, high]``
    too; pass ``False`` or a subset such as ``("nan", "inf")`` to narrow it, and say why
    in the test.

    ``contiguous`` (default ``None``: drawn, so a failure shrinks to a contiguous tensor
    if it does not need the layout) says whether the tensor is contiguous or a
    non-contiguous view with the same shape and values (one of :data:`LAYOUTS`), as the
    input of a model that transposes or slices before the exported part. ``False``
    forces such a view and refuses shapes with none (one element or fewer, which torch
    always counts contiguous); ``True`` forces a contiguous tensor: a test whose model
    needs one (``x.view(...)``, which torch refuses on most such views) passes it and
    says why. Example::

        @given(x=tensors(shapes(max_rank=3), dtypes(["float32", "float16"])))
        def test_gelu(x):
            assert_exports_like_eager(torch.nn.GELU(), (x,))
    """
    fixed_shape = isinstance(shape, tuple)
    shape = draw(shapes()) if shape is None else shape if isinstance(shape, tuple) else draw(shape)
    layouts = _layouts(shape) if contiguous is not True else []
    if contiguous is False and not layouts:
        if fixed_shape:
            raise ValueError(f"contiguous=False: a tensor of shape {shape} is contiguous in every layout")
        assume(False)
    if dtype is None:
        dtype = draw(dtypes())
    elif isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    elif not isinstance(dtype, torch.dtype):
        dtype = draw(dtype)
    assert isinstance(dtype, torch.dtype)
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    if dtype == torch.bool:
        tensor = torch.rand(shape, generator=generator) > 0.5
    else:
        tensor = _values(draw, shape, dtype, generator, low, high, edge_values)
    # Drawn last and False first: shrinking goes to the contiguous tensor of the same values.
    if layouts and (contiguous is False or draw(st.booleans())):
        tensor = _relaid(draw, tensor, draw(st.sampled_from(layouts)))
    return tensor


def _values(
    draw: st.DrawFn,
    shape: tuple[int, ...],
    dtype: torch.dtype,
    generator: torch.Generator,
    low: float | None,
    high: float | None,
    edge_values: bool | Collection[str],
) -> torch.Tensor:
    """The values of a numeric tensor (see :func:`tensors`), contiguous."""
    if dtype.is_floating_point:
        lo, hi = (
            (low, high)
            if low is not None and high is not None
            else _float_range(dtype, draw(st.sampled_from(_FLOAT_SCALES)))
        )
        values = torch.rand(shape, generator=generator, dtype=torch.float64) * (hi - lo) + lo
        edges = _float_edges(dtype, _edge_kinds(draw, edge_values, EDGE_KINDS))
    else:
        info = torch.iinfo(dtype)
        if low is not None and high is not None:
            lo_i, hi_i = max(int(low), info.min), min(int(high), info.max)
        else:
            lo_i, hi_i = _int_range(dtype, draw(st.sampled_from(_INT_SCALES)))
        values = _randint(lo_i, hi_i, shape, generator)
        edges = [info.min, info.max] if _edge_kinds(draw, edge_values, _INT_EDGE_KINDS) else []
    if edges and values.numel():
        mask = torch.rand(shape, generator=generator) < 0.2
        picks = torch.randint(0, len(edges), (int(mask.sum()),), generator=generator)
        values[mask] = torch.tensor(edges, dtype=values.dtype)[picks]
    return values.to(dtype)
