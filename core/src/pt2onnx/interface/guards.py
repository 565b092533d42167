"""The sizes a captured program accepts: torch's guards on input sizes, which ONNX cannot carry.

A dim torch keeps dynamic may still be narrowed by the model's code. timm's MobileViT
pads its feature map to whole patches with a Python ``if``, so torch's program guards
``(x_dim2 - 1)//32 + 1 == 2`` and accepts heights 57..64 only; ``ep.module()`` checks that
before it runs. An ONNX graph has no guards: at another height onnxruntime stops in a
``Reshape`` and OpenVINO returns garbage. :class:`SizeGuards` keeps the guards whose
symbols are whole input dims, says which sizes each dim accepts (``report.guarded_sizes``,
scanned dim by dim around the example) and names the first guard given sizes fail
(``ExportResult.guard_failure``; ``run`` warns with it).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sympy  # type: ignore[import-untyped]  # torch's own dependency, untyped
import torch
from torch.export import ExportedProgram
from torch.fx.experimental.symbolic_shapes import SYMPY_INTERP
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.printers import PythonPrinter

from .calling import captured_inputs

__all__ = ["SizeGuards"]

#: How far above the example a dim's sizes are scanned: up to this many times its size ...
_SCAN_FACTOR = 4
#: ... and at least up to this size, at most this many sizes per dim.
_SCAN_FLOOR, _SCAN_MAX = 256, 4096


def _shape_env(program: ExportedProgram) -> Any:
    for node in program.graph.nodes:
        val = node.meta.get("val")
        sizes = val.shape if isinstance(val, torch.Tensor) else (val,)
        for size in sizes:
            if isinstance(size, torch.SymInt):
                return size.node.shape_env
    return None


class SizeGuards:
    """torch's guards on a captured program's input sizes, compiled to check sizes fast.

    Input dims are addressed by the index of the user input (in flattened order) and axis.
    """

    def __init__(
        self,
        dims: Mapping[tuple[int, int], str],
        ranges: Mapping[str, tuple[int, float]],
        guards: Sequence[str],
        example: Mapping[str, int],
    ) -> None:
        #: (input index, axis) -> the dim's name; ranges: name -> (lowest, highest) size;
        #: example: name -> its size in the example inputs.
        self.dims, self.ranges = dict(dims), dict(ranges)
        self.example = dict(example)
        parameters = ", ".join(sorted(set(self.dims.values())))
        namespace = {**SYMPY_INTERP, "math": math}
        # One function per guard (to name the one that fails), and one for all (to scan fast).
        # A guard that Python does not read as torch printed it (or that fails at the example,
        # where every guard holds) is dropped: the check must never refuse the example.
        self.guards: list[str] = []
        self._each: list[Callable[..., bool]] = []
        for guard in guards:
            try:
                check = eval(f"lambda {parameters}: {guard}", namespace)
                holds = bool(check(**self.example))
            except Exception:  # noqa: BLE001 (any failure to read the guard drops it, as above)
                continue
            if holds:
                self.guards.append(guard)
                self._each.append(check)
        everything = " and ".join(f"({g})" for g in self.guards) or "True"
        self._all: Callable[..., bool] = eval(f"lambda {parameters}: {everything}", namespace)

    @classmethod
    def of(cls, program: ExportedProgram, names: Mapping[str, str] | None = None) -> SizeGuards:
        """The guards of ``program`` on its input dims; ``names`` maps torch's symbols to dim names."""
        names = dict(names or {})
        symbols: dict[sympy.Symbol, str] = {}
        hints: dict[sympy.Symbol, int] = {}
        dims: dict[tuple[int, int], str] = {}
        for index, (input_name, fake) in enumerate(captured_inputs(program).items()):
            if not isinstance(fake, torch.Tensor):
                continue
            for axis, size in enumerate(fake.shape):
                if isinstance(size, torch.SymInt) and size.node.expr.is_symbol:
                    symbol = size.node.expr
                    name = symbols.setdefault(symbol, names.get(str(symbol), f"{input_name}_dim{axis}"))
                    dims[(index, axis)] = name
                    hints[symbol] = int(size.node.hint)
        env = _shape_env(program)
        if env is None or not symbols:
            return cls(dims, {}, [], {})
        as_names = {s: sympy.Symbol(_identifier(n), integer=True) for s, n in symbols.items()}
        printer = PythonPrinter()
        guards = [
            printer.doprint(g.expr.xreplace(as_names))
            for g in env.guards
            if g.expr.free_symbols and g.expr.free_symbols <= symbols.keys()
        ]
        ranges = {}
        for symbol, name in symbols.items():
            # The program's ranges. A floor of 2 is torch's specialization of 0 and 1 while
            # tracing, not the model's: the graph is held to those sizes by its numerics.
            bounds = program.range_constraints.get(symbol)
            lower = _finite(bounds.lower if bounds is not None else None, 0)
            upper = _finite(bounds.upper if bounds is not None else None, math.inf)
            ranges[_identifier(name)] = (0 if lower <= 2 else lower, upper)
        example = {_identifier(name): hints[symbol] for symbol, name in symbols.items()}
        return cls({k: _identifier(v) for k, v in dims.items()}, ranges, guards, example)

    def sizes(self, inputs: Sequence[Any]) -> dict[str, int]:
        """Each dim's size in ``inputs`` (the user inputs in flattened order)."""
        sizes: dict[str, int] = {}
        for (index, axis), name in self.dims.items():
            value = inputs[index] if index < len(inputs) else None
            if isinstance(value, torch.Tensor) and axis < value.dim():
                sizes.setdefault(name, int(value.shape[axis]))
        return sizes

    def failure(self, sizes: Mapping[str, int]) -> str | None:
        """Why torch's program refuses these dim sizes (a range or the first guard that fails), or None."""
        if set(sizes) != set(self.ranges):
            return None  # an input left out or of another structure: matching reports that
        for name, (lower, upper) in self.ranges.items():
            if sizes[name] < lower:
                return f"{name} = {sizes[name]} is below {lower}, the least the program takes"
            if sizes[name] > upper:
                return f"{name} = {sizes[name]} is above {upper}, the most the program takes"
        for guard, check in zip(self.guards, self._each):
            if not _holds(check, sizes):
                return f"{guard} fails at {', '.join(f'{n} = {v}' for n, v in sorted(sizes.items()))}"
        return None

    def accepted(self) -> dict[str, str]:
        """Each dim whose guards refuse some sizes in its range, with the sizes they accept.

        A dim is scanned from 2 (torch's floor for a dynamic dim) to ``max(4 x its example
        size, 256)``, with the other dims at the example's sizes; a bound of its range (a
        position table's) narrows it too.
        """
        example = self.example
        guarded = {name for guard in self.guards for name in re.findall(r"[A-Za-z_]\w*", guard)}
        narrowed = {}
        for name, (lower, upper) in sorted(self.ranges.items()):
            if name not in guarded and lower == 0 and upper == math.inf:
                continue  # no guard names it and its range is torch's own: nothing to scan
            start = 2  # torch's floor for a dynamic dim while tracing: 0 and 1 are special cases
            top = min(max(_SCAN_FACTOR * example[name], _SCAN_FLOOR), start + _SCAN_MAX - 1)
            sizes = dict(example)
            accepted = []
            for size in range(start, top + 1):
                sizes[name] = size
                if lower <= size <= upper and _holds(self._all, sizes):
                    accepted.append(size)
            if len(accepted) < top + 1 - start:
                narrowed[name] = f"{_describe(accepted)} of {start}..{top} tried (the other dims as in the example)"
        return narrowed


