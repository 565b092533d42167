"""Plugin discovery through real entry points of real installed distributions, and the four layers.

The test packs under ``tests/plugin_dists/`` are pip-installed into private target
directories once per session; a test puts one on ``sys.path`` to "install" it, so
nothing leaks into other tests.
"""

from __future__ import annotations

import importlib.machinery
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import types
import warnings
from pathlib import Path

import pytest
import torch

import pt2onnx
from pack_install import pip_install
from pt2onnx.errors import PluginConflictError, PluginError, PluginNameWarning, UnsupportedOpsError
from pt2onnx.plugin import hookimpl
from pt2onnx.plugin_manager import ALLOW_ENV, DISABLE_AUTOLOAD_ENV, PluginLoadWarning, load_plugins
from pt2onnx.registration import Layer
from pt2onnx.registry import build_registry

DISTS = Path(__file__).parent / "plugin_dists"
RELU = "aten::relu.default"


class Relu(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) + 1.0


class NoRelu(torch.nn.Module):
    def forward(self, x):
        return x * 2.0 + 1.0


class Bessel(torch.nn.Module):
    def forward(self, x):
        return torch.special.bessel_j0(x)


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> dict[str, Path]:
    """Each test distribution pip-installed into a target directory of its own."""
    sites = {}
    for dist in sorted(DISTS.iterdir()):
        sites[dist.name] = pip_install(dist, target=tmp_path_factory.mktemp(dist.name))
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


def test_a_pack_installed_into_a_folder_on_the_path_is_found_by_the_next_export(installed, tmp_path, monkeypatch):
    # The entry points are read once per state of sys.path's folders: installing into a
    # folder already on the path (as pip does into site-packages) changes that folder.
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    assert provider_of_relu() == "aten"
    for entry in installed["p2o-test-relu-pack"].iterdir():
        shutil.copytree(entry, site / entry.name)
    assert provider_of_relu() == "p2o_relu_pack"
    for entry in list(site.iterdir()):
        shutil.rmtree(entry)
    assert provider_of_relu() == "aten"


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


def test_autoload_disabled_closes_installed_packs_and_the_project_but_builtins_load(install, project, monkeypatch):
    install("p2o-test-relu-pack")
    monkeypatch.setenv(DISABLE_AUTOLOAD_ENV, "1")
    plugin_set = load_plugins()
    assert {p.layer for p in plugin_set.plugins.values()} == {Layer.BUILTIN}
    assert set(plugin_set.plugins) >= {"aten", "hops", "decomp", "fusions"}
    assert plugin_set.project_config is None
    assert "userproj_relu" not in sys.modules  # the project's module was never imported
    assert provider_of_relu() == "aten"
    # explicitly passed plugins still load
    assert "call_site_relu" in load_plugins([argument_plugin()]).plugins


def test_the_no_converter_error_says_autoload_is_off(monkeypatch):
    monkeypatch.setenv(DISABLE_AUTOLOAD_ENV, "1")
    with pytest.raises(
        UnsupportedOpsError, match=rf"installed plugin packs were not loaded \({DISABLE_AUTOLOAD_ENV} is set\)"
    ):
        pt2onnx.export(Bessel(), (torch.randn(3),))


def test_misspelled_hook_in_a_plugins_argument_is_an_error_naming_the_plugin():
    module = types.ModuleType("typo_plugin")
    from pt2onnx.plugin import hookimpl

    @hookimpl
    def pt2onnx_register_convertors(register):  # misspelled on purpose
        pass

    module.pt2onnx_register_convertors = pt2onnx_register_convertors
    with pytest.raises(PluginError, match="typo_plugin"):
        load_plugins([module])


def test_a_plugins_argument_that_raises_while_registering_is_an_error_naming_it():
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


# -- the project config: nearest pyproject.toml only, nothing left on sys.path -------------------


