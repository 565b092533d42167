"""The ``pt2onnx`` command, run as a subprocess as a user would."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import onnx
import onnxruntime as ort
import pytest

import cli_process

ROOT = Path(__file__).parent.parent
PT2ONNX = cli_process.which("pt2onnx")


def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return cli_process.run("pt2onnx", *args, cwd=cwd, env={**os.environ, **(env or {})})


def test_plugins_lists_the_builtin_packs_with_their_layer_and_counts():
    out = run("plugins")
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line.split() for line in out.stdout.splitlines()[1:] if line and not line.startswith(" ")}
    builtin = [("aten", "pt2onnx-aten"), ("hops", "pt2onnx-hops"), ("decomp", "pt2onnx-decomp")]
    for name, dist in [*builtin, ("fusions", "pt2onnx-fusions")]:
        assert rows[name][1] == "builtin" and rows[name][2] == dist
    assert int(rows["aten"][4]) > 0  # converters
    assert int(rows["hops"][5]) > 0  # lowerings
    assert int(rows["fusions"][9]) > 0  # rewrites


def test_blocking_a_plugin_on_the_command_line():
    out = run("-p", "no:aten", "plugins")
    assert out.returncode == 0
    assert "blocked: aten" in out.stdout
    assert not any(line.startswith("aten ") for line in out.stdout.splitlines())
    assert run("-p", "aten", "plugins").returncode != 0


def test_ops_names_the_provider_and_what_it_shadows(tmp_path):
    out = run("ops", "aten::relu.default", "aten::special_bessel_j0")
    assert re.search(r"aten::relu.default: converter pt2onnx_aten\.\w+\.relu from aten \[builtin\]", out.stdout)
    assert "aten::special_bessel_j0: no converter" in out.stdout
    assert out.returncode == 1  # an op without converter
    (tmp_path / "pyproject.toml").write_text('[tool.pt2onnx]\nplugins = ["local_relu"]\n')
    (tmp_path / "local_relu.py").write_text(
        "from pt2onnx.plugin import hookimpl\n\n"
        "def relu(op, self):\n    return op.Relu(self)\n\n"
        "@hookimpl\ndef pt2onnx_register_converters(register):\n"
        "    register.converter('aten::relu.default', relu)\n"
    )
    out = run("ops", "aten::relu.default", cwd=tmp_path)
    assert "from local_relu [project]" in out.stdout
    assert "shadows aten [builtin]" in out.stdout
    assert "overrides aten::relu.default: aten [builtin]" in run("plugins", cwd=tmp_path).stdout


def test_export_saves_and_verifies_the_demo_model(tmp_path):
    target = tmp_path / "demo.onnx"
    out = run("export", str(ROOT / "docs/examples/demo.py") + ":make_model", "-o", str(target), "--verify")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "max abs difference to eager:" in out.stdout
    assert float(out.stdout.rsplit("max abs difference to eager:", 1)[1].split()[0]) <= 1e-4
    assert [i.name for i in ort.InferenceSession(str(target)).get_inputs()] == ["image"]


@pytest.mark.parametrize("spec", ["nonexistent_module:make", "docs/examples/demo.py"])
def test_export_with_a_bad_factory_fails_clearly(spec, tmp_path):
    out = run("export", spec, "-o", str(tmp_path / "x.onnx"), cwd=ROOT)
    assert out.returncode != 0
    assert not (tmp_path / "x.onnx").exists()


# -- the error surface: one paragraph, an exit status per kind of failure ------------------------

FACTORIES = """\
import torch


class Raises(torch.nn.Module):
    def forward(self, x):
        return self.helper(x)

    def helper(self, x):
        raise ValueError("boom from the model")  # line 9


class Relu(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) + 1.0


def raising():
    return Raises(), (torch.randn(2),)


def unsupported():
    return (lambda x: torch.special.bessel_j0(x)), (torch.randn(2),)


def fine():
    return Relu(), (torch.randn(3),)


