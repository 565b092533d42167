"""Reading and writing by index: index, index_put, index_select, gather, embedding (and its max_norm), repeat_interleave by
a tensor, nonzero."""

from __future__ import annotations

import onnxruntime
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import pt2onnx
from lambda_modules import Binary as Fn2
from lambda_modules import Ternary as Fn3
from lambda_modules import Unary as Fn
from pt2onnx.errors import UnsupportedArgumentError
from pt2onnx.testing import ALL_DTYPES, assert_exports_like_eager, dims, shapes, tensors

DTYPES = st.sampled_from([getattr(torch, n) for n in ALL_DTYPES])
FLOAT_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def indices(shape, low, high):
    """int64 index tensors in ``[low, high]``, without edge values: torch rejects an index out
    of range (onnxruntime too: ``test_an_index_out_of_range_is_an_error_at_run_time``)."""
    return tensors(shape, torch.int64, low=low, high=high, edge_values=False)


@st.composite
def advanced_indices(draw, shape, allow_bool=True):
    """A tuple of index entries for ``shape``: slices (``None`` in aten) and index tensors."""
    rank = len(shape)
    count = draw(st.integers(1, rank))
    chosen = sorted(draw(st.lists(st.integers(0, rank - 1), min_size=count, max_size=count, unique=True)))
    broadcast = draw(shapes(min_rank=1, max_rank=2, max_side=3))
    if allow_bool and count == 1 and draw(st.booleans()):
        d = chosen[0]
        span = draw(st.integers(1, rank - d))
        mask = draw(tensors(tuple(shape[d : d + span]), torch.bool))
        return (slice(None),) * d + (mask,)
    entries = []
    for d in range(rank):
        if d in chosen:
            n = shape[d]
            sub = broadcast[draw(st.integers(0, len(broadcast) - 1)) :]
            entries.append(draw(indices(tuple(sub), -n, n - 1)))
        else:
            entries.append(slice(None))
    while entries and isinstance(entries[-1], slice):
        entries.pop()
    return tuple(entries)


@given(data=st.data(), x=tensors(shapes(min_rank=1, max_rank=4, max_side=4), DTYPES))
def test_index(data, x):
    index = data.draw(advanced_indices(tuple(x.shape)))
    tensors_ = [i for i in index if isinstance(i, torch.Tensor)]
    positions = [k for k, i in enumerate(index) if isinstance(i, torch.Tensor)]

    def fn(t, *idx):
        full = list(index)
        for k, i in zip(positions, idx):
            full[k] = i
        return t[tuple(full)]

    model = Fn2(lambda t, idx: fn(t, *idx))
    assert_exports_like_eager(model, (x, tensors_), expect_ops=["aten::index.Tensor"])


@given(x=tensors(shapes(min_rank=2, max_rank=3, max_side=4), DTYPES), data=st.data())
def test_unsafe_index(x, data):
    i = data.draw(indices((3,), 0, x.shape[1] - 1))
    model = Fn2(lambda t, idx: torch.ops.aten._unsafe_index(t, [None, idx]))
    assert_exports_like_eager(model, (x, i), expect_ops=["aten::_unsafe_index"])


def test_index_with_a_dynamic_number_of_indices():
    n = torch.export.Dim("n")
    model = Fn2(lambda t, i: t[:, i])
    x = torch.randn(3, 5)
    assert_exports_like_eager(
        model,
        (x, torch.tensor([0, 4, 2])),
        dynamic_shapes=({}, {0: n}),
        other_inputs=[((x, torch.tensor([1, -1, 1, 0, 3, 2])), {})],
        expect_ops=["aten::index.Tensor"],
    )


@given(data=st.data(), x=tensors(shapes(min_rank=1, max_rank=3, max_side=4), DTYPES), accumulate=st.booleans())
def test_index_put(data, x, accumulate):
    index = data.draw(advanced_indices(tuple(x.shape), allow_bool=True))
    idx = [i for i in index if isinstance(i, torch.Tensor)]
    positions = [k for k, i in enumerate(index) if isinstance(i, torch.Tensor)]
    if not accumulate and idx[0].dtype != torch.bool:
        # Without accumulate, torch leaves the result of duplicate indices undefined: make them unique.
        sizes = [x.shape[k] for k in positions]
        flat = data.draw(st.permutations(range(int(torch.tensor(sizes).prod()))))
        count = data.draw(st.integers(1, len(flat)))
        coords = torch.tensor(flat[:count])
        idx, rest = [], coords
        for s in reversed(sizes):
            idx.insert(0, rest % s)
            rest = rest // s
    full = list(index)
    for k, i in zip(positions, idx):
        full[k] = i
    target = x[tuple(full)].shape
    values = data.draw(tensors(target[data.draw(st.integers(0, len(target))) :], x.dtype))

    aten_indices = [None] * (max(positions) + 1)
    for k, i in zip(positions, idx):
        aten_indices[k] = i
    model = Fn3(lambda t, v, i: torch.ops.aten.index_put(t, [*i], v, accumulate))
    assert_exports_like_eager(model, (x, values, aten_indices), expect_ops=["aten::index_put"])


