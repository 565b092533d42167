"""Plugin discovery through real entry points of real installed distributions, and the four layers.

The test packs under ``tests/plugin_dists/`` are pip-installed into private target
directories once per session; a test puts one on ``sys.path`` to "install" it, so
nothing leaks into other tests.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types
import warnings
from pathlib import Path

import pytest
import torch

import pt2onnx
from pt2onnx.errors import PluginConflictError, PluginError
from pt2onnx.plugin_manager import DISABLE_AUTOLOAD_ENV, PluginLoadWarning, load_plugins
from pt2onnx.registration import Layer
from pt2onnx.registry import build_registry

DISTS = Path(__file__).parent / "plugin_dists"
RELU = "aten::relu.default"


class Relu(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) + 1.0


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> dict[str, Path]:
    """Each test distribution pip-installed into a target directory of its own."""
    sites = {}
    for dist in sorted(DISTS.iterdir()):
        site = tmp_path_factory.mktemp(dist.name)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--no-build-isolation",
                "--target",
                str(site),
                str(dist),
            ],
            check=True,
            capture_output=True,
        )
        sites[dist.name] = site
    return sites


@pytest.fixture
def install(installed, monkeypatch):
    """Make installed test distributions visible to entry-point discovery for one test."""

    def _install(*names: str) -> None:
        for name in names:
            monkeypatch.syspath_prepend(str(installed[name]))

    return _install


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A user's project: a pyproject.toml with [tool.pt2onnx] plugins and a local plugin module."""
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "userproj"\n\n[tool.pt2onnx]\nplugins = ["userproj_relu"]\n'
    )
    (tmp_path / "userproj_relu.py").write_text(
        textwrap.dedent(
            """
            import sys
            from pt2onnx.plugin import converter, hookimpl

            @converter("aten::relu.default")
            def relu(op, self):
                return op.Relu(self)

            @hookimpl
            def pt2onnx_register_converters(register):
                register.module(sys.modules[__name__])
            """
        )
    )
    nested = tmp_path / "src" / "deeper"
    nested.mkdir(parents=True)
    monkeypatch.chdir(nested)  # found from the current directory upward
    monkeypatch.delitem(sys.modules, "userproj_relu", raising=False)
    return tmp_path


def argument_plugin() -> types.ModuleType:
    module = types.ModuleType("call_site_relu")
    exec(  # a module object built at the call site, as a user would pass one
        textwrap.dedent(
            """
            import sys
            from pt2onnx.plugin import converter, hookimpl

            @converter("aten::relu.default")
            def relu(op, self):
                return op.Relu(self)

            @hookimpl
            def pt2onnx_register_converters(register):
                register.converter("aten::relu.default", relu)
            """
        ),
        module.__dict__,
    )
    return module


def provider_of_relu(**export_options) -> str | None:
    x = torch.randn(4, 3)
    result = pt2onnx.export(Relu(), (x,), **export_options)
    assert result.verify(x).ok
    return result.report.provider(RELU)


def test_builtin_plugins_are_found_through_entry_points():
    plugin_set = load_plugins()
    builtin = {name: info for name, info in plugin_set.plugins.items() if info.layer == Layer.BUILTIN}
    assert set(builtin) >= {"aten", "hops", "decomp"}
    assert builtin["aten"].distribution == "pt2onnx-aten"
    assert builtin["aten"].source == "entry point pt2onnx_aten"


def test_each_higher_layer_wins(install, project):
    # project + installed + builtin all register aten::relu: the project wins...
    install("p2o-test-relu-pack")
    assert provider_of_relu() == "userproj_relu"
    # ...and the plugins= argument wins over all of them.
    module = argument_plugin()
    assert provider_of_relu(plugins=[module]) == "call_site_relu"


def test_installed_pack_wins_over_builtin_and_is_shown_shadowing_it(install):
    install("p2o-test-relu-pack")
    x = torch.randn(4, 3)
    result = pt2onnx.export(Relu(), (x,))
    usage = next(u for u in result.report.ops if u.op == RELU)
    assert usage.plugin == "p2o_relu_pack" and usage.layer == "installed"
    assert usage.shadowed == ("aten [builtin]",)
    assert any(n.op_type == "Max" for n in result.model.graph)
    assert result.verify(x).ok


def test_without_any_other_layer_the_builtin_converter_is_used():
    assert provider_of_relu() == "aten"


def test_same_layer_conflict_names_both_plugins(install):
    install("p2o-test-relu-pack", "p2o-test-relu-rival")
    with pytest.raises(PluginConflictError) as info:
        provider_of_relu()
    message = str(info.value)
    assert "'p2o_relu_pack'" in message and "'p2o_relu_rival'" in message
    assert "override=True" in message


def test_override_true_resolves_a_same_layer_conflict(install):
    install("p2o-test-relu-pack", "p2o-test-relu-override")
    assert provider_of_relu() == "p2o_relu_override"


def test_a_plugin_that_fails_to_import_warns_and_export_goes_on(install):
    install("p2o-test-broken")
    with pytest.warns(PluginLoadWarning, match=r"p2o_broken.*p2o-test-broken.*p2o_library_that_does_not_exist"):
        assert provider_of_relu() == "aten"


def test_blocking_a_plugin_falls_back_to_the_next_layer(install):
    install("p2o-test-relu-pack")
    assert provider_of_relu(disable=["p2o_relu_pack"]) == "aten"
    # a distribution name blocks too
    assert provider_of_relu(disable=["p2o-test-relu-pack"]) == "aten"


def test_autoload_disabled_loads_no_entry_point(monkeypatch):
    monkeypatch.setenv(DISABLE_AUTOLOAD_ENV, "1")
    assert load_plugins().plugins == {}
    # explicitly passed plugins still load
    assert set(load_plugins([argument_plugin()]).plugins) == {"call_site_relu"}


def test_misspelled_hook_is_an_error_naming_the_plugin():
    module = types.ModuleType("typo_plugin")
    from pt2onnx.plugin import hookimpl

    @hookimpl
    def pt2onnx_register_convertors(register):  # misspelled on purpose
        pass

    module.pt2onnx_register_convertors = pt2onnx_register_convertors
    with pytest.raises(PluginError, match="typo_plugin"):
        load_plugins([module])


def test_a_plugin_that_raises_while_registering_is_an_error_naming_it():
    module = types.ModuleType("raising_plugin")
    from pt2onnx.plugin import hookimpl

    @hookimpl
    def pt2onnx_register_converters(register):
        register.converter("not an op name", lambda op, x: x)

    module.pt2onnx_register_converters = pt2onnx_register_converters
    with pytest.raises(PluginError, match=r"raising_plugin.*invalid op name"):
        build_registry(load_plugins([module]))


def test_exact_overload_wins_over_packet_in_the_same_layer():
    module = types.ModuleType("two_levels")
    from pt2onnx.plugin import hookimpl

    def exact(op, self):
        return op.Relu(self)

    def packet(op, self):
        raise AssertionError("the packet converter must not be used when an exact one exists")

    @hookimpl
    def pt2onnx_register_converters(register):
        register.converter("aten::relu.default", exact)
        register.converter("aten::relu", packet)

    module.pt2onnx_register_converters = pt2onnx_register_converters
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert provider_of_relu(plugins=[module]) == "two_levels"