def broken_factory():
    return {}["missing"]  # line 30
"""


@pytest.fixture
def factories(tmp_path: Path) -> Path:
    (tmp_path / "factories.py").write_text(FACTORIES)
    return tmp_path


def _no_traceback(out: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith("pt2onnx: error: ") or "\npt2onnx: error: " in out.stderr, out.stderr


def test_help_documents_the_exit_codes():
    out = run("--help")
    assert out.returncode == 0
    for code in (
        "0  success",
        "2  usage",
        "3  the model holds ops no plugin converts",
        "4  torch.export",
        "5  the exported",
    ):
        assert code in out.stdout, out.stdout


def test_an_exception_in_the_models_forward_names_its_line(factories):
    out = run("export", "factories.py:raising", "-o", "m.onnx", cwd=factories)
    assert out.returncode == 4, out.stderr
    _no_traceback(out)
    assert "ValueError: boom from the model" in out.stderr
    assert f"{factories / 'factories.py'}:9 in helper" in out.stderr
    assert "try strict=" not in out.stderr  # both modes were tried: no point suggesting the other
    debug = run("export", "factories.py:raising", "-o", "m.onnx", "--debug", cwd=factories)
    assert debug.returncode == 4 and "Traceback" in debug.stderr
    assert not (factories / "m.onnx").exists()


def test_unsupported_ops_exit_3_and_a_factory_that_raises_exits_1(factories):
    out = run("export", "factories.py:unsupported", "-o", "m.onnx", cwd=factories)
    assert out.returncode == 3, out.stderr
    _no_traceback(out)
    assert "aten::special_bessel_j0.default" in out.stderr
    out = run("export", "factories.py:broken_factory", "-o", "m.onnx", cwd=factories)
    assert out.returncode == 1, out.stderr
    _no_traceback(out)
    assert "factories.py:broken_factory raised KeyError: 'missing'" in out.stderr
    assert f"{factories / 'factories.py'}:30 in broken_factory" in out.stderr


def test_an_output_path_that_cannot_take_the_file_fails_before_the_factory_runs(factories):
    (factories / "taken").write_text("a file where a folder is asked for")
    # broken_factory raises when called: the save's error shows it never was.
    out = run("export", "factories.py:broken_factory", "-o", "taken/m.onnx", cwd=factories)
    assert out.returncode == 1, out.stderr
    _no_traceback(out)
    assert "[save] cannot save to taken/m.onnx: taken is a file, not a folder" in out.stderr
    assert "broken_factory raised" not in out.stderr
    out = run("export", "factories.py:fine", "-o", "new/sub/m.onnx", cwd=factories)
    assert out.returncode == 0, out.stderr
    assert (factories / "new/sub/m.onnx").is_file()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "factories.py:nope",
            "factories.py:nope is not defined there; factories.py defines: Raises, Relu, broken_factory, fine, raising",
        ),
        ("nofile.py:make", "nofile.py: no such file"),
        ("no_such_module:make", "no module named 'no_such_module'"),
        ("factories.py", "expected MODULE:FACTORY or FILE.py:FACTORY"),
    ],
)
def test_a_factory_that_cannot_be_found_is_a_usage_error(factories, spec, message):
    out = run("export", spec, "-o", "m.onnx", cwd=factories)
    assert out.returncode == 2, out.stderr
    _no_traceback(out)
    assert message in out.stderr
    assert "usage: pt2onnx export" in out.stderr


def test_bad_options_are_usage_errors(factories):
    out = run("export", "factories.py:fine", "-o", "m.onnx", "--opset", "99", cwd=factories)
    assert out.returncode == 2, out.stderr
    _no_traceback(out)
    assert "opset=99 is not supported: pt2onnx exports opsets 14 to" in out.stderr
    out = run("-p", "aten", "plugins")
    assert out.returncode == 2 and "-p takes no:NAME" in out.stderr


def test_ops_without_an_op_prints_usage_and_exits_2():
    out = run("ops")
    assert out.returncode == 2
    assert "usage: pt2onnx ops" in out.stderr and "name at least one op" in out.stderr
    assert out.stdout == ""


def test_a_closed_pipe_ends_the_command_quietly():
    # stdout block-buffered, as Python has it in a pipe (PYTHONUNBUFFERED would hide it): the
    # listing fits the buffer, so the command itself must flush it to meet the closed pipe,
    # not leave that to the interpreter's exit (status 120). tests/test_cli_exit.py has more.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    reader = subprocess.Popen([PT2ONNX, "plugins"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert reader.stdout is not None and reader.stderr is not None
    reader.stdout.close()  # as `| head -0` would: every write meets a closed pipe
    stderr = reader.stderr.read().decode()
    assert reader.wait(timeout=300) == 0
    assert stderr == ""


WRONG_RELU = """\
from pt2onnx.plugin import hookimpl