@given(dtype=st.sampled_from([torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.int64]))
def test_index_put_accumulates_duplicates(dtype):
    model = Fn3(
        lambda t, v, i: (
            torch.ops.aten.index_put(t, [None, i], v, True),
            torch.ops.aten._unsafe_index_put(t, [i], v[:1], True),
        )
    )
    x, v, i = torch.zeros(4, 4, dtype=dtype), torch.ones(4, 4, dtype=dtype), torch.tensor([1, 1, 3, 1])
    assert_exports_like_eager(model, (x, v, i), expect_ops=["aten::index_put", "aten::_unsafe_index_put"])


def test_setitem_with_a_mask_at_opset_14():
    def fn(t):
        t = t.clone()
        t[t > 0] = 0.5
        return t

    assert_exports_like_eager(Fn(fn), (torch.randn(3, 4),), opset=14, expect_ops=["aten::index_put"])


@given(data=st.data(), x=tensors(shapes(max_rank=3, max_side=4), DTYPES))
def test_index_select(data, x):
    d = data.draw(dims(x.dim()))
    n = x.shape[d] if x.dim() else 1
    index_shapes = [(), (0,), (1,), (5,)] if x.dim() else [(), (1,)]
    i = data.draw(indices(data.draw(st.sampled_from(index_shapes)), 0, n - 1))
    assert_exports_like_eager(Fn2(lambda t, i: t.index_select(d, i)), (x, i), expect_ops=["aten::index_select"])


@given(data=st.data(), x=tensors(shapes(max_rank=4, max_side=4), DTYPES))
def test_gather(data, x):
    d = data.draw(dims(x.dim()))
    # torch lets the index be smaller than self on every dim.
    shape = tuple(data.draw(st.integers(0, n)) for n in x.shape)
    n = x.shape[d] if x.dim() else 1
    i = data.draw(indices(shape, 0, n - 1))
    assert_exports_like_eager(Fn2(lambda t, i: t.gather(d, i)), (x, i), expect_ops=["aten::gather"])


def test_gather_by_empty_narrow_or_0d_shaped_indices():
    # Thorough OpInfo: torch accepts an empty index of any integer dtype; GatherElements takes int32/int64.
    x, index = torch.tensor([-8, 6, 9], dtype=torch.int8), torch.tensor([], dtype=torch.uint8)
    assert_exports_like_eager(Fn2(lambda t, i: t.gather(0, i)), (x, index), expect_ops=["aten::gather"])
    # A 0-d input gathered by a 1-d index of one element: the result has the index's shape.
    assert_exports_like_eager(Fn2(lambda t, i: t.gather(0, i)), (torch.tensor(2.5), torch.tensor([0])), dynamic=False)
    # ... and of another rank than the input's (2, 0), which torch checks only for non-empty indices.
    index = torch.zeros(2, 0, dtype=torch.int64)
    assert_exports_like_eager(Fn2(lambda t, i: t.gather(0, i)), (x, index), expect_ops=["aten::gather"])


@given(
    data=st.data(),
    w=tensors(shapes(min_rank=2, max_rank=2, max_side=5), st.sampled_from([torch.float32, torch.float16])),
)
def test_embedding(data, w):
    ids = data.draw(indices(shapes(max_rank=3, max_side=3), 0, w.shape[0] - 1))
    model = Fn2(lambda i, weight: torch.nn.functional.embedding(i, weight, padding_idx=0))
    assert_exports_like_eager(model, (ids, w), expect_ops=["aten::embedding"])


@given(
    data=st.data(),
    w=tensors(shapes(min_rank=2, max_rank=2, max_side=5), st.sampled_from(FLOAT_DTYPES)),
    max_norm=st.floats(0.1, 4.0),
    norm_type=st.sampled_from([1.0, 2.0, 3.5, float("inf")]),
)
def test_embedding_max_norm_renorms_the_rows_it_reads(data, w, max_norm, norm_type):
    ids = data.draw(indices(shapes(max_rank=2, max_side=4), 0, w.shape[0] - 1))
    model = Fn2(lambda i, weight: torch.nn.functional.embedding(i, weight, max_norm=max_norm, norm_type=norm_type))
    assert_exports_like_eager(model, (ids, w), expect_ops=["aten::embedding_renorm"])


@pytest.mark.parametrize("norm_type", [1.0, 2.0, 3.5, float("inf")])
def test_embedding_max_norm_leaves_a_row_holding_nan_as_it_is(norm_type):
    # torch's norm of such a row is NaN, which exceeds no max_norm; onnxruntime's ReduceMax
    # skips NaN (the inf-norm renormed the row by its finite values; found by the thorough profile).
    w = torch.tensor([[2.8203, 1.2469, float("nan"), float("nan"), 0.8701], [3.0, -4.0, 0.5, 0.0, 1.0]])
    model = Fn2(lambda i, weight: torch.nn.functional.embedding(i, weight, max_norm=1.0, norm_type=norm_type))
    assert_exports_like_eager(model, (torch.tensor([0, 1]), w), expect_ops=["aten::embedding_renorm"])


