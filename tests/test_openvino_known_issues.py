"""The OpenVINO issues of docs/runtime_issues.md, reproduced on minimal ONNX models.

Each test asserts that OpenVINO still gets the model wrong (while onnxruntime matches a
numpy reference) and that the documented workaround runs right in both runtimes: when an
OpenVINO release fixes the issue, the test fails and says which entry to remove.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

ort = pytest.importorskip("onnxruntime")
openvino = pytest.importorskip("openvino")

_FLOAT = TensorProto.FLOAT
_X = np.linspace(0.5, 1.5, 15, dtype=np.float32).reshape(5, 3)
_S0 = np.ones(3, np.float32)
#: The state after the scan, and after each step: the running product of x's rows.
_EXPECTED = np.cumprod(_X, axis=0)


def _value(name: str, shape: list[int], elem_type: int = _FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, shape)


def _scan(first: str, second: str) -> onnx.ModelProto:
    """``s <- Mul(first, second)`` over the rows of ``x`` (one state ``s``, one scan input ``x_t``), as a ``Scan``."""
    body = helper.make_graph(
        [helper.make_node("Mul", [first, second], ["s_next"]), helper.make_node("Identity", ["s_next"], ["y"])],
        "body",
        [_value("s", [3]), _value("x_t", [3])],
        [_value("s_next", [3]), _value("y", [3])],
    )
    scan = helper.make_node("Scan", ["s0", "x"], ["s_last", "ys"], body=body, num_scan_inputs=1)
    graph = helper.make_graph(
        [scan], "scan", [_value("s0", [3]), _value("x", [5, 3])], [_value("s_last", [3]), _value("ys", [5, 3])]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def _loop() -> onnx.ModelProto:
    """The same recurrence, ``Mul(x_t, s)`` included, as a ``Loop`` that gathers row ``i`` of ``x``."""
    body = helper.make_graph(
        [
            helper.make_node("Gather", ["x", "i"], ["x_t"], axis=0),
            helper.make_node("Mul", ["x_t", "s"], ["s_next"]),
            helper.make_node("Identity", ["cond"], ["cond_next"]),
            helper.make_node("Identity", ["s_next"], ["y"]),
        ],
        "body",
        [_value("i", [], TensorProto.INT64), _value("cond", [], TensorProto.BOOL), _value("s", [3])],
        [_value("cond_next", [], TensorProto.BOOL), _value("s_next", [3]), _value("y", [3])],
    )
    trip_count = helper.make_tensor("n", TensorProto.INT64, [], [5])
    loop = helper.make_node("Loop", ["n", "", "s0"], ["s_last", "ys"], body=body)
    graph = helper.make_graph(
        [loop],
        "loop",
        [_value("s0", [3]), _value("x", [5, 3])],
        [_value("s_last", [3]), _value("ys", [5, 3])],
        initializer=[trip_count],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def _diffs(model: onnx.ModelProto) -> tuple[float, float]:
    """Max abs difference from the reference of onnxruntime's and of OpenVINO's (CPU, f32) outputs."""
    onnx.checker.check_model(model, full_check=True)
    feeds = {"s0": _S0, "x": _X}
    got_ort = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        ["s_last", "ys"], feeds
    )
    core = openvino.Core()
    compiled = core.compile_model(
        core.read_model(model.SerializeToString()), "CPU", {"INFERENCE_PRECISION_HINT": "f32"}
    )
    results = compiled(feeds)
    got_ov = [results[compiled.output(name)] for name in ("s_last", "ys")]
    expected = [_EXPECTED[-1], _EXPECTED]

    def worst(got: list[np.ndarray]) -> float:
        return max(float(np.abs(g - e).max()) for g, e in zip(got, expected, strict=True))

    return worst(got_ort), worst(got_ov)


def test_openvino_scan_with_the_state_second_in_a_commutative_op_is_wrong():
    # OpenVINO 2026.4 (CPU): a Scan body whose Mul (or Add) takes the scan input first and
    # the state second reads the current scan input for the state: the state becomes
    # x_t * x_t. Reached by every Mamba that pt2onnx exports (a * state + b in the
    # selective scan), with eager-vs-OpenVINO differences up to ~5.
    on_ort, on_openvino = _diffs(_scan("x_t", "s"))
    assert on_ort < 1e-6
    assert on_openvino > 1e-2, (
        f"OpenVINO {openvino.get_version()} fixed the Scan issue (max diff {on_openvino:.2e}): remove the "
        "entry in docs/runtime_issues.md and this test"
    )


@pytest.mark.parametrize("form", ["scan, state first", "loop"])
def test_the_equivalent_forms_run_right_in_both_runtimes(form):
    model = _scan("s", "x_t") if form == "scan, state first" else _loop()
    on_ort, on_openvino = _diffs(model)
    assert on_ort < 1e-6
    assert on_openvino < 1e-6


def _resize(antialias: int) -> onnx.ModelProto:
    """(1, 1, 8, 8) to (1, 1, 4, 4) by a linear, half-pixel ``Resize``: torch's antialiased bilinear with ``antialias=1``."""
    node = helper.make_node(
        "Resize", ["x", "", "", "sizes"], ["y"], mode="linear", antialias=antialias, exclude_outside=antialias
    )
    sizes = helper.make_tensor("sizes", TensorProto.INT64, [4], [1, 1, 4, 4])
    graph = helper.make_graph([node], "resize", [_value("x", [1, 1, 8, 8])], [_value("y", [1, 1, 4, 4])], [sizes])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _matmuls() -> onnx.ModelProto:
    """The same resize as ``rows @ x @ rows.T``, pt2onnx's form for static sizes."""
    eye = torch.eye(8, dtype=torch.float64).reshape(8, 1, 8, 1).expand(-1, -1, -1, 2).contiguous()
    rows = torch.nn.functional.interpolate(eye, size=(4, 2), mode="bilinear", antialias=True)[:, 0, :, 0].T
    rows_np = rows.numpy().astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "columns"], ["t"]), helper.make_node("MatMul", ["rows", "t"], ["y"])]
    weights = [
        helper.make_tensor("rows", TensorProto.FLOAT, rows_np.shape, rows_np.flatten()),
        helper.make_tensor("columns", TensorProto.FLOAT, rows_np.T.shape, np.ascontiguousarray(rows_np.T).flatten()),
    ]
    graph = helper.make_graph(nodes, "resize", [_value("x", [1, 1, 8, 8])], [_value("y", [1, 1, 4, 4])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


_IMAGE = np.random.default_rng(0).standard_normal((1, 1, 8, 8)).astype(np.float32)


def _resize_diffs(model: onnx.ModelProto) -> tuple[float, float]:
    """Max abs difference from torch's antialiased bilinear of onnxruntime's and of OpenVINO's (CPU, f32) result."""
    onnx.checker.check_model(model, full_check=True)
    expected = torch.nn.functional.interpolate(torch.from_numpy(_IMAGE), size=(4, 4), mode="bilinear", antialias=True)
    got_ort = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": _IMAGE}
    )[0]
    core = openvino.Core()
    compiled = core.compile_model(
        core.read_model(model.SerializeToString(), b""), "CPU", {"INFERENCE_PRECISION_HINT": "f32"}
    )
    got_ov = compiled({"x": _IMAGE})[compiled.output(0)]
    return float(np.abs(got_ort - expected.numpy()).max()), float(np.abs(got_ov - expected.numpy()).max())


def test_openvino_resize_ignores_antialias():
    # OpenVINO 2026.4 (CPU) computes Resize(antialias=1) as the plain Resize: 0.63 off here.
    on_ort, on_openvino = _resize_diffs(_resize(antialias=1))
    assert on_ort < 1e-6
    plain_ort, plain_openvino = _resize_diffs(_resize(antialias=0))
    assert on_openvino > 1e-2, (
        f"OpenVINO {openvino.get_version()} fixed Resize's antialias (max diff {on_openvino:.2e}): remove its "
        "entry in docs/runtime_issues.md, this test, and the MatMul form of pt2onnx_aten.resampling.upsample_antialiased"
        " if it is no longer needed"
    )
    assert on_openvino == plain_openvino  # the attribute is ignored, not computed otherwise
    assert plain_ort > 1e-2


def test_the_antialiased_resize_as_matmuls_runs_right_in_both_runtimes():
    on_ort, on_openvino = _resize_diffs(_matmuls())
    assert on_ort < 1e-6
    assert on_openvino < 1e-6


def _shape_of_an_empty_constant() -> onnx.ModelProto:
    """``Shape`` of a [0, 4] initializer: onnxruntime says [0, 4]."""
    empty = onnx.numpy_helper.from_array(np.zeros((0, 4), np.float32), "empty")
    graph = helper.make_graph(
        [helper.make_node("Shape", ["empty"], ["shape"]), helper.make_node("Add", ["x", "shape"], ["y"])],
        "empty_constant",
        [_value("x", [2], TensorProto.INT64)],
        [_value("y", [2], TensorProto.INT64)],
        initializer=[empty],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def test_openvino_reads_an_empty_constant_as_a_scalar():
    model = _shape_of_an_empty_constant()
    onnx.checker.check_model(model, full_check=True)
    x = np.zeros(2, np.int64)
    got_ort = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert got_ort[0].tolist() == [0, 4]
    core = openvino.Core()
    with pytest.raises(RuntimeError, match="Add"):
        # Shape gives [] (a scalar has no dims), which no longer adds to x's 2 elements.
        compiled = core.compile_model(core.read_model(model.SerializeToString()), "CPU")
        got = compiled({"x": x})[compiled.output(0)]
        pytest.fail(
            f"OpenVINO {openvino.get_version()} reads an empty constant with its shape ({got.tolist()}): remove its "
            "entry in docs/runtime_issues.md and this test; the empty-write branch of "
            "pt2onnx_aten.scatter.slice_scatter stays, as it emits less"
        )


def test_a_write_of_nothing_carries_no_empty_constant_and_runs_in_openvino(tmp_path):
    import pt2onnx

    class EmptyRegions(torch.nn.Module):
        # Swin3D's shifted-window mask: regions written one by one, some of them empty.
        def forward(self, x):
            mask = torch.zeros(x.shape[0], 4, 4)
            for n, (a, b) in enumerate([(0, 2), (2, 2), (2, None)]):
                mask[a:b, 1:, :] = n
            return x + mask

    # Before, the empty write [2:2] became a ScatterElements of two [0, 3, 4] constants, which
    # OpenVINO refused: "Indices rank and data rank are required to be equal. Got: 0 and: 3".
    x = torch.randn(5, 4, 4)
    result = pt2onnx.export(EmptyRegions(), (x,), dynamic_shapes="auto")
    assert not [i for i in result.model_proto.graph.initializer if 0 in i.dims]
    path = tmp_path / "m.onnx"
    result.save(path)
    core = openvino.Core()
    compiled = core.compile_model(core.read_model(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    for sample in (x, torch.randn(7, 4, 4)):
        expected = EmptyRegions()(sample).numpy()
        assert np.abs(compiled({"x": sample.numpy()})[compiled.output(0)] - expected).max() == 0
        assert result.verify(sample).ok


def _mul_conv(pads: int) -> onnx.ModelProto:
    """``Conv(x * scale, w)``: ``x`` 3x3, ``scale`` one factor per column, a 3x3 kernel."""
    rng = np.random.default_rng(0)
    scale = onnx.numpy_helper.from_array(np.array([1.0, 2.0, 4.0], np.float32), "scale")
    weights = onnx.numpy_helper.from_array(rng.standard_normal((1, 1, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "scale"], ["scaled"]),
            helper.make_node("Conv", ["scaled", "w"], ["y"], pads=[pads] * 4),
        ],
        "mul_conv",
        [_value("x", [1, 1, 3, 3])],
        [_value("y", [1, 1, 3 - 2 + 2 * pads, 3 - 2 + 2 * pads])],
        initializer=[scale, weights],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def _mul_conv_diffs(model: onnx.ModelProto) -> tuple[float, float]:
    """onnxruntime's and OpenVINO's max abs difference from torch's ``conv2d(x * scale, w)``."""
    onnx.checker.check_model(model, full_check=True)
    x = np.random.default_rng(1).standard_normal((1, 1, 3, 3)).astype(np.float32)
    scale, weights = (onnx.numpy_helper.to_array(i) for i in model.graph.initializer)
    pads = model.graph.node[1].attribute[0].ints[0]
    expected = torch.nn.functional.conv2d(torch.from_numpy(x * scale), torch.from_numpy(weights), padding=pads).numpy()
    got_ort = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    core = openvino.Core()
    compiled = core.compile_model(
        core.read_model(model.SerializeToString(), b""), "CPU", {"INFERENCE_PRECISION_HINT": "f32"}
    )
    got_ov = compiled({"x": x})[compiled.output(0)]
    return float(np.abs(got_ort[0] - expected).max()), float(np.abs(got_ov - expected).max())


def test_openvino_folds_a_per_pixel_multiply_into_the_conv_after_it():
    on_ort, on_openvino = _mul_conv_diffs(_mul_conv(pads=1))
    assert on_ort < 1e-5
    assert on_openvino > 0.5, (
        f"OpenVINO {openvino.get_version()} no longer folds a per-pixel Multiply into a Conv's weights (max diff "
        f"{on_openvino:.2e}): remove its entry in docs/runtime_issues.md and this test; the division before the sum "
        "in pt2onnx_aten.pooling._adaptive_mean can stay"
    )
    # Unpadded, the 3x3 kernel covers the 3x3 map once, so per tap is per pixel: folding is right.
    assert max(_mul_conv_diffs(_mul_conv(pads=0))) < 1e-5


class _PoolThenConv(torch.nn.Module):
    """CSATv2's spatial attention: an adaptive pool that upsamples 4x4 to 7x7, then a 7x7 Conv padded by 3."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 1, 7, padding=3)

    def forward(self, x):
        return self.conv(torch.nn.functional.adaptive_avg_pool2d(x, 7))


def test_an_upsampling_adaptive_pool_before_a_conv_runs_right_in_openvino(tmp_path):
    import pt2onnx

    torch.manual_seed(0)
    model, x = _PoolThenConv().eval(), torch.randn(2, 2, 4, 4)
    path = tmp_path / "m.onnx"
    pt2onnx.export(model, (x,)).save(path)
    core = openvino.Core()
    compiled = core.compile_model(core.read_model(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    with torch.no_grad():
        expected = model(x).numpy()
    assert np.abs(compiled({"x": x.numpy()})[compiled.output(0)] - expected).max() < 1e-5
    got_ort = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x.numpy()})[0]
    assert np.abs(got_ort - expected).max() < 1e-5


class _PositionTable(torch.nn.Module):
    """timm's ViTs at any image size: a 6x6 position table resized (bicubic, antialiased) to the patch grid."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(1, 4, 6, 6))

    def forward(self, x):
        grid = torch.nn.functional.interpolate(
            self.table, size=(x.shape[-2], x.shape[-1]), mode="bicubic", antialias=True
        )
        return x + grid


def test_a_table_resized_to_dynamic_sizes_runs_right_in_openvino(tmp_path):
    import pt2onnx

    torch.manual_seed(0)
    model = _PositionTable().eval()
    path = tmp_path / "m.onnx"
    pt2onnx.export(model, (torch.randn(1, 4, 4, 5),), dynamic_shapes="auto").save(path)
    core = openvino.Core()
    compiled = core.compile_model(core.read_model(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    for size in [(4, 5), (3, 9), (12, 12)]:  # down, up and both: each a weight matrix of its own
        x = torch.randn(1, 4, *size)
        with torch.no_grad():
            expected = model(x).numpy()
        assert np.abs(compiled({"x": x.numpy()})[compiled.output(0)] - expected).max() < 1e-5


def _long_kernel() -> onnx.ModelProto:
    """A 4x4 average pooling, ceil_mode, over a 3x3 input: one window, clipped to the input."""
    pool = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[4, 4], strides=[4, 4], ceil_mode=1)
    graph = helper.make_graph([pool], "long_kernel", [_value("x", [1, 1, 3, 3])], [_value("y", [1, 1, 1, 1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def test_openvino_refuses_a_pooling_kernel_longer_than_its_input(tmp_path):
    import pt2onnx

    model = _long_kernel()
    onnx.checker.check_model(model, full_check=True)
    x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    got_ort = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert got_ort[0].item() == 4.0
    core = openvino.Core()
    with pytest.raises(RuntimeError, match="larger than the data shape"):
        core.compile_model(core.read_model(model.SerializeToString(), b""), "CPU")
        pytest.fail(
            f"OpenVINO {openvino.get_version()} takes a pooling kernel longer than its input: remove its entry in "
            "docs/runtime_issues.md, this test, the cut kernel of pt2onnx_aten.pooling._within_input and the "
            "mean of pt2onnx_aten.pooling._whole_or_windows"
        )
    # The workaround: pt2onnx cuts the kernel of a static input to the input.
    pooler = torch.nn.AvgPool2d(4, ceil_mode=True)
    path = tmp_path / "m.onnx"
    pt2onnx.export(pooler, (torch.from_numpy(x),)).save(path)
    compiled = core.compile_model(core.read_model(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    assert compiled([x])[compiled.output(0)].item() == 4.0


def test_a_dynamic_map_shorter_than_its_pooling_kernel_runs_right_in_openvino(tmp_path):
    # ALIGN's pooler, AvgPool2d(2560, ceil_mode=True), with the map dynamic: the program also
    # takes maps longer than the kernel, so the kernel cannot be cut; where the map fits in
    # it, the mean is taken instead of the AveragePool OpenVINO refuses.
    import pt2onnx

    pooler = torch.nn.AvgPool2d(64, ceil_mode=True)
    path = tmp_path / "m.onnx"
    pt2onnx.export(pooler, (torch.randn(2, 3, 18, 18),), dynamic_shapes="auto").save(path)
    core = openvino.Core()
    compiled = core.compile_model(core.read_model(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    for size in [(18, 18), (30, 7), (64, 64), (65, 130), (200, 70)]:
        x = torch.randn(2, 3, *size)
        got = compiled([x.numpy()])[compiled.output(0)]
        torch.testing.assert_close(torch.from_numpy(got), pooler(x), atol=1e-6, rtol=1e-5)


def _dft(axis: int) -> onnx.ModelProto:
    """Opset 20's ``DFT`` of real signals (2, 5, 8, 1) along ``axis``, as an input."""
    graph = helper.make_graph(
        [helper.make_node("DFT", ["x", "", "axis"], ["y"], onesided=0)],
        "dft",
        [_value("x", [2, 5, 8, 1])],
        [_value("y", [2, 5, 8, 2])],
        initializer=[onnx.numpy_helper.from_array(np.array(axis, np.int64), "axis")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def test_openvino_dft_transforms_axis_1_whatever_its_axis_input():
    x = np.random.default_rng(0).standard_normal((2, 5, 8, 1)).astype(np.float32)
    core = openvino.Core()
    for axis in (1, 2):
        model = _dft(axis)
        onnx.checker.check_model(model, full_check=True)
        expected = np.fft.fft(x[..., 0], axis=axis)
        got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
        assert np.abs(got[0][..., 0] + 1j * got[0][..., 1] - expected).max() < 1e-5
        compiled = core.compile_model(core.read_model(model.SerializeToString(), b""), "CPU")
        on_openvino = compiled({"x": x})[compiled.output(0)]
        wrong = np.abs(on_openvino[..., 0] + 1j * on_openvino[..., 1] - expected).max()
        if axis == 1:
            assert wrong < 1e-5
        else:
            assert wrong > 1, (
                f"OpenVINO {openvino.get_version()} transforms DFT's axis input (max diff {wrong:.2e}): remove its "
                "entry in docs/runtime_issues.md, this test, and the transposes of pt2onnx_aten.fft._dft"
            )


class _Ffts(torch.nn.Module):
    """FNet's token mixing (a 2-D FFT's real part), a 1-D FFT of the last dim, and a lone signal's."""

    def forward(self, x):
        lone = torch.fft.fft(x[0, 0]).real
        return torch.fft.fftn(x, dim=(1, 2)).real, torch.fft.rfft(x, dim=-1).imag, lone


def test_the_ffts_run_right_in_openvino(tmp_path):
    import pt2onnx

    x = torch.randn(2, 5, 8)
    path = tmp_path / "m.onnx"
    pt2onnx.export(_Ffts(), (x,)).save(path)
    core = openvino.Core()
    compiled = core.compile_model(core.read_model(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    results = compiled([x.numpy()])
    for output, expected in zip(compiled.outputs, _Ffts()(x), strict=True):
        assert np.abs(results[output] - expected.numpy()).max() < 1e-4


def _branch_reads_an_output(copied: bool = False) -> onnx.ModelProto:
    """``h = x * 2`` is a graph output; an ``If``'s branches pool it (its mean, or an AveragePool).

    ``copied``: the branches read ``Identity(h)`` instead, pt2onnx's workaround.
    """
    read = "h_copy" if copied else "h"
    axes = helper.make_tensor("axes", TensorProto.INT64, [2], [-2, -1])
    mean = helper.make_node("ReduceMean", [read, "axes"], ["m"], keepdims=1)
    pool = helper.make_node("AveragePool", [read], ["p"], kernel_shape=[4, 4], strides=[4, 4], ceil_mode=1)
    then_branch = helper.make_graph([mean], "mean", [], [_value("m", ["n", "c", 1, 1])], [axes])
    else_branch = helper.make_graph([pool], "windows", [], [_value("p", ["n", "c", "ph", "pw"])])
    copy = [helper.make_node("Identity", ["h"], ["h_copy"])] if copied else []
    graph = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "two"], ["h"]),
            *copy,
            helper.make_node("If", ["flag"], ["y"], then_branch=then_branch, else_branch=else_branch),
        ],
        "branch_reads_an_output",
        [_value("x", ["n", "c", "h", "w"]), _value("flag", [], TensorProto.BOOL)],
        [_value("h", ["n", "c", "h", "w"]), _value("y", ["n", "c", "yh", "yw"])],
        [helper.make_tensor("two", _FLOAT, [], [2.0])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def test_openvino_fails_an_if_whose_branch_reads_a_graph_output(tmp_path):
    import pt2onnx

    x = np.arange(2 * 3 * 5 * 6, dtype=np.float32).reshape(2, 3, 5, 6)
    core = openvino.Core()
    for copied in (False, True):
        model = _branch_reads_an_output(copied)
        onnx.checker.check_model(model, full_check=True)
        onnx.save(model, tmp_path / "if.onnx")
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(
            session.run(None, {"x": x, "flag": np.array(True)})[1], (2 * x).mean((2, 3), keepdims=True)
        )
        # Read from its bytes the model compiles; read from its file it does not.
        core.compile_model(core.read_model(model.SerializeToString(), b""), "CPU")
        if copied:
            compiled = core.compile_model(
                core.read_model(tmp_path / "if.onnx"), "CPU", {"INFERENCE_PRECISION_HINT": "f32"}
            )
            got = compiled([x, np.array(True)])[compiled.output(1)]
            np.testing.assert_allclose(got, (2 * x).mean((2, 3), keepdims=True), rtol=1e-6)
            continue
        with pytest.raises(RuntimeError, match="branches have to have the same number of outputs"):
            core.compile_model(core.read_model(tmp_path / "if.onnx"), "CPU")
            pytest.fail(
                f"OpenVINO {openvino.get_version()} takes an If whose branch reads a graph output: remove its entry "
                "in docs/runtime_issues.md, this test and pt2onnx.assemble.separate_outputs_from_subgraphs"
            )

    # pt2onnx's files: branches read an Identity copy of a graph output.
    class Pooled(torch.nn.Module):
        def forward(self, x):
            h = x * 2
            return h, torch.nn.functional.avg_pool2d(h, 64, ceil_mode=True)

    path = tmp_path / "m.onnx"
    pt2onnx.export(Pooled(), (torch.randn(2, 3, 18, 18),), dynamic_shapes="auto").save(path)
    compiled = core.compile_model(core.read_model(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    for size in [(18, 18), (65, 130)]:
        x = torch.randn(2, 3, *size)
        got = compiled([x.numpy()])[compiled.output(1)]
        torch.testing.assert_close(torch.from_numpy(got), Pooled()(x)[1], atol=1e-6, rtol=1e-5)
