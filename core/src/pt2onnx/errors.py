"""The pt2onnx exception hierarchy.

Every error says which phase failed and, where there is one, which FX node, which
aten op, which line of the user's code and which module made it, and what to do next.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CaptureError",
    "ConversionError",
    "DecompositionError",
    "GuardedSizeWarning",
    "NodeLocation",
    "OptimizationError",
    "OptionError",
    "PluginConflictError",
    "PluginError",
    "PluginLoadWarning",
    "PluginNameWarning",
    "Pt2OnnxError",
    "SaveError",
    "UnsupportedArgumentError",
    "UnsupportedOpsError",
    "VerificationError",
    "WeightsError",
]


@dataclass(frozen=True)
class NodeLocation:
    """Where an FX node came from: its name, its op, the user's source line and module."""

    node: str
    op: str
    source: str | None = None
    module_path: str | None = None

    def describe(self) -> str:
        lines = [f"  FX node: {self.node}", f"  op: {self.op}"]
        if self.module_path:
            lines.append(f"  module: {self.module_path}")
        if self.source:
            lines.append(f"  source: {self.source}")
        return "\n".join(lines)


class Pt2OnnxError(Exception):
    """Base class of every error pt2onnx raises.

    Attributes:
        phase: the pipeline phase that failed (``plugins``, ``capture``, ``decompose``,
            ``translate``, ``optimize``, ``save``, ``run``, ``verify``).
        location: the FX node the error is about, when there is one.
        hint: what the user can do next.
    """

    phase: str = "export"

    def __init__(
        self,
        message: str,
        *,
        location: NodeLocation | None = None,
        hint: str | None = None,
        phase: str | None = None,
    ) -> None:
        if phase is not None:
            self.phase = phase
        self.message = message
        self.location = location
        self.hint = hint
        super().__init__(self._render())

    def at(self, location: NodeLocation) -> Pt2OnnxError:
        """Attach the FX node this error is about (the core does it for converters)."""
        self.location = location
        self.args = (self._render(),)
        return self

    def _render(self) -> str:
        parts = [f"[{self.phase}] {self.message}"]
        if self.location is not None:
            parts.append(self.location.describe())
        if self.hint:
            parts.append(f"  what to do: {self.hint}")
        return "\n".join(parts)


class OptionError(Pt2OnnxError, ValueError):
    """An argument of :func:`pt2onnx.export` (or an option of the command line) is out of range."""

    phase = "options"


class PluginError(Pt2OnnxError):
    """A plugin passed with ``plugins=`` is not a plugin, cannot be imported or registers wrongly;
    or the project's ``[tool.pt2onnx]`` cannot be used as written (its pyproject.toml does not
    parse, the table has an unknown key, a plugin it names cannot be imported or registers
    wrongly), unless it says ``on_error = "warn"``."""

    phase = "plugins"


class PluginConflictError(PluginError):
    """Two plugins of the same layer registered the same op and neither said ``override=True``.

    Raised only by an export that reaches the op; ``pt2onnx plugins`` and ``pt2onnx ops``
    list the conflict instead.
    """


class PluginLoadWarning(UserWarning):
    """An installed plugin (or, with ``on_error = "warn"``, the project's config or plugin) failed to load
    or register; the export goes on without it."""


class GuardedSizeWarning(UserWarning):
    """``run()`` or ``verify()`` was given sizes torch's captured program refuses (a guard on input
    sizes fails): the ONNX graph cannot check guards, and its results there are not vouched for."""


class PluginNameWarning(UserWarning):
    """``-p no:NAME``, ``disable=`` or ``PT2ONNX_PLUGINS`` names a plugin that does not exist."""


class CaptureError(Pt2OnnxError):
    """``torch.export.export`` could not capture the model."""

    phase = "capture"


class DecompositionError(Pt2OnnxError):
    """Running the decomposition table over the captured program failed."""

    phase = "decompose"


class UnsupportedOpsError(Pt2OnnxError):
    """The graph holds ops no plugin converts; lists all of them at once with their counts.

    ``notes`` says per op whether torch has a decomposition for it and why it was not used;
    ``other_opsets`` names, for an op converted only at other opsets than the target, those
    opsets and the minimum one that converts it.
    """

    phase = "translate"
    DEFAULT_HINT = (
        "install a converter pack that covers these ops, write a converter plugin "
        "(see docs/plugins.md), or rewrite the model code so it avoids them"
    )

    def __init__(
        self,
        unsupported: dict[str, list[NodeLocation]],
        *,
        hint: str | None = None,
        notes: dict[str, str] | None = None,
        other_opsets: dict[str, str] | None = None,
    ) -> None:
        self.unsupported = unsupported
        self.notes = dict(notes or {})
        self.other_opsets = dict(other_opsets or {})
        lines = [f"{len(unsupported)} op(s) in the graph have no converter:"]
        for op, locations in sorted(unsupported.items()):
            first = locations[0]
            where = f" (first at {first.source})" if first.source else ""
            module = f" in {first.module_path}" if first.module_path else ""
            lines.append(f"  - {op}: {len(locations)} node(s), e.g. {first.node}{module}{where}")
            if op in self.other_opsets:
                lines.append(f"      opsets: {self.other_opsets[op]}")
            if op in self.notes:
                lines.append(f"      decomposition: {self.notes[op]}")
        super().__init__(
            "\n".join(lines),
            hint=hint or self.DEFAULT_HINT,
        )


class ConversionError(Pt2OnnxError):
    """A converter failed, or produced something that disagrees with torch's metadata."""

    phase = "translate"


class UnsupportedArgumentError(Pt2OnnxError):
    """Raised by a converter for an argument value it cannot express in ONNX.

    Converters raise it with the argument and its value; the core adds the node, the
    op and the user's source line before the user sees it. ``since`` is the oldest opset
    that exports this argument, when only the target opset is too old for it.
    """

    phase = "translate"

    def __init__(self, argument: str, value: object, reason: str, *, hint: str | None = None, since: int | None = None):
        self.argument = argument
        self.value = value
        self.reason = reason
        self.since = since
        super().__init__(f"argument {argument}={value!r} cannot be exported: {reason}", hint=hint)


class ConverterDeclined(Exception):
    """Raised by a converter (``raise op.decline(reason)``) that leaves this node to the next one.

    Not an error: the core removes what the converter emitted for the node and calls the
    registration it shadows (the next layer down: an installed pack's converter declines
    to the builtin one). Only when every converter of the op declines does the export stop,
    with a :class:`ConversionError` that lists their reasons.
    """

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


class OptimizationError(Pt2OnnxError):
    """An optimization pass failed."""

    phase = "optimize"


class SaveError(Pt2OnnxError):
    """The model could not be written; no partial file is left behind."""

    phase = "save"


class WeightsError(Pt2OnnxError):
    """The weights given with ``weights=`` do not match the model, or values it needs are absent."""

    phase = "weights"


class VerificationError(Pt2OnnxError):
    """Running the exported model, or comparing it with eager PyTorch, failed."""

    phase = "verify"
