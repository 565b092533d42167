"""``pytest --pt2onnx-prove PLUGIN``: a registration counts only when a passing test proved it.

Each case runs a real pytest session in a subprocess over a small pack and its tests.
"""

from __future__ import annotations

import textwrap

import pytest

pytest_plugins = ["pytester"]

PACK = '''
"""A pack converting relu and sigmoid, and rewriting nothing it is never shown."""
import sys

from pt2onnx.plugin import converter, hookimpl


@converter("aten::relu.default")
def relu(op, self):
    return op.Relu(self)


@converter("aten::sigmoid.default")
def sigmoid(op, self):
    return op.Sigmoid(self)


@hookimpl
def pt2onnx_register_converters(register):
    register.module(sys.modules[__name__])
'''

HEADER = """
import torch
import mypack
from pt2onnx.testing import assert_exports_like_eager
"""


@pytest.fixture
def session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    pytester.makepyfile(mypack=PACK)
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))

    def run(tests: str, *extra: str) -> pytest.RunResult:
        pytester.makepyfile(test_pack=HEADER + textwrap.dedent(tests))
        return pytester.runpytest_subprocess("--pt2onnx-prove", "mypack", "-p", "no:cacheprovider", *extra)

    return run


def test_a_test_that_converts_nothing_proves_nothing(session):
    result = session(
        """
        def test_declares_everything():
            assert mypack.relu and mypack.sigmoid
        """
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*2 registration(s) of plugin 'mypack' not proven by any passing test*",
            "*converter*aten::relu.default*mypack.relu*",
            "*converter*aten::sigmoid.default*mypack.sigmoid*",
        ]
    )