def test_a_parent_pyproject_above_the_project_is_never_read(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.pt2onnx]\nplugins = ["parent_plugin"]\n')
    (tmp_path / "parent_plugin.py").write_text("raise SystemExit('the parent project was imported')\n")
    child = tmp_path / "child"
    child.mkdir()
    (child / "pyproject.toml").write_text('[project]\nname = "child"\n')
    monkeypatch.chdir(child)
    plugin_set = load_plugins()
    assert plugin_set.project_config is None and plugin_set.broken == []
    # A malformed parent does not matter either.
    (tmp_path / "pyproject.toml").write_text("[tool.pt2onnx\nplugins = oops\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert provider_of_relu() == "aten"


def test_a_malformed_project_config_stops_the_export_and_is_listed_as_broken(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.pt2onnx]\nplugins = [unquoted]\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PluginError, match=r"project config .*pyproject\.toml: invalid TOML"):
        load_plugins()
    with pytest.warns(PluginLoadWarning):  # as `pt2onnx plugins` loads, listing it
        assert [b.name for b in load_plugins(diagnose=True).broken] == ["project config"]
    monkeypatch.setenv("PT2ONNX_PROJECT_ON_ERROR", "warn")
    with pytest.warns(PluginLoadWarning, match=r"project config.*pyproject\.toml: invalid TOML"):
        plugin_set = load_plugins()
    assert [b.name for b in plugin_set.broken] == ["project config"]
    with pytest.warns(PluginLoadWarning):
        assert provider_of_relu() == "aten"  # the export goes on with the other layers
    # A file that does not parse and never mentions pt2onnx cannot configure it: no warning.
    monkeypatch.delenv("PT2ONNX_PROJECT_ON_ERROR")
    (tmp_path / "pyproject.toml").write_text("[project\nname = 'x'\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_plugins().broken == []


def test_project_plugins_leave_sys_path_as_it_was(project):
    (project / "smtplib.py").write_text("raise SystemExit('the checkout shadowed smtplib')\n")
    (project / "p2o_shadow_probe.py").write_text("")
    before = list(sys.path)
    assert provider_of_relu() == "userproj_relu"
    assert sys.path == before
    # Nothing of the project is importable afterwards: a later import finds the real module.
    assert importlib.machinery.PathFinder.find_spec("p2o_shadow_probe") is None
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    assert Path(importlib.machinery.PathFinder.find_spec("smtplib").origin).parent == stdlib


def test_a_later_import_loads_the_standard_library_not_the_checkouts_module(project):
    (project / "smtplib.py").write_text("CHECKOUT = True\n")
    script = (
        "import torch, pt2onnx\n"
        "result = pt2onnx.export(lambda x: torch.relu(x), (torch.randn(2),))\n"
        "assert result.report.provider('aten::relu.default') == 'userproj_relu', result.report.ops\n"
        "import smtplib\n"
        "print(smtplib.__file__)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert Path(done.stdout.strip()).parent == Path(sysconfig.get_paths()["stdlib"])


def test_a_project_plugin_named_like_a_standard_module_is_refused(project):
    (project / "pyproject.toml").write_text('[tool.pt2onnx]\nplugins = ["smtplib"]\n')
    (project / "smtplib.py").write_text("raise SystemExit('imported')\n")
    with pytest.raises(PluginError, match=r"'smtplib'.*would shadow the standard library module"):
        load_plugins()
    with pytest.warns(PluginLoadWarning):  # as `pt2onnx plugins` loads, listing it
        assert [b.name for b in load_plugins(diagnose=True).broken] == ["smtplib"]


def test_a_project_plugin_package_with_a_dotted_name(project, monkeypatch):
    (project / "pyproject.toml").write_text('[tool.pt2onnx]\nplugins = ["userpkg.overrides"]\n')
    (project / "userpkg").mkdir()
    (project / "userpkg" / "__init__.py").write_text("")
    (project / "userpkg" / "helpers.py").write_text("def relu(op, self):\n    return op.Relu(self)\n")
    (project / "userpkg" / "overrides.py").write_text(
        "from pt2onnx.plugin import hookimpl\nfrom .helpers import relu\n\n"
        "@hookimpl\ndef pt2onnx_register_converters(register):\n"
        "    register.converter('aten::relu.default', relu)\n"
    )
    for name in ("userpkg", "userpkg.helpers", "userpkg.overrides"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert provider_of_relu() == "userpkg.overrides"


# -- the allow-list ----------------------------------------------------------------------------


def test_the_allow_list_loads_only_the_named_installed_and_project_plugins(install, project, monkeypatch):
    install("p2o-test-relu-pack", "p2o-test-relu-rival")  # together they conflict on relu
    monkeypatch.setenv(ALLOW_ENV, "p2o-test-relu-rival")  # a distribution name works too
    plugin_set = load_plugins()
    layers = {p.name: p.layer for p in plugin_set.plugins.values()}
    assert layers["p2o_relu_rival"] == Layer.INSTALLED and "p2o_relu_pack" not in layers
    assert {"aten", "hops", "decomp", "fusions"} <= set(layers)  # builtin packs are not affected
    assert {"p2o_relu_pack", "userproj_relu"} <= set(plugin_set.not_allowed)
    assert provider_of_relu() == "p2o_relu_rival"
    monkeypatch.setenv(ALLOW_ENV, "userproj_relu,p2o_relu_pack")
    assert provider_of_relu() == "userproj_relu"


def test_the_allow_list_warns_about_a_name_no_plugin_has(monkeypatch):
    monkeypatch.setenv(ALLOW_ENV, "no_such_plugin")
    with pytest.warns(PluginNameWarning, match=rf"{ALLOW_ENV} names 'no_such_plugin'"):
        load_plugins()


# -- blocking ----------------------------------------------------------------------------------


def test_a_plugin_is_blocked_by_entry_point_distribution_or_module_name(install):
    install("p2o-test-typo-hook")  # entry point "typo", module p2o_typo_hook
    for name in ("typo", "p2o-test-typo-hook", "p2o_typo_hook"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            plugin_set = load_plugins(disable=[name])
        assert "typo" not in plugin_set.plugins and plugin_set.broken == [] and plugin_set.blocked == [name]


def test_blocking_an_unknown_name_warns():
    with pytest.warns(PluginNameWarning, match=r"-p no:atne / disable=\['atne'\] names no plugin; known: .*aten"):
        load_plugins(disable=["atne"])


# -- broken installed plugins are skipped, never a failed export ---------------------------------


def test_an_installed_plugin_with_an_unknown_hook_is_skipped_with_a_warning(install):
    install("p2o-test-typo-hook")
    with pytest.warns(
        PluginLoadWarning, match=r"'typo' \(distribution p2o-test-typo-hook\).*pt2onnx_register_convertors.*-p no:typo"
    ):
        plugin_set = load_plugins()
    assert "typo" not in plugin_set.plugins and [b.name for b in plugin_set.broken] == ["typo"]
    with pytest.warns(PluginLoadWarning):
        assert provider_of_relu() == "aten"


def test_an_installed_plugin_that_registers_wrongly_is_skipped_whole(install):
    install("p2o-test-bad-registration")
    with pytest.warns(
        PluginLoadWarning, match=r"'badreg' \(distribution p2o-test-bad-registration\).*invalid op name.*-p no:badreg"
    ):
        registry = build_registry(load_plugins())
    assert "badreg" not in registry.plugin_set.plugins
    assert not any(r.plugin == "badreg" for r in registry.registrations)  # its valid relu too
    with pytest.warns(PluginLoadWarning):
        assert provider_of_relu() == "aten"


def test_a_conflict_fails_only_exports_that_reach_its_op(install):
    install("p2o-test-relu-pack", "p2o-test-relu-rival")
    x = torch.randn(4, 3)
    assert pt2onnx.export(NoRelu(), (x,)).verify(x).ok
    registry = build_registry(load_plugins())
    # The pack registers the packet aten::relu, its rival the overload: they meet at the overload.
    assert set(registry.conflicts) == {"aten::relu.default"}
    with pytest.raises(PluginConflictError) as info:
        pt2onnx.export(Relu(), (x,))
    message = str(info.value)
    assert "'p2o_relu_pack'" in message and "'p2o_relu_rival'" in message
    assert "@converter/@lowering decorator" in message and "register.converter(op, fn, override=True)" in message
    assert "FX node: relu" in message and "test_plugin_discovery.py" in message  # where the model reaches it


# -- plugin objects passed with plugins= ---------------------------------------------------------


class RelaxedRelu:
    """A plugin object; several instances may be passed."""

    def __init__(self, name: str | None = None) -> None:
        if name is not None:
            self.name = name

    @hookimpl
    def pt2onnx_register_converters(self, register):
        register.converter("aten::relu.default", lambda op, self: op.Relu(self))


def test_two_plugin_objects_of_one_class_stay_two():
    plugin_set = load_plugins([RelaxedRelu(), RelaxedRelu()])
    base = f"{__name__}.RelaxedRelu"
    assert {base, f"{base}#2"} <= set(plugin_set.plugins)
    # Both register relu in the same layer: a conflict, not one of them silently dropped.
    with pytest.raises(PluginConflictError, match=rf"'{base}'.*'{base}#2'"):
        provider_of_relu(plugins=[RelaxedRelu(), RelaxedRelu()])


def test_a_plugin_object_is_named_by_its_name_attribute():
    assert provider_of_relu(plugins=[RelaxedRelu("relaxed")]) == "relaxed"
    assert provider_of_relu(plugins=[RelaxedRelu("relaxed")], disable=["relaxed"]) == "aten"
    # Two objects of one name stay two; blocking the name blocks both.
    assert {"same", "same#2"} <= set(load_plugins([RelaxedRelu("same"), RelaxedRelu("same")]).plugins)
    assert provider_of_relu(plugins=[RelaxedRelu("same"), RelaxedRelu("same")], disable=["same"]) == "aten"


@pytest.mark.parametrize("entry", [42, None, "json", object()])
def test_a_plugins_entry_that_is_not_a_plugin_is_an_error(entry):
    with pytest.raises(PluginError, match="is not a plugin: it has no function marked @hookimpl"):
        load_plugins([entry])


def test_plugins_must_be_a_list():
    with pytest.raises(PluginError, match=r"plugins= takes a list of plugins, got str"):
        load_plugins("pt2onnx_aten")


class Rewriter:
    def __init__(self, name: str) -> None:
        self.name = name

    @hookimpl
    def pt2onnx_register_rewrites(self, register):
        register.rewrite("p2o_test_noop", lambda model: None)


def test_a_rewrite_conflict_fails_only_exports_that_run_the_rewrite():
    plugins = [Rewriter("first"), Rewriter("second")]
    with pytest.raises(PluginConflictError, match=r"(?s)rewrite 'p2o_test_noop'.*'first'.*'second'.*register\.rewrite"):
        provider_of_relu(plugins=plugins)
    assert provider_of_relu(plugins=plugins, optimize={"p2o_test_noop": False}) == "aten"
