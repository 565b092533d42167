"""The project's own config, ``[tool.pt2onnx]`` in its pyproject.toml: a mistake stops the export.

As pytest and ruff stop on a broken config, and as ``--plugins`` stops on a module it cannot
import: a misspelled plugin module, a file that does not parse and a key the table does not
take each end ``pt2onnx export`` (and ``pt2onnx.export``) with an error naming the file,
the key or module, and what to do. ``pt2onnx plugins`` still lists them, so the user can see
why; ``on_error = "warn"`` (or ``PT2ONNX_PROJECT_ON_ERROR=warn``) brings back the warning.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import cli_process

PT2ONNX = cli_process.which("pt2onnx")

FACTORIES = """\
import torch


class Relu(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) + 1.0


def fine():
    return Relu(), (torch.randn(3),)
"""

LOCAL_RELU = """\
from pt2onnx.plugin import hookimpl


@hookimpl
def pt2onnx_register_converters(register):
    register.converter("aten::relu.default", lambda op, self: op.Relu(self))
"""

#: The environment of every command: none of the switches under test set by the caller.
SWITCHES = ("PT2ONNX_PROJECT_ON_ERROR", "PT2ONNX_DISABLE_PLUGIN_AUTOLOAD", "PT2ONNX_PLUGINS")


def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in SWITCHES}
    return cli_process.run("pt2onnx", *args, cwd=cwd, env={**base, **(env or {})})


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "factories.py").write_text(FACTORIES)
    (tmp_path / "local_relu.py").write_text(LOCAL_RELU)
    return tmp_path


def _configure(project: Path, table: str) -> Path:
    pyproject = project / "pyproject.toml"
    pyproject.write_text('[project]\nname = "userproj"\n\n[tool.pt2onnx]\n' + textwrap.dedent(table))
    return pyproject


def _export(project: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run("export", "factories.py:fine", "-o", "m.onnx", "--quiet", cwd=project, env=env)


def _stopped(done: subprocess.CompletedProcess[str], project: Path, *phrases: str) -> None:
    """The export stopped with one error paragraph naming the file and saying what to do, and wrote nothing."""
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    assert done.stderr.startswith("pt2onnx: error: [plugins] "), done.stderr
    assert str(project / "pyproject.toml") in done.stderr
    assert "what to do:" in done.stderr and 'on_error = "warn"' in done.stderr
    for phrase in phrases:
        assert phrase in done.stderr, done.stderr
    assert not (project / "m.onnx").exists()


def test_the_project_config_works_as_written(project):
    _configure(project, 'plugins = ["local_relu"]\n')
    done = run("export", "factories.py:fine", "-o", "m.onnx", "--quiet", "--json", cwd=project)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert '"plugin": "local_relu"' in done.stdout


def test_a_misspelled_plugin_module_stops_the_export(project):
    _configure(project, 'plugins = ["locl_relu"]\n')
    _stopped(
        _export(project),
        project,
        "the project plugin 'locl_relu'",
        "No module named 'locl_relu'",
        "(did you mean 'local_relu'?)",
        "remove it from [tool.pt2onnx] plugins",
        "-p no:locl_relu",
    )


def test_a_plugin_module_whose_import_fails_stops_the_export(project):
    (project / "needs_missing.py").write_text("import a_module_that_is_not_installed\n")
    _configure(project, 'plugins = ["needs_missing"]\n')
    _stopped(_export(project), project, "'needs_missing'", "No module named 'a_module_that_is_not_installed'")


def test_malformed_toml_stops_the_export(project):
    _configure(project, "plugins = [local_relu]\n")
    _stopped(_export(project), project, "invalid TOML", "PT2ONNX_PROJECT_ON_ERROR=warn")


@pytest.mark.parametrize(
    ("table", "phrase"),
    [
        ('plugin = ["local_relu"]\n', "[tool.pt2onnx] has no key 'plugin' (did you mean 'plugins'?)"),
        ('plugins = ["local_relu"]\nverbose = true\n', "[tool.pt2onnx] has no key 'verbose'"),
        ('plugins = ["local_relu"]\non_error = "ignore"\n', 'on_error must be "error" or "warn", got \'ignore\''),
        ('plugins = "local_relu"\n', "plugins must be a list of module names"),
    ],
)
def test_an_unknown_key_or_a_bad_value_stops_the_export(project, table, phrase):
    _configure(project, table)
    _stopped(_export(project), project, phrase)


def test_plugins_always_lists_the_problems_and_says_the_export_stops(project):
    cases = {
        'plugins = ["locl_relu"]\n': "BROKEN locl_relu (project): ModuleNotFoundError",
        "plugins = [local_relu]\n": "BROKEN project config (project): ",
        'plugin = ["local_relu"]\n': "has no key 'plugin'",
    }
    for table, broken in cases.items():
        _configure(project, table)
        for command in (["plugins"], ["plugins", "--json"], ["ops", "aten::relu"]):
            done = run(*command, cwd=project)
            assert done.returncode == 0, (table, command, done.stderr)
            assert done.stderr == "", (table, command, done.stderr)
            if command == ["plugins"]:
                listing = done.stdout
        assert broken in listing, listing
        assert "Exports stop on it until then" in listing, listing


def test_on_error_warn_in_the_table_goes_on_with_a_warning(project):
    _configure(project, 'plugins = ["locl_relu", "local_relu"]\non_error = "warn"\n')
    done = _export(project)
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "locl_relu" in line]
    assert len(warned) == 1 and warned[0].startswith("pt2onnx: warning: pt2onnx plugin 'locl_relu' is skipped")
    listed = run("ops", "aten::relu", cwd=project).stdout
    assert "from local_relu [project]" in listed  # the rest of the table still counts


def test_the_environment_variable_warns_even_for_a_file_that_does_not_parse(project):
    _configure(project, "plugins = [local_relu]\n")
    done = _export(project, env={"PT2ONNX_PROJECT_ON_ERROR": "warn"})
    assert done.returncode == 0, done.stderr
    assert "pt2onnx: warning: pt2onnx plugin 'project config' is skipped" in done.stderr
    assert "invalid TOML" in done.stderr
    # ... and =error is strict whatever the table says.
    (project / "m.onnx").unlink()
    _configure(project, 'plugins = ["locl_relu"]\non_error = "warn"\n')
    _stopped(_export(project, env={"PT2ONNX_PROJECT_ON_ERROR": "error"}), project, "'locl_relu'")


def test_closing_the_project_config_or_blocking_the_module_lets_the_export_run(project):
    _configure(project, 'plugins = ["locl_relu"]\n')
    assert _export(project, env={"PT2ONNX_DISABLE_PLUGIN_AUTOLOAD": "1"}).returncode == 0
    assert _export(project, env={"PT2ONNX_PLUGINS": ""}).returncode == 0
    done = run("-p", "no:locl_relu", "export", "factories.py:fine", "-o", "m.onnx", "--quiet", cwd=project)
    assert done.returncode == 0, done.stderr
    # A malformed file is not read at all with autoload off.
    _configure(project, "plugins = [local_relu]\n")
    assert _export(project, env={"PT2ONNX_DISABLE_PLUGIN_AUTOLOAD": "1"}).returncode == 0


API_EXPORT = """\
import torch, pt2onnx
from pt2onnx.errors import PluginError
try:
    pt2onnx.export(torch.nn.ReLU(), (torch.randn(3),))
