"""cdist/pdist for every p, and native_dropout, against eager."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lambda_modules import Variadic as Call
from pt2onnx.errors import UnsupportedArgumentError
from pt2onnx.testing import assert_exports_like_eager, dtypes, tensors

P = st.sampled_from([0.0, 1.0, 2.0, 3.0, 0.5, float("inf")])
# No dtype extremes: a distance at the overflow threshold rounds to inf or to the largest
# float depending on the formula (torch's own pdist and cdist disagree there).
DRAW = {"edge_values": ("nan", "inf", "zero", "subnormal")}


@given(data=st.data(), p=P, dtype=dtypes(("float32", "float64")), core=st.booleans())
def test_cdist(data, p, dtype, core):
    batch = [data.draw(st.integers(1, 2)) for _ in range(data.draw(st.integers(0, 2)))]
    m = data.draw(st.integers(1, 4))
    x1 = data.draw(tensors((*batch, data.draw(st.integers(1, 5)), m), dtype, **DRAW))
    x2 = data.draw(tensors((*batch, data.draw(st.integers(1, 5)), m), dtype, **DRAW))
    if core:
        model, expect = Call(lambda a, b: torch.ops.aten._cdist_forward(a, b, p, None)), "aten::_cdist_forward"
    else:
        model, expect = Call(lambda a, b: torch.cdist(a, b, p)), "aten::cdist"
    assert_exports_like_eager(model, (x1, x2), expect_ops=[expect])


@given(data=st.data(), p=P, dtype=dtypes(("float32", "float64")), core=st.booleans())
def test_pdist(data, p, dtype, core):
    # torch's _pdist_forward takes a contiguous input only (pdist makes it one).
    shape = (data.draw(st.integers(2, 5)), data.draw(st.integers(1, 4)))
    x = data.draw(tensors(shape, dtype, **DRAW, contiguous=core or None))
    if core:
        model, expect = Call(lambda x: torch.ops.aten._pdist_forward(x, p)), "aten::_pdist_forward"
    else:
        model, expect = Call(lambda x: torch.pdist(x, p)), "aten::pdist"
    assert_exports_like_eager(
        model,
        (x,),
        dynamic_shapes=(({0: torch.export.Dim("n")},),),
        other_inputs=[((torch.cat([x, x[:1] + 1]),), {})],
        expect_ops=[expect],
    )


@given(x=tensors(dtype=dtypes()), p=st.sampled_from([0.0, 0.3, 1.0]), train=st.sampled_from([False, True]))
def test_native_dropout(x, p, train):
    model = Call(lambda x: torch.ops.aten.native_dropout(x, p, train))
    if train and 0 < p < 1:
        with pytest.raises(UnsupportedArgumentError, match="random"):
            assert_exports_like_eager(model, (x,))
        return
    assert_exports_like_eager(model, (x,), expect_ops=["aten::native_dropout"])


def test_distances_at_opset_14():
    model = Call(lambda a, b: (torch.cdist(a, b, 3.0), torch.pdist(a[0]), torch.ops.aten.native_dropout(a, 0.2, False)))
    assert_exports_like_eager(model, (torch.randn(2, 4, 3), torch.randn(2, 5, 3)), opset=14)
