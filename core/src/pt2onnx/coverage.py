"""Coverage of the Core ATen opset (OpOverloads tagged ``torch.Tag.core``) by the loaded plugins,
and of PyTorch's own op test database (op_db) as the OpInfo test module measured it."""

from __future__ import annotations

import functools

import torch

from .opnames import op_name
from .registry import Registry

__all__ = ["OPINFO_FIGURE", "core_aten_ops", "coverage", "coverage_report"]

#: The OpInfo figure (``tests/opinfo``): ops of torch's op_db whose first float32 sample
#: exports, runs in onnxruntime and matches eager, of the ops op_db tests in float32. A
#: measurement of the builtin packs, not of the loaded plugins (running op_db takes
#: minutes); ``python tests/opinfo/record.py --dtypes float32 --out o.json`` re-measures it.
OPINFO_FIGURE = (434, 631)


@functools.cache
def core_aten_ops() -> tuple[str, ...]:
    """Every Core ATen OpOverload, by canonical name.

    Enumerated from all registered schemas: ``dir(torch.ops.aten)`` loads lazily and misses some.
    """
    names = set()
    for schema in torch._C._jit_get_all_schemas():
        if not schema.name.startswith("aten::"):
            continue
        packet = getattr(torch.ops.aten, schema.name[len("aten::") :], None)
        if packet is None:
            continue
        overload = getattr(packet, schema.overload_name or "default", None)
        if overload is not None and torch.Tag.core in overload.tags:
            names.add(op_name(overload))
    return tuple(sorted(names))


def _overload(name: str) -> torch._ops.OpOverload:
    packet, overload = name[len("aten::") :].split(".", 1)
    return getattr(getattr(torch.ops.aten, packet), overload)


def coverage(registry: Registry) -> tuple[list[str], list[str]]:
    """(covered, missing) Core ATen ops for ``registry``."""
    covered: list[str] = []
    missing: list[str] = []
    for name in core_aten_ops():
        (covered if registry.converts(_overload(name)) else missing).append(name)
    return covered, missing


def coverage_report(registry: Registry) -> str:
    """The text ``pt2onnx ops --coverage`` prints."""
    covered, missing = coverage(registry)
    total = len(covered) + len(missing)
    lines = [f"Core ATen opset: {len(covered)}/{total} covered ({100 * len(covered) / max(total, 1):.1f}%)"]
    passing, tested = OPINFO_FIGURE
    lines.append(
        f"OpInfo (torch's op_db, first float32 sample, builtin packs): {passing}/{tested} ops pass "
        f"({100 * passing / max(tested, 1):.1f}%; tests/opinfo)"
    )
    if missing:
        lines.append("missing:")
        lines.extend(f"  {name}" for name in missing)
    kept = sorted(registry.kept)
    if kept:
        lines.append("kept whole (never decomposed):")
        lines.extend(f"  {name}" for name in kept)
    return "\n".join(lines)
