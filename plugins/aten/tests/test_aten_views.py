"""Views and shape ops: permute, transpose, movedim, expand, squeeze, unsqueeze, select, slice, ..."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lambda_modules import Binary as Fn2
from lambda_modules import Unary as Fn
from pt2onnx.errors import UnsupportedArgumentError
from pt2onnx.testing import ALL_DTYPES, assert_exports_like_eager, dims, shapes, tensors

DTYPES = st.sampled_from([getattr(torch, n) for n in ALL_DTYPES])


@given(data=st.data(), x=tensors(shapes(max_rank=5, min_side=0, max_side=3), DTYPES))
def test_permute(data, x):
    perm = data.draw(st.permutations(range(x.dim())))
    perm = [p - x.dim() if data.draw(st.booleans()) else p for p in perm]
    assert_exports_like_eager(Fn(lambda t: t.permute(perm)), (x,), expect_ops=["aten::permute"] if x.dim() else [])


@given(data=st.data(), x=tensors(shapes(min_rank=0, max_rank=4, min_side=0), DTYPES))
def test_transpose(data, x):
    a, b = data.draw(dims(x.dim())), data.draw(dims(x.dim()))
    assert_exports_like_eager(Fn(lambda t: t.transpose(a, b)), (x,), expect_ops=["aten::transpose.int"])


@given(
    data=st.data(),
    x=tensors(shapes(min_rank=1, max_rank=4, min_side=0), DTYPES),
    name=st.sampled_from(["swapaxes", "swapdims"]),
)
def test_swapaxes(data, x, name):
    # Kept whole by torch.export (MaxViT's attention): without a converter the program is re-traced.
    a, b = data.draw(dims(x.dim())), data.draw(dims(x.dim()))
    assert_exports_like_eager(Fn(lambda t: getattr(t, name)(a, b)), (x,), expect_ops=[f"aten::{name}.default"])


@pytest.mark.parametrize("name", ["swapaxes", "swapdims"])
def test_swapaxes_on_a_fixed_input(name):
    # test_swapaxes may draw one name only, or no witness for it (empty or one-valued inputs).
    fn = Fn(lambda t: getattr(t, name)(0, 2))
    assert_exports_like_eager(fn, (torch.randn(2, 3, 4),), expect_ops=[f"aten::{name}.default"])


def test_transpose_of_a_0d_tensor():
    # Thorough OpInfo: transpose_copy(scalar, 0, 0) failed in the converter (an empty perm).
    assert_exports_like_eager(Fn(lambda t: torch.transpose_copy(t, 0, -1)), (torch.tensor(2.5),))


@given(data=st.data(), x=tensors(shapes(min_rank=1, max_rank=5, max_side=3), DTYPES))
def test_movedim(data, x):
    rank = x.dim()
    count = data.draw(st.integers(1, rank))
    src = data.draw(st.permutations(range(rank)))[:count]
    dst = data.draw(st.permutations(range(rank)))[:count]
    if count == 1 and data.draw(st.booleans()):
        src, dst, op = src[0] - rank, dst[0], "aten::movedim.int"
    else:
        op = "aten::movedim.intlist"
    assert_exports_like_eager(Fn(lambda t: torch.movedim(t, src, dst)), (x,), expect_ops=[op])


@given(data=st.data(), x=tensors(shapes(max_rank=3, max_side=3), DTYPES))
def test_expand(data, x):
    lead = data.draw(st.lists(st.integers(0, 3), max_size=2))
    # A size-1 dim may grow; any dim may be kept with -1 or its own size.
    own = [data.draw(st.sampled_from([-1, n] + ([0, 3] if n == 1 else []))) for n in x.shape]
    assert_exports_like_eager(Fn(lambda t: t.expand([*lead, *own])), (x,), expect_ops=["aten::expand"])


@given(x=tensors(shapes(min_rank=2, max_rank=2, max_side=3), DTYPES))
def test_expand_as(x):
    assert_exports_like_eager(Fn(lambda t: t[:1].expand_as(t)), (x,), expect_ops=["aten::expand_as"])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_expand_to_an_empty_size(dtype):
    # onnxruntime 1.32 takes an Expand of size-1 dims to a shape holding 0 for a no-op
    # (here behind bfloat16's casts): the converter must still give an empty result.
    model = Fn2(lambda t, s: (t.expand(-1, 0), t.expand(2, 0, 1), torch.slice_scatter(s, s[:, :0], 1, 0, 0)))
    x, s = torch.ones(1, 1, dtype=dtype), torch.randn(3, 2).to(dtype)
    assert_exports_like_eager(model, (x, s), expect_ops=["aten::expand", "aten::slice_scatter"])


def test_expand_to_a_dynamic_size():
    batch = torch.export.Dim("batch")
    model = Fn2(lambda t, y: t.expand(y.shape[0], -1))
    x, y = torch.randn(1, 3), torch.randn(4, 2)
    assert_exports_like_eager(
        model,
        (x, y),
        dynamic_shapes=({}, {0: batch}),
        other_inputs=[((x, torch.randn(7, 2)), {})],
        expect_ops=["aten::expand"],
    )


@given(data=st.data(), x=tensors(shapes(max_rank=4, min_side=0, max_side=2), DTYPES))
def test_squeeze(data, x):
    kind = data.draw(st.sampled_from(["default", "dim", "dims"]))
    if kind == "default" or x.dim() == 0:
        fn, op = (lambda t: t.squeeze()), "aten::squeeze"
    elif kind == "dim":
        d = data.draw(dims(x.dim()))
        fn, op = (lambda t: t.squeeze(d)), "aten::squeeze.dim"
    else:
        ds = tuple(data.draw(st.lists(dims(x.dim()), min_size=1, max_size=3, unique=True)))
        ds = tuple(dict.fromkeys(d % x.dim() for d in ds))
        fn, op = (lambda t: t.squeeze(ds)), "aten::squeeze.dims"
    assert_exports_like_eager(Fn(fn), (x,), expect_ops=[op] if x.dim() else [])


@pytest.mark.parametrize("ds", [(1,), (1, 3), (0, 3)])
def test_squeeze_dims(ds):
    # squeeze.dims on values, whatever the property test above draws (empty tensors prove nothing).
    assert_exports_like_eager(
        Fn(lambda t: t.squeeze(ds)), (torch.randn(2, 1, 3, 1),), expect_ops=["aten::squeeze.dims"]
    )


def test_squeeze_all_on_a_fixed_input():
    # test_squeeze's draws may leave squeeze.default without a witness (empty or one-valued inputs).
    assert_exports_like_eager(Fn(lambda t: t.squeeze()), (torch.randn(2, 1, 3, 1),), expect_ops=["aten::squeeze"])


def test_squeeze_of_a_symbolic_dim_keeps_it():
    model = Fn(lambda t: t.squeeze(0))
    batch = torch.export.Dim("batch", min=2)
    x = torch.randn(3, 1, 2)
    assert_exports_like_eager(model, (x,), dynamic_shapes=({0: batch},), other_inputs=[((torch.randn(5, 1, 2),), {})])


@given(data=st.data(), x=tensors(shapes(max_rank=4, min_side=0, max_side=3), DTYPES))
def test_unsqueeze(data, x):
    d = data.draw(st.integers(-x.dim() - 1, x.dim()))
    assert_exports_like_eager(Fn(lambda t: t.unsqueeze(d)), (x,), expect_ops=["aten::unsqueeze"])


@given(data=st.data(), x=tensors(shapes(min_rank=1, max_rank=4, max_side=4), DTYPES))
def test_select(data, x):
    d = data.draw(dims(x.dim()))
    n = x.shape[d]
    i = data.draw(st.integers(-n, n - 1))
    assert_exports_like_eager(Fn(lambda t: t.select(d, i)), (x,), expect_ops=["aten::select.int"])


BOUNDS = st.one_of(st.none(), st.integers(-7, 7), st.sampled_from([-(2**62), 2**62]))


@given(
    data=st.data(),
    x=tensors(shapes(min_rank=1, max_rank=4, min_side=0, max_side=6), DTYPES),
    start=BOUNDS,
    end=BOUNDS,
    step=st.integers(1, 3),
)
def test_slice(data, x, start, end, step):
    d = data.draw(dims(x.dim()))
    index = (slice(None),) * (d % x.dim()) + (slice(start, end, step),)
    assert_exports_like_eager(Fn(lambda t: t[index]), (x,))


def test_slice_with_symbolic_bounds():
    # Like a position table cut to the sequence length: start and end from a dynamic size.
    seq = torch.export.Dim("seq", min=3, max=10)
    model = Fn2(lambda table, y: table[:, 1 : y.shape[0]])
    table = torch.randn(2, 10)
    assert_exports_like_eager(
        model,
        (table, torch.randn(4)),
        dynamic_shapes=({}, {0: seq}),
        other_inputs=[((table, torch.randn(7)), {}), ((table, torch.randn(10)), {})],
        expect_ops=["aten::slice"],
    )


def test_slice_of_a_dynamic_dim_from_the_end():
    seq = torch.export.Dim("seq", min=3)
    model = Fn(lambda t: t[:, -2:, ::2])
    x = torch.randn(2, 5, 5)
    assert_exports_like_eager(
        model,
        (x,),
        dynamic_shapes=({1: seq},),
        other_inputs=[((torch.randn(2, 9, 5),), {})],
        expect_ops=["aten::slice"],
    )


@given(data=st.data(), x=tensors(shapes(min_rank=1, max_rank=3, max_side=5), DTYPES))
def test_narrow(data, x):
    d = data.draw(dims(x.dim()))
    n = x.shape[d]
    start = data.draw(st.integers(-n, n))
    length = data.draw(st.integers(0, n - (start % n if start < 0 else start) if start != n else 0))
    assert_exports_like_eager(Fn(lambda t: t.narrow(d, start, length)), (x,), expect_ops=["aten::narrow"])


@given(data=st.data(), x=tensors(shapes(min_rank=1, max_rank=3, max_side=3), DTYPES))
def test_unflatten(data, x):
    d = data.draw(dims(x.dim()))
    n = x.shape[d]
    sizes = data.draw(st.sampled_from([(n,), (1, n), (n, 1), (-1, 1), (1, -1, 1)]))
    assert_exports_like_eager(Fn(lambda t: t.unflatten(d, sizes)), (x,), expect_ops=["aten::unflatten"])


@given(
    data=st.data(), x=tensors(shapes(min_rank=2, max_rank=4, min_side=0, max_side=4), DTYPES), offset=st.integers(-5, 5)
)
def test_diagonal(data, x, offset):
    d1 = data.draw(dims(x.dim()))
    d2 = data.draw(dims(x.dim()).filter(lambda d: d % x.dim() != d1 % x.dim()))
    model = Fn(lambda t: torch.diagonal(t, offset, d1, d2))
    assert_exports_like_eager(model, (x,), expect_ops=["aten::diagonal"])


def test_diagonal_of_dynamic_sizes():
    n = torch.export.Dim("n", min=2)
    model = Fn(lambda t: torch.diagonal(t, 1, -2, -1))
    assert_exports_like_eager(
        model,
        (torch.randn(2, 3, 5),),
        dynamic_shapes=({1: n},),
        other_inputs=[((torch.randn(2, 7, 5),), {})],
        expect_ops=["aten::diagonal"],
    )


# Contiguous: as_strided reads the input's storage, which the export has only for a
# contiguous input (of another, it is a clear error: the test below).
@given(x=tensors(shapes(min_rank=1, max_rank=3, min_side=2, max_side=4), DTYPES, contiguous=True), data=st.data())
def test_as_strided(x, data):
    numel = x.numel()
    size = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    stride = data.draw(st.lists(st.integers(0, 2), min_size=len(size), max_size=len(size)))
    reach = sum((n - 1) * s for n, s in zip(size, stride))
    offset = data.draw(st.integers(0, max(numel - 1 - reach, 0)))
    if reach + offset >= numel:
        stride = [0] * len(size)
    assert_exports_like_eager(
        Fn(lambda t: torch.as_strided(t, size, stride, offset)), (x,), expect_ops=["aten::as_strided"]
    )


def test_as_strided_with_symbolic_sizes_and_offset():
    # A window per row start, sized and offset by the input's dynamic dims.
    model = Fn(lambda t: torch.as_strided(t, (t.shape[0] - 1, t.shape[1]), (t.shape[1], 1), t.shape[1]))
    # rows >= 3: torch specializes a size of 1 (here rows - 1).
    rows, cols = torch.export.Dim("rows", min=3), torch.export.Dim("cols", min=2)
    assert_exports_like_eager(
        model,
        (torch.randn(3, 4),),
        dynamic_shapes=({0: rows, 1: cols},),
        other_inputs=[((torch.randn(5, 2),), {}), ((torch.randn(3, 7),), {})],
        expect_ops=["aten::as_strided"],
    )


def test_as_strided_of_a_non_contiguous_input_is_a_clear_error():
    model = Fn(lambda t: torch.as_strided(t.t(), (2, 2), (1, 2)))
    with pytest.raises(UnsupportedArgumentError, match="contiguous"):
        assert_exports_like_eager(model, (torch.randn(3, 3),))


def test_views_at_opset_14():
    model = Fn(lambda t: t.permute(1, 0, 2)[1:, 0].unsqueeze(0).expand(3, -1, -1).squeeze(1))
    assert_exports_like_eager(
        model, (torch.randn(2, 1, 4),), opset=14, expect_ops=["aten::permute", "aten::slice", "aten::squeeze"]
    )
