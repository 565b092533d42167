"""Save: the streamed single file holds exactly what onnx_ir would write; failures leave nothing."""

from __future__ import annotations

import functools
import os

import ml_dtypes
import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from onnx_ir.tensor_adapters import TorchTensor

import pt2onnx
from models import MLP
from pt2onnx.errors import SaveError
from pt2onnx.save import save_model

TORCH_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int8, torch.bool]


def _model_holding(tensors: list[ir.TensorProtocol]) -> ir.Model:
    """A model whose outputs are its initializers, one Identity each."""
    values = [
        ir.Value(name=f"w{i}", shape=t.shape, type=ir.TensorType(t.dtype), const_value=t) for i, t in enumerate(tensors)
    ]
    outputs = []
    nodes = []
    for i, value in enumerate(values):
        node = ir.Node("", "Identity", [value], num_outputs=1)
        node.outputs[0].name = f"out{i}"
        node.outputs[0].shape = value.shape
        node.outputs[0].type = value.type
        nodes.append(node)
        outputs.append(node.outputs[0])
    graph = ir.Graph([], outputs, nodes=nodes, initializers=values, opset_imports={"": 21}, name="g")
    return ir.Model(graph, ir_version=10)


def _initializers(path: os.PathLike[str] | str) -> dict[str, np.ndarray]:
    proto = onnx.load(str(path))
    return {t.name: onnx.numpy_helper.to_array(t) for t in proto.graph.initializer}


def _tensor(draw: st.DrawFn) -> ir.TensorProtocol:
    dtype = draw(st.sampled_from(TORCH_DTYPES))
    shape = draw(st.lists(st.integers(0, 4), max_size=3))
    data = torch.randn(shape).mul(10).to(dtype)
    if draw(st.booleans()) and data.dim() >= 2:
        # Non-contiguous torch storage, as a transposed view of a weight would be.
        data = data.transpose(0, 1)
    kind = draw(st.sampled_from(["torch", "numpy", "lazy"]))
    if kind == "numpy" and dtype != torch.bfloat16:
        return ir.Tensor(data.numpy())
    if kind == "lazy":
        return ir.LazyTensor(
            functools.partial(TorchTensor, data), dtype=TorchTensor(data).dtype, shape=ir.Shape(data.shape)
        )
    return TorchTensor(data)


@given(st.lists(st.composite(_tensor)(), min_size=1, max_size=5))
def test_streamed_file_holds_what_onnx_ir_writes(tmp_path_factory, tensors):
    directory = tmp_path_factory.mktemp("save")
    model = _model_holding(tensors)
    save_model(model, directory / "streamed.onnx")
    ir.save(model, directory / "reference.onnx")
    onnx.checker.check_model(str(directory / "streamed.onnx"), full_check=True)
    got, expected = _initializers(directory / "streamed.onnx"), _initializers(directory / "reference.onnx")
    assert list(got) == list(expected)
    for name in expected:
        assert got[name].dtype == expected[name].dtype and got[name].shape == expected[name].shape
        np.testing.assert_array_equal(got[name], expected[name])
    # The model object is left as it was: same initializers, in order.
    assert [v.name for v in model.graph.initializers.values()] == [f"w{i}" for i in range(len(tensors))]
    assert all(v.is_initializer() for v in model.graph.initializers.values())


def test_sub_byte_and_float8_tensors_are_packed_like_onnx_ir(tmp_path):
    tensors = [
        ir.Tensor(np.array([1, -2, 3, -8, 7], dtype=ml_dtypes.int4), dtype=ir.DataType.INT4),
        ir.Tensor(np.array([0.5, -1.0, 448.0], dtype=ml_dtypes.float8_e4m3fn)),
    ]
    model = _model_holding(tensors)
    save_model(model, tmp_path / "streamed.onnx")
    ir.save(model, tmp_path / "reference.onnx")
    got, expected = _initializers(tmp_path / "streamed.onnx"), _initializers(tmp_path / "reference.onnx")
    for name in expected:
        np.testing.assert_array_equal(got[name].astype(np.float32), expected[name].astype(np.float32))


def test_exported_model_saved_then_loaded_runs_like_eager(tmp_path):
    x = torch.randn(2, 8)
    model = MLP().eval()
    result = pt2onnx.export(model, (x,))
    result.save(tmp_path / "mlp.onnx")
    (got,) = ort.InferenceSession(str(tmp_path / "mlp.onnx")).run(None, {"x": x.numpy()})
    torch.testing.assert_close(torch.from_numpy(got), model(x).detach())
    result.save(tmp_path / "external.onnx", external_data=True)
    assert (tmp_path / "external.onnx.data").exists()
    (got,) = ort.InferenceSession(str(tmp_path / "external.onnx")).run(None, {"x": x.numpy()})
    torch.testing.assert_close(torch.from_numpy(got), model(x).detach())


def test_failed_streamed_save_leaves_no_partial_file(tmp_path, monkeypatch):
    result = pt2onnx.export(MLP().eval(), (torch.randn(2, 8),))
    calls = []

    def fails_on_second_weight(tensor):
        calls.append(tensor)
        if len(calls) == 2:
            raise OSError("disk full")
        return memoryview(tensor.tobytes())

    monkeypatch.setattr("pt2onnx.save._raw_bytes", fails_on_second_weight)
    with pytest.raises(SaveError, match="disk full"):
        result.save(tmp_path / "model.onnx")
    assert os.listdir(tmp_path) == []
    # The model is intact: saving again works.
    monkeypatch.undo()
    result.save(tmp_path / "model.onnx")
    assert set(_initializers(tmp_path / "model.onnx")) == set(result.model.graph.initializers)


def test_failed_external_data_save_leaves_no_partial_file(tmp_path, monkeypatch):
    result = pt2onnx.export(MLP().eval(), (torch.randn(2, 8),))

    def broken_save(model, path, external_data=None):
        (path.parent / external_data).write_bytes(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr("onnx_ir.save", broken_save)
    with pytest.raises(SaveError, match="disk full"):
        result.save(tmp_path / "model.onnx", external_data=True)
    assert os.listdir(tmp_path) == []
