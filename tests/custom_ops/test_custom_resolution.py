"""Custom-op handlers resolve like converters: one winner per op by layer, a same-layer conflict unless
``override=True``, and ``pt2onnx ops``, ``report.ops`` and the export agree on the winner."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import pt2onnx
from pt2onnx.errors import PluginConflictError
from pt2onnx.plugin import hookimpl
from pt2onnx.registry import session_registry


@torch.library.custom_op("pt2onnx_resolve::scaled_tanh", mutates_args=())
def scaled_tanh(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.tanh(x) * scale


@scaled_tanh.register_fake
def _(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.empty_like(x)


OP = "pt2onnx_resolve::scaled_tanh.default"


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return scaled_tanh(x, 2.0) + 1.0


class Expand:
    """Emits standard ONNX ops for the op."""

    name = "expand_handler"

    def __init__(self, override: bool = False) -> None:
        self.override = override

    @hookimpl
    def pt2onnx_register_custom_ops(self, register):
        def emit(op, x, scale):
            return op.Mul(op.Tanh(x), op.constant(scale, op.dtype_of(x)))

        register.expand("pt2onnx_resolve::scaled_tanh", emit, override=self.override)


class Decompose:
    """Decomposes the op into aten ops."""

    name = "decompose_handler"

    def __init__(self, override: bool = False) -> None:
        self.override = override

    @hookimpl
    def pt2onnx_register_custom_ops(self, register):
        register.decompose(
            "pt2onnx_resolve::scaled_tanh", lambda x, scale: torch.tanh(x) * scale, override=self.override
        )


PROJECT_MODULE = """
import torch
from pt2onnx.plugin import hookimpl

def emit(op, x, scale):
    return op.Mul(op.Tanh(x), op.constant(scale, op.dtype_of(x)))

@hookimpl
def pt2onnx_register_custom_ops(register):
    {call}
"""
EXPAND_CALL = 'register.expand("pt2onnx_resolve::scaled_tanh", emit{override})'
DECOMPOSE_CALL = 'register.decompose("pt2onnx_resolve::scaled_tanh", lambda x, scale: torch.tanh(x) * scale{override})'


def _project(directory: Path, modules: dict[str, str]) -> Path:
    """A project whose pyproject.toml names ``modules`` ({name: handler call}) as plugins."""
    names = ", ".join(f'"{n}"' for n in modules)
    (directory / "pyproject.toml").write_text(f"[tool.pt2onnx]\nplugins = [{names}]\n")
    for name, call in modules.items():
        (directory / f"{name}.py").write_text(textwrap.dedent(PROJECT_MODULE).format(call=call))
    return directory


@pytest.fixture
def in_project(tmp_path, monkeypatch):
    def make(modules: dict[str, str]) -> Path:
        for name in modules:
            monkeypatch.delitem(sys.modules, name, raising=False)
        monkeypatch.chdir(_project(tmp_path, modules))
        return tmp_path

    return make


def _export(**options) -> pt2onnx.ExportResult:
    x = torch.randn(3, 4)
    result = pt2onnx.export(Model(), (x,), **options)
    assert result.verify(x).ok
    return result


def _handled_by(result: pt2onnx.ExportResult) -> tuple[str, str, str]:
    [usage] = [u for u in result.report.ops if u.op == OP]
    return usage.plugin, usage.layer, usage.how


def test_a_higher_layer_expand_wins_over_a_lower_layer_decompose(in_project):
    in_project({"proj_decompose": DECOMPOSE_CALL.format(override="")})
    result = _export(plugins=[Expand()])
    assert _handled_by(result) == ("expand_handler", "argument", "converted")
    assert not result.report.retraced  # the decomposition lost: nothing to re-trace for
    assert any(n.op_type == "Tanh" for n in result.model.graph)


def test_a_higher_layer_decompose_wins_over_a_lower_layer_expand_and_shows_in_report_ops(in_project):
    in_project({"proj_expand": EXPAND_CALL.format(override="")})
    result = _export(plugins=[Decompose()])
    assert _handled_by(result) == ("decompose_handler", "argument", "decomposed")
    [usage] = [u for u in result.report.ops if u.op == OP]
    assert usage.shadowed == ("proj_expand [project]",) and usage.count == 1
    assert result.report.retraced
    assert f"{OP}" in str(result.report) and "(decomposed)" in str(result.report)


def test_two_handlers_of_one_op_in_one_layer_conflict(in_project):
    in_project({})
    with pytest.raises(PluginConflictError) as info:
        _export(plugins=[Expand(), Decompose()])
    message = str(info.value)
    assert "'expand_handler' (custom_op)" in message and "'decompose_handler' (decomposition)" in message
    assert "register.expand(op, fn, override=True)" in message
    assert "test_custom_resolution.py" in message  # the line of the model that reaches the op


@pytest.mark.parametrize("winner", ["expand", "decompose"])
def test_override_true_resolves_the_same_layer_conflict(in_project, winner):
    in_project({})
    plugins = [Expand(override=winner == "expand"), Decompose(override=winner == "decompose")]
    result = _export(plugins=plugins)
    assert _handled_by(result) == (
        f"{winner}_handler",
        "argument",
        "converted" if winner == "expand" else "decomposed",
    )


def test_pt2onnx_ops_names_the_winner_the_export_uses(in_project):
    # One project layer: the decomposition says override=True, so it wins over the expand.
    project = in_project(
        {
            "proj_expand": EXPAND_CALL.format(override=""),
            "proj_decompose": DECOMPOSE_CALL.format(override=", override=True"),
        }
    )
    registry = session_registry()
    [entry] = registry.entries_for(OP).values()
    assert (entry.winner.plugin, entry.winner.kind) == ("proj_decompose", "decomposition")
    assert _handled_by(_export()) == ("proj_decompose", "project", "decomposed")
    cli = shutil.which("pt2onnx", path=str(Path(sys.executable).parent)) or "pt2onnx"
    out = subprocess.run(
        [cli, "ops", OP], cwd=project, env=dict(os.environ), capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert re.search(
        rf"^{re.escape(OP)}: decomposition .* from proj_decompose \[project\] \(override=True\)$", out.stdout, re.M
    )
    assert "    shadows proj_expand [project]" in out.stdout


def test_pt2onnx_ops_lists_a_conflict_and_exits_0(in_project):
    project = in_project(
        {"proj_expand": EXPAND_CALL.format(override=""), "proj_decompose": DECOMPOSE_CALL.format(override="")}
    )
    cli = shutil.which("pt2onnx", path=str(Path(sys.executable).parent)) or "pt2onnx"
    for command in (["ops", OP], ["plugins"]):
        out = subprocess.run(
            [cli, *command], cwd=project, env=dict(os.environ), capture_output=True, text=True, timeout=300
        )
        assert out.returncode == 0, out.stderr
        assert re.search(
            r"CONFLICT .*proj_expand \(custom_op\), proj_decompose \(decomposition\) \[project\]", out.stdout
        )
