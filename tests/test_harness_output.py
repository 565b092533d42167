"""What a failing test of a wrong converter prints: about the user's model, not the exporter's insides.

Issue #28 ("The harness's output"): a failing property test printed hundreds of empty
``DEBUG torch.__trace`` lines and tracebacks deep into translate's internals. Each case
runs a real pytest session in a subprocess, with pt2onnx's pytest plugin as installed.
"""

from __future__ import annotations

import textwrap

import pytest

pytest_plugins = ["pytester"]

HEADER = """
import logging

import torch
from hypothesis import Phase, given, settings

from pt2onnx.plugin import hookimpl
from pt2onnx.testing import assert_exports_like_eager, tensors


class Plugin:
    def __init__(self, **converters):
        self.converters = converters

    @hookimpl
    def pt2onnx_register_converters(self, register):
        for op, fn in self.converters.items():
            register.converter(op, fn)


def relu_plus_one(op, self):
    return op.Add(op.Relu(self), op.constant(1.0, op.dtype_of(self)))  # wrong: relu(x) + 1


def relu_with_a_typo(op, self):
    return op.Relu(slef)  # noqa: F821 - the converter's own bug


# As this repository's profiles: no explain phase (see conftest.py), a fixed search.
FEW = settings(max_examples=5, database=None, derandomize=True, phases=[Phase.generate, Phase.shrink])
"""

#: Where pt2onnx's own frames would show in a traceback.
INTERNALS = ("pt2onnx/testing/harness.py", "pt2onnx/export.py", "pt2onnx/translate.py", "pt2onnx/result.py")


def _run(pytester: pytest.Pytester, tests: str) -> str:
    pytester.makepyfile(test_wrong=HEADER + textwrap.dedent(tests))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    return result.stdout.str() + result.stderr.str()


def test_a_failing_property_test_says_what_differs_and_who_converted_it(pytester):
    output = _run(
        pytester,
        """
        @FEW
        @given(tensors(dtype=torch.float32))
        def test_relu(x):
            assert_exports_like_eager(torch.nn.ReLU(), (x,), plugins=[Plugin(**{"aten::relu.default": relu_plus_one})])
        """,
    )
    assert "torch.__trace" not in output
    assert "ONNX model differs from eager PyTorch:" in output
    assert "(the test's example)" in output
    assert "converted at opset" in output
    assert "aten::relu.default" in output and "test_wrong.Plugin [argument] (shadows aten [builtin])" in output
    # The failing line is the test's call; the rest of the report (timings, passes) is not repeated.
    assert "test_wrong.py:" in output and "assert_exports_like_eager(torch.nn.ReLU()" in output
    assert "optimization passes" not in output and "peak RSS" not in output
    for internal in INTERNALS:
        assert internal not in output, f"the traceback shows {internal}:\n{output}"


def test_a_converter_that_raises_shows_its_own_frame_and_not_the_exporters(pytester):
    output = _run(
        pytester,
        """
        def test_relu():
            assert_exports_like_eager(torch.nn.ReLU(), (torch.randn(3),), plugins=[Plugin(**{"aten::relu.default": relu_with_a_typo})])
        """,
    )
    assert "return op.Relu(slef)" in output and "NameError" in output
    assert (
        "ConversionError: [translate] converter test_wrong.relu_with_a_typo from plugin 'test_wrong.Plugin'" in output
    )
    assert "FX node: relu" in output and "op: aten::relu.default" in output
    for internal in INTERNALS:
        assert internal not in output, f"the traceback shows {internal}:\n{output}"


def test_the_tests_own_log_is_still_captured(pytester):
    output = _run(
        pytester,
        """
        def test_logs_then_fails():
            logging.getLogger("mylib").warning("the test's own warning")
            assert_exports_like_eager(torch.nn.ReLU(), (torch.randn(3),), plugins=[Plugin(**{"aten::relu.default": relu_plus_one})])
        """,
    )
    assert "Captured log call" in output and "the test's own warning" in output
    assert "torch.__trace" not in output
