"""Coverage of the Core ATen opset (OpOverloads tagged ``torch.Tag.core``) by the loaded plugins,
and of PyTorch's own op test database (op_db) as the OpInfo test module measured it.

Forward ops are counted apart from backward ones (``*_backward``: only training graphs
hold them). A forward op whose schema mutates its arguments (an in-place or ``out=``
variant, ``resize_``, the batch norm that updates its running statistics) never reaches
translation: capture functionalizes it into its functional variant first, so it needs
no converter and is listed as such rather than as missing.
"""

from __future__ import annotations

import functools

import torch

from .opnames import op_name
from .registry import Registry

__all__ = ["OPINFO_FIGURE", "core_aten_ops", "coverage", "coverage_report", "forward_coverage"]

#: The OpInfo figure (``tests/opinfo``): ops of torch's op_db whose first float32 sample
#: exports, runs in onnxruntime and matches eager, of the ops op_db tests in float32. A
#: measurement of the builtin packs, not of the loaded plugins (running op_db takes
#: minutes); ``python tests/opinfo/record.py --dtypes float32 --out o.json`` re-measures it.
OPINFO_FIGURE = (495, 668)


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


def _is_backward(name: str) -> bool:
    return "backward" in name.split("::", 1)[1].split(".", 1)[0]


def forward_coverage(registry: Registry) -> tuple[list[str], list[str], list[str]]:
    """(covered, missing, functionalized) forward Core ATen ops for ``registry``.

    ``functionalized``: ops that mutate their arguments, which capture replaces by their
    functional variants before translation (no converter is ever asked for them).
    """
    covered, missing = coverage(registry)
    functionalized = [n for n in missing if not _is_backward(n) and _overload(n)._schema.is_mutable]
    forward_missing = [n for n in missing if not _is_backward(n) and n not in functionalized]
    return [n for n in covered if not _is_backward(n)], forward_missing, functionalized


def _percent(part: int, whole: int) -> str:
    return f"{part}/{whole} covered ({100 * part / max(whole, 1):.1f}%)"


def coverage_report(registry: Registry) -> str:
    """The text ``pt2onnx ops --coverage`` prints."""
    covered, missing = coverage(registry)
    forward, forward_missing, functionalized = forward_coverage(registry)
    backward = [n for n in covered if _is_backward(n)]
    backward_missing = [n for n in missing if _is_backward(n)]
    total = len(covered) + len(missing)
    lines = [f"Core ATen opset: {_percent(len(covered), total)}"]
    lines.append(f"  forward ops: {_percent(len(forward), len(forward) + len(forward_missing))}")
    lines.append(f"  backward ops: {_percent(len(backward), len(backward) + len(backward_missing))}")
    passing, tested = OPINFO_FIGURE
    lines.append(
        f"OpInfo (torch's op_db, first float32 sample, builtin packs): {passing}/{tested} ops pass "
        f"({100 * passing / max(tested, 1):.1f}%; tests/opinfo)"
    )
    if forward_missing:
        lines.append("missing (forward):")
        lines.extend(f"  {name}" for name in forward_missing)
    if functionalized:
        lines.append("not counted: they mutate their arguments, so capture functionalizes them before translation:")
        lines.extend(f"  {name}" for name in functionalized)
    if backward_missing:
        lines.append("missing (backward; only training graphs hold them):")
        lines.extend(f"  {name}" for name in backward_missing)
    kept = sorted(registry.kept)
    if kept:
        lines.append("kept whole (never decomposed):")
        lines.extend(f"  {name}" for name in kept)
    return "\n".join(lines)
