"""Every hook is documented for plugin authors (docstring and docs/plugins.md) and exercised by a plugin."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from pt2onnx import hookspecs
from pt2onnx.plugin import hookimpl
from pt2onnx.registration import Layer
from pt2onnx.registry import session_registry

DOCS = Path(__file__).parent.parent / "docs" / "plugins.md"
HOOKS = sorted(name for name in dir(hookspecs) if name.startswith("pt2onnx_"))


def test_there_are_hooks_for_every_kind_of_registration():
    assert HOOKS == [
        "pt2onnx_register_capture_preparations",
        "pt2onnx_register_converters",
        "pt2onnx_register_custom_ops",
        "pt2onnx_register_decompositions",
        "pt2onnx_register_lowerings",
        "pt2onnx_register_rewrites",
    ]


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_has_a_docstring_and_a_documented_heading_with_its_signature(hook):
    spec = getattr(hookspecs, hook)
    assert inspect.getdoc(spec) and len(inspect.getdoc(spec)) > 200
    signature = f"{hook}{inspect.signature(spec)}".replace("'", "")
    text = DOCS.read_text()
    assert f"### `{hook}`" in text, f"docs/plugins.md needs a '### `{hook}`' heading"
    assert signature in text, f"docs/plugins.md must show the signature {signature}"


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_implemented_by_some_installed_plugin(hook):
    kinds = {
        "pt2onnx_register_capture_preparations": "pytree",
        "pt2onnx_register_converters": "converter",
        "pt2onnx_register_custom_ops": "custom_op",
        "pt2onnx_register_decompositions": "keep",
        "pt2onnx_register_lowerings": "lowering",
        "pt2onnx_register_rewrites": "rewrite",
    }
    registry = session_registry()
    assert any(r.kind == kinds[hook] for r in registry.registrations), f"no installed plugin uses {hook}"


def test_a_packs_hooks_run_once_per_process_and_a_plugins_argument_on_every_export():
    calls = []

    class Counting:
        name = "counting"

        @hookimpl
        def pt2onnx_register_converters(self, register):
            calls.append(register.plugin)

    first = session_registry([Counting()])
    second = session_registry([Counting()])
    assert calls == ["counting", "counting"]
    # The builtin packs registered once: both exports hold the very same registrations,
    # and the same tables resolved from them.
    builtin = [r for r in first.registrations if r.layer == Layer.BUILTIN]
    assert builtin and all(
        a is b for a, b in zip(builtin, (r for r in second.registrations if r.layer == Layer.BUILTIN))
    )
    assert session_registry().handlers is session_registry().handlers
    assert session_registry(opset=18).handlers is not session_registry().handlers