def _identifier(name: str) -> str:
    """``name`` as a Python identifier (dim names come from input names and the user's ``Dim`` names)."""
    text = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return text if text.isidentifier() else f"d_{text}"


def _finite(bound: Any, default: float) -> Any:
    """A range bound as an int; ``default`` for an infinite one (torch's ``int_oo``, sympy's ``oo``)."""
    if bound is None or bound in (int_oo, -int_oo, sympy.oo, -sympy.oo):
        return default
    return int(bound)


def _holds(check: Callable[..., bool], sizes: Mapping[str, int]) -> bool:
    try:
        return bool(check(**sizes))
    except (ArithmeticError, ValueError):  # a guard that divides by a size of 0: refused
        return False


def _describe(sizes: list[int]) -> str:
    """``57..64``, ``8, 16..24``, ``8, 16, ..., 256 (every 8)`` or a count with the ends."""
    if not sizes:
        return "none"
    runs: list[list[int]] = []
    for size in sizes:
        if runs and size == runs[-1][1] + 1:
            runs[-1][1] = size
        else:
            runs.append([size, size])
    if len(runs) <= 3:
        return ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in runs)
    step = math.gcd(*(b - a for a, b in itertools.pairwise(sizes)))
    if sizes == list(range(sizes[0], sizes[-1] + 1, step)):
        return f"{sizes[0]}, {sizes[1]}, ..., {sizes[-1]} (every {step})"
    return f"{len(sizes)} sizes from {sizes[0]} to {sizes[-1]}"
