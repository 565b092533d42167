"""contrib packs (ort, template) installed for real (pip install of the folder into a temporary directory).

Each check runs in a subprocess whose PYTHONPATH holds that directory, so the install
never leaks into other tests: entry-point discovery, precedence over the builtin
converters, ``-p no:NAME`` and uninstalling falling back to them, the exported model
verifying in onnxruntime, and a pack whose dependency is missing being a warning.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pack_install import pip_install

ROOT = Path(__file__).resolve().parents[2]

# A pack whose plugin imports a library that is not installed.
_BROKEN_PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "pt2onnx-needs-missing-lib"
version = "0.1.0"
dependencies = ["pt2onnx==0.1.0"]

[project.entry-points.pt2onnx]
needs_missing_lib = "pt2onnx_needs_missing_lib"
"""
_BROKEN_MODULE = "import a_library_that_is_not_installed  # noqa: F401\n"

# Everything one subprocess checks, printed as JSON.
_CHECK = """
import json, sys, warnings
import torch, pt2onnx
from pt2onnx.errors import PluginLoadWarning
from pt2onnx.plugin_manager import load_plugins

def attention(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v)

x = torch.randn(2, 16)
out = {}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    plugins = load_plugins(disable=sys.argv[1:])
    out["plugins"] = {p.name: [str(p.layer), p.distribution] for p in plugins.plugins.values()}
    out["broken"] = [b.name for b in plugins.broken]
    out["load_warnings"] = [str(w.message) for w in caught if issubclass(w.category, PluginLoadWarning)]
    # pt2onnx-ort's FastGelu serves opsets up to 19 (from 20 ONNX Gelu is as fast).
    result = pt2onnx.export(torch.nn.GELU("tanh"), (x,), disable=sys.argv[1:], opset=18)
    newest = pt2onnx.export(torch.nn.GELU("tanh"), (x,), disable=sys.argv[1:])
out["default_opset_gelu"] = newest.report.provider("aten::gelu.default")
out["contrib_nodes"] = sorted(n.op_type for n in result.model_proto.graph.node if n.domain == "com.microsoft")
out["converted_by"] = {u.op: [u.plugin, u.layer, list(u.shadowed)] for u in result.report.ops}
out["verified"] = result.verify(x).ok
try:
    from pt2onnx_template.ops import scaled_swish
    result = pt2onnx.export(lambda x: scaled_swish(x, 1.5), (x,), disable=sys.argv[1:])
    out["template_verified"] = result.verify(x).ok
except pt2onnx.errors.UnsupportedOpsError as e:
    out["template_error"] = str(e)
if "ort" in out["plugins"]:
    # The pack's opt-in plugin module, named as a project or plugins= would name it.
    q = torch.randn(1, 2, 5, 8)
    result = pt2onnx.export(attention, (q, q, q), plugins=["pt2onnx_ort.attention"])
    out["attention_nodes"] = [n.op_type for n in result.model_proto.graph.node if n.domain == "com.microsoft"]
    out["attention_verified"] = result.verify(q, q, q).ok
print(json.dumps(out))
"""


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> Path:
    """contrib/ort and a pack with a missing dependency, pip-installed into one directory (once)."""
    tmp = tmp_path_factory.mktemp("packs")
    broken = tmp / "broken"
    (broken / "pt2onnx_needs_missing_lib").mkdir(parents=True)
    (broken / "pyproject.toml").write_text(_BROKEN_PYPROJECT)
    (broken / "pt2onnx_needs_missing_lib" / "__init__.py").write_text(_BROKEN_MODULE)
    # Built from a copy: a build leaves *.egg-info beside the sources, which would make the
    # pack an installed plugin of every process that imports it from the source tree.
    ort = shutil.copytree(ROOT / "contrib" / "ort", tmp / "ort", ignore=shutil.ignore_patterns("*.egg-info", "build"))
    site = tmp / "site"
    template = shutil.copytree(
        ROOT / "contrib" / "template", tmp / "template", ignore=shutil.ignore_patterns("*.egg-info", "build")
    )
    return pip_install(ort, template, broken, target=site)


def _run(site: Path | None, *args: str, script: str = _CHECK) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args], env=env, capture_output=True, text=True, cwd=ROOT
    )


def _check(site: Path | None, *disable: str) -> dict:
    done = _run(site, *disable)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def with_packs(installed) -> dict:
    """What an export sees with both packs installed (one subprocess for the tests below)."""
    return _check(installed)


def test_installed_pack_is_discovered_and_wins_over_builtin(with_packs):
    out = with_packs
    assert out["plugins"]["ort"] == ["installed", "pt2onnx-ort"]
    assert out["contrib_nodes"] == ["FastGelu"]
    assert out["attention_nodes"] == ["MultiHeadAttention"]
    assert out["attention_verified"]
    plugin, layer, shadowed = out["converted_by"]["aten::gelu.default"]
    assert (plugin, layer) == ("ort", "installed")
    assert "aten [builtin]" in shadowed
    assert out["verified"]
    assert out["default_opset_gelu"] == "aten"


def test_installed_custom_op_pack_is_discovered_and_exports_its_op(with_packs, installed):
    assert with_packs["plugins"]["template"] == ["installed", "pt2onnx-template"]
    assert with_packs["template_verified"]
    blocked = _check(installed, "template")
    assert "template::scaled_swish.default is a custom op" in blocked["template_error"]


def test_pack_with_missing_dependency_is_a_warning(with_packs):
    out = with_packs
    assert out["broken"] == ["needs_missing_lib"]
    [warning] = out["load_warnings"]
    assert "needs_missing_lib" in warning and "a_library_that_is_not_installed" in warning
    assert out["verified"]


def test_blocking_the_pack_falls_back_to_builtin(installed):
    out = _check(installed, "ort")
    assert "ort" not in out["plugins"]
    assert out["contrib_nodes"] == []
    assert out["converted_by"]["aten::gelu.default"][:2] == ["aten", "builtin"]
    assert out["verified"]


def test_uninstalled_pack_falls_back_to_builtin():
    out = _check(None)
    assert "ort" not in out["plugins"]
    assert out["contrib_nodes"] == []
    assert out["verified"]


def test_cli_shows_and_blocks_the_pack(installed):
    script = "import sys; from pt2onnx.cli import main; raise SystemExit(main(sys.argv[1:]))"
    shown = _run(installed, "ops", "aten::gelu", script=script)
    assert shown.returncode == 0, shown.stderr
    assert "ort" in shown.stdout and "aten" in shown.stdout
    blocked = _run(installed, "-p", "no:ort", "plugins", script=script)
    assert blocked.returncode == 0, blocked.stderr
    assert "blocked: ort" in blocked.stdout
    assert "pt2onnx-ort" not in blocked.stdout