def test_the_builtin_converter_doing_the_work_proves_nothing_of_the_pack(session):
    result = session(
        """
        def test_relu_without_the_pack():
            assert_exports_like_eager(torch.nn.ReLU(), torch.randn(3, 4), expect_ops=["aten::relu"])

        def test_sigmoid_with_the_pack():
            assert_exports_like_eager(torch.nn.Sigmoid(), torch.randn(3, 4), plugins=[mypack])
        """
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*1 registration(s) of plugin 'mypack'*", "*aten::relu.default*mypack.relu*"])
    assert "mypack.sigmoid" not in result.stdout.str()


def test_a_failing_test_proves_nothing(session):
    result = session(
        """
        def test_relu():
            assert_exports_like_eager(torch.nn.ReLU(), torch.randn(3, 4), plugins=[mypack])
            raise AssertionError("something else in the test is wrong")

        def test_sigmoid():
            assert_exports_like_eager(torch.nn.Sigmoid(), torch.randn(3, 4), plugins=[mypack])
        """
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*1 registration(s) of plugin 'mypack'*", "*aten::relu.default*"])


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_every_registration_converted_in_a_passing_test_is_proven(session, workers):
    result = session(
        """
        def test_relu():
            assert_exports_like_eager(torch.nn.ReLU(), torch.randn(3, 4), plugins=[mypack])

        def test_sigmoid():
            assert_exports_like_eager(
                torch.nn.Sigmoid(), torch.randn(3, 4), plugins=[mypack], expect_ops={"aten::sigmoid": "mypack"}
            )
        """,
        *workers,
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["*every registration of plugin 'mypack' is proven by a passing test*"])


def test_expect_ops_names_the_plugin_that_must_convert(session):
    result = session(
        """
        def test_relu():
            assert_exports_like_eager(torch.nn.ReLU(), torch.randn(3, 4), expect_ops={"aten::relu": "mypack"})
        """
    )
    result.stdout.re_match_lines([r".*expected aten::relu to be converted by plugin 'mypack', but \['aten'\] did"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


WRONG_PACK = '''
"""Converters right only on the inputs a weak test shows them."""
import sys

from pt2onnx.plugin import converter, hookimpl


@converter("aten::relu.default")
def relu(op, self):
    return op.Identity(self)


@converter("aten::sigmoid.default")
def sigmoid(op, self):
    return op.Mul(self, op.constant(0.0, op.output_dtype))


@converter("aten::exp.default")
def exp(op, self):
    return op.Add(self, op.constant(1.0, op.output_dtype))


@converter("aten::tanh.default", tolerance=1e10)
def tanh(op, self):
    return op.Mul(self, op.constant(0.0, op.output_dtype))


@hookimpl
def pt2onnx_register_converters(register):
    register.module(sys.modules[__name__])
'''


def test_weak_proofs_prove_nothing(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """Each test passes on inputs or a tolerance that cannot tell the wrong converter from a
    right one; the proof fails and names why. A declared tolerance is honoured."""
    pytester.makepyfile(wrongpack=WRONG_PACK)
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    pytester.makepyfile(
        test_pack="""
        import torch
        import wrongpack
        from pt2onnx.testing import assert_exports_like_eager

        class Exp(torch.nn.Module):
            def forward(self, x):
                return x.exp()

        def test_relu_on_non_negative_values():
            assert_exports_like_eager(torch.nn.ReLU(), torch.rand(3, 4), plugins=[wrongpack])

        def test_sigmoid_at_a_tolerance_nothing_fails():
            assert_exports_like_eager(torch.nn.Sigmoid(), torch.randn(3, 4), plugins=[wrongpack], atol=1e9)

        def test_exp_on_zeros():
            assert_exports_like_eager(Exp(), torch.zeros(3, 4), plugins=[wrongpack])

        def test_tanh_at_the_tolerance_it_declares():
            assert_exports_like_eager(torch.nn.Tanh(), torch.randn(3, 4), plugins=[wrongpack], atol=1e4)
        """
    )
    result = pytester.runpytest_subprocess("--pt2onnx-prove", "wrongpack", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(["*4 passed*"])
    result.stdout.fnmatch_lines(
        [
            "*3 registration(s) of plugin 'wrongpack' not proven by any passing test*",
            "*converter*aten::exp.default*wrongpack.exp*",
            "*matched eager on the test's inputs but not on the witness*max abs difference*test_exp_on_zeros*",
            "*converter*aten::relu.default*wrongpack.relu*",
            "*matched eager on the test's inputs but not on the witness*test_relu_on_non_negative_values*",
            "*converter*aten::sigmoid.default*wrongpack.sigmoid*",
            "*matched eager only at a tolerance 1e+14x its dtype's default, above the 100x*tolerance=*",
        ]
    )
    assert "wrongpack.tanh" not in result.stdout.str()


def test_the_same_converters_are_proven_by_tests_that_can_tell(session):
    """The counterpart: right converters on the weak tests' inputs are proven, witness and all."""
    result = session(
        """
        def test_relu_on_non_negative_values():
            assert_exports_like_eager(torch.nn.ReLU(), torch.rand(3, 4), plugins=[mypack])

        def test_sigmoid_at_the_default_tolerance():
            assert_exports_like_eager(torch.nn.Sigmoid(), torch.zeros(3, 4), plugins=[mypack])
        """
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["*every registration of plugin 'mypack' is proven by a passing test*"])


def test_an_unknown_plugin_to_prove_is_a_usage_error_naming_the_plugins_that_exist(pytester: pytest.Pytester):
    """``--pt2onnx-prove nosuchpack`` stops before any test runs, with one message, not a traceback."""
    pytester.makepyfile(
        test_pack="""
        from pathlib import Path

        def test_runs():
            Path("ran").write_text("yes")
        """
    )
    result = pytester.runpytest_subprocess("--pt2onnx-prove", "nosuchpack", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    errors = result.stderr.str()
    assert "--pt2onnx-prove nosuchpack: 'nosuchpack' is no pt2onnx plugin and no importable module" in errors
    assert "aten (pt2onnx-aten)" in errors and "hops (pt2onnx-hops)" in errors
    assert "Traceback" not in errors and "ModuleNotFoundError" not in errors
    assert len(errors.strip().splitlines()) <= 3, errors
    assert not (pytester.path / "ran").exists(), "no test may run before the name is checked"


def test_a_plugin_to_prove_that_fails_to_import_keeps_its_own_error(pytester: pytest.Pytester, monkeypatch):
    """A module that exists but imports something missing is not 'unknown': its own error shows."""
    pytester.makepyfile(
        brokenpack="import a_library_that_is_not_installed\n", test_pack="def test_nothing():\n    pass\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    result = pytester.runpytest_subprocess("--pt2onnx-prove", "brokenpack", "-p", "no:cacheprovider")
    assert result.ret != pytest.ExitCode.OK
    output = result.stdout.str() + result.stderr.str()
    assert "a_library_that_is_not_installed" in output and "is no pt2onnx plugin" not in output