def relu(op, self):
    return op.Max(self, op.constant(1.0, op.output_dtype))  # wrong on purpose


@hookimpl
def pt2onnx_register_converters(register):
    register.converter("aten::relu.default", relu)
"""


def test_a_model_that_differs_from_eager_exits_5(factories):
    (factories / "pyproject.toml").write_text('[tool.pt2onnx]\nplugins = ["wrong_relu"]\n')
    (factories / "wrong_relu.py").write_text(WRONG_RELU)
    out = run("export", "factories.py:fine", "-o", "m.onnx", "--verify", cwd=factories)
    assert out.returncode == 5, out.stderr
    assert "differs from eager PyTorch" in out.stderr


def test_a_broken_plugin_is_listed_and_warned_about_once(factories):
    (factories / "pyproject.toml").write_text('[tool.pt2onnx]\nplugins = ["needs_missing"]\non_error = "warn"\n')
    (factories / "needs_missing.py").write_text("import a_module_that_is_not_installed\n")
    listing = run("plugins", cwd=factories)
    assert listing.returncode == 0, listing.stderr
    assert "BROKEN needs_missing (project): ModuleNotFoundError" in listing.stdout
    assert f"Remove it from [tool.pt2onnx] plugins in {factories / 'pyproject.toml'}" in listing.stdout
    assert listing.stderr == ""  # listed, not warned about as well
    assert f"project config: {factories / 'pyproject.toml'}" in listing.stdout
    ops = run("ops", "aten::relu", cwd=factories)
    assert ops.returncode == 0 and ops.stderr == ""
    assert "note: broken plugins skipped: needs_missing (see `pt2onnx plugins`)" in ops.stdout
    out = run("export", "factories.py:fine", "-o", "m.onnx", cwd=factories)
    assert out.returncode == 0, out.stderr
    warned = [line for line in out.stderr.splitlines() if "needs_missing" in line]
    assert len(warned) == 1 and warned[0].startswith("pt2onnx: warning: pt2onnx plugin 'needs_missing' is skipped")


def test_plugins_shows_what_autoload_closed(factories):
    (factories / "pyproject.toml").write_text('[tool.pt2onnx]\nplugins = ["needs_missing"]\n')
    out = run("plugins", cwd=factories, env={"PT2ONNX_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert out.returncode == 0, out.stderr
    assert (
        "closed: the project's [tool.pt2onnx] plugins were not read (PT2ONNX_DISABLE_PLUGIN_AUTOLOAD is set)"
        in out.stdout
    )
    assert "BROKEN" not in out.stdout and "aten " in out.stdout


def test_source_paths_option_strips_them_from_the_saved_model(factories):
    out = run("export", "factories.py:fine", "-o", "m.onnx", "--source-paths", "none", cwd=factories)
    assert out.returncode == 0, out.stderr
    proto = onnx.load(str(factories / "m.onnx"))
    assert proto.graph.node and not any(p.key == "pt2onnx.source" for n in proto.graph.node for p in n.metadata_props)
