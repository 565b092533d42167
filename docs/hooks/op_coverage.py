"""MkDocs hook: the op coverage page, generated from the plugin registry at every build.

Only the builtin packs count (installed packs and the project's plugins are blocked), so
the page says what `pip install pt2onnx` converts, whatever else the building
environment has installed.
"""

from __future__ import annotations

from collections import defaultdict

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

PAGE = "reference/coverage.md"


def coverage_page() -> str:
    """The Markdown of the op coverage page."""
    from pt2onnx.coverage import core_aten_ops, coverage
    from pt2onnx.plugin_manager import load_plugins
    from pt2onnx.registration import Layer
    from pt2onnx.registry import build_registry

    everything = load_plugins(None)
    others = [info.name for info in everything.plugins.values() if info.layer != Layer.BUILTIN]
    registry = build_registry(load_plugins(None, disable=others))
    covered, missing = coverage(registry)
    core = set(core_aten_ops())
    total = len(covered) + len(missing)
    lines = [
        "# Op coverage",
        "",
        "Generated from the plugin registry when this site was built: what the builtin packs",
        "(`pip install pt2onnx`) convert. `pt2onnx ops --coverage` and `pt2onnx ops OP` print",
        "the same for the packs installed where you run them.",
        "",
        f"## Core ATen opset: {len(covered)} / {total} ({100 * len(covered) / max(total, 1):.1f}%)",
        "",
        "| op | converted by |",
        "| --- | --- |",
    ]
    for name in core_aten_ops():
        entries = registry.entries_for(name)
        if entries:
            winner = next(iter(entries.values())).winner
            lines.append(f"| `{name}` | {winner.kind} from `{winner.plugin}` |")
        else:
            lines.append(f"| `{name}` | **missing** |")
    by_plugin: dict[str, list[str]] = defaultdict(list)
    for registration in registry.registrations:
        if registration.converts and registration.op not in core:
            by_plugin[registration.plugin].append(f"`{registration.op}`")
    lines += ["", "## Other ops with a converter or lowering", ""]
    for plugin, ops in sorted(by_plugin.items()):
        lines += [f"**{plugin}** ({len(ops)}): " + ", ".join(sorted(set(ops))), ""]
    if registry.kept:
        lines += [
            "## Kept whole",
            "",
            "Never decomposed when a program is re-traced (converted directly, by measurement):",
            ", ".join(f"`{name}`" for name in sorted(registry.kept)),
            "",
        ]
    return "\n".join(lines)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, PAGE, content=coverage_page()))
    return files