def test_embedding_max_norm_of_a_module_updates_its_weight_as_an_output():
    # nn.Embedding(max_norm=...) renorms its own weight in place: a parameter mutation,
    # which becomes the output ``<parameter>.updated`` as a mutated buffer does.
    torch.manual_seed(0)
    table = torch.nn.Embedding(6, 3, max_norm=0.5)
    ids = torch.tensor([[0, 2], [2, 5]])
    expected_weight = table.weight.detach().clone()
    torch.nn.functional.embedding(ids, expected_weight, max_norm=0.5)
    result = pt2onnx.export(table, (ids,))
    assert result.output_names[-1] == "weight.updated"
    out, weight = result.session().run(None, {result.input_names[0]: ids.numpy()})
    torch.testing.assert_close(torch.from_numpy(weight), expected_weight)
    torch.testing.assert_close(torch.from_numpy(out), table(ids).detach())


@given(
    data=st.data(),
    x=tensors(shapes(min_rank=1, max_rank=3, max_side=4), DTYPES),
    repeats_dtype=st.sampled_from([torch.int64, torch.int32]),
)
def test_repeat_interleave_by_a_tensor_of_repeats(data, x, repeats_dtype):
    # Repeats are counts: no negative ones (torch refuses them), zeros included.
    dim = data.draw(st.integers(0, x.dim() - 1))
    repeats = data.draw(tensors((x.shape[dim],), repeats_dtype, low=0, high=3, edge_values=False))
    model = Fn2(lambda t, r: t.repeat_interleave(r, dim=dim))
    assert_exports_like_eager(model, (x, repeats), expect_ops=["aten::repeat_interleave.Tensor"])


def test_repeat_interleave_of_repeats_alone_counts_out_the_indices():
    repeats = torch.tensor([1, 0, 3, 0], dtype=torch.int32)
    assert_exports_like_eager(Fn(torch.repeat_interleave), (repeats,), expect_ops=["aten::repeat_interleave.Tensor"])


@given(x=tensors(shapes(max_rank=4, min_side=0, max_side=3), DTYPES, low=-1, high=1))
def test_nonzero(x):
    assert_exports_like_eager(Fn(torch.nonzero), (x,), expect_ops=["aten::nonzero"])


OUT_OF_RANGE = {
    "index_select": lambda t, i: t.index_select(0, i),
    "gather": lambda t, i: t.gather(0, i.reshape(1, 1).expand(1, 4)),
    "embedding": lambda t, i: torch.nn.functional.embedding(i, t),
    "index": lambda t, i: t[i],
    "index_put": lambda t, i: t.index_put([i], torch.tensor(1.0)),
    "scatter": lambda t, i: t.scatter(0, i.reshape(1, 1).expand(1, 4), 1.0),
    "scatter_add": lambda t, i: t.scatter_add(0, i.reshape(1, 1).expand(1, 4), t),
}


@pytest.mark.parametrize("name", sorted(OUT_OF_RANGE))
@pytest.mark.parametrize("bad", [3, -4, 2**62, -(2**63)])
def test_an_index_out_of_range_is_an_error_at_run_time(name, bad):
    # torch raises for an index outside [-n, n): the exported model never reads past the
    # data silently, onnxruntime's Gather/Scatter kernels stop with an error. (A negative
    # index in [-n, 0) counts from the end in ONNX; gather, index_select, embedding and
    # scatter raise for it in torch, so the model reads what torch refuses to.)
    model = Fn2(OUT_OF_RANGE[name])
    x, good = torch.randn(3, 4), torch.tensor([1])
    result = assert_exports_like_eager(model, (x, good))
    with pytest.raises((IndexError, RuntimeError)):
        model(x, torch.tensor([bad]))
    ort_errors = (
        onnxruntime.capi.onnxruntime_pybind11_state.Fail,
        onnxruntime.capi.onnxruntime_pybind11_state.InvalidArgument,
    )
    with pytest.raises(ort_errors, match=r"(?i)out of range|out of data bounds|invalid ind"):
        result.run(x, torch.tensor([bad]))


def test_index_put_accumulating_needs_opset_16():
    x, values, index = torch.zeros(4), torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0, 0, 2])
    model = Fn3(lambda t, v, i: torch.ops.aten.index_put(t, [i], v, True))
    assert_exports_like_eager(model, (x, values, index), opset=16, expect_ops=["aten::index_put"])
    with pytest.raises(UnsupportedArgumentError, match=r"ScatterND adds duplicates up from opset 16 \(target: 15\)"):
        pt2onnx.export(model, (x, values, index), opset=15)
