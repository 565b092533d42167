"""OpenVINO issues docs/control_flow.md lists under "Known runtime issues", reproduced on minimal ONNX models.

Each test asserts that OpenVINO still gets the model wrong (while onnxruntime matches a
numpy reference) and that the documented workaround runs right in both runtimes: when an
OpenVINO release fixes the issue, the test fails and says which entry to remove.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
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
        'known-issue entry in docs/control_flow.md ("Known runtime issues") and this test'
    )


@pytest.mark.parametrize("form", ["scan, state first", "loop"])
def test_the_equivalent_forms_run_right_in_both_runtimes(form):
    model = _scan("s", "x_t") if form == "scan, state first" else _loop()
    on_ort, on_openvino = _diffs(model)
    assert on_ort < 1e-6
    assert on_openvino < 1e-6