except PluginError as e:
    print("PluginError:", e)
else:
    print("exported")
"""


@pytest.mark.parametrize(
    ("module", "phrase"),
    [
        (
            "from pt2onnx.plugin import hookimpl\n\n@hookimpl\ndef pt2onnx_register_convertors(register):\n    pass\n",
            "implements a hook pt2onnx does not define",
        ),
        (
            "from pt2onnx.plugin import hookimpl\n\n@hookimpl\ndef pt2onnx_register_converters(register):\n"
            "    register.converter('aten.relu', lambda op, self: op.Relu(self))\n",
            "failed in pt2onnx_register_converters",
        ),
        ("raise RuntimeError('boom at import')\n", "RuntimeError: boom at import"),
    ],
    ids=["hook-typo", "bad-registration", "raises"],
)
def test_the_api_stops_on_a_broken_project_plugin_too(project, module, phrase):
    (project / "broken_plugin.py").write_text(module)
    _configure(project, 'plugins = ["broken_plugin"]\n')
    env = {k: v for k, v in os.environ.items() if k not in SWITCHES}
    done = subprocess.run(
        [sys.executable, "-c", API_EXPORT], cwd=project, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("PluginError: [plugins] the project plugin 'broken_plugin'"), done.stdout
    assert phrase in done.stdout and str(project / "pyproject.toml") in done.stdout
    # on_error = "warn": the export goes on without it, with a warning.
    _configure(project, 'plugins = ["broken_plugin"]\non_error = "warn"\n')
    done = subprocess.run(
        [sys.executable, "-c", API_EXPORT], cwd=project, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.stdout.strip() == "exported", done.stdout + done.stderr
    assert "PluginLoadWarning" in done.stderr and "broken_plugin" in done.stderr
