"""Progress on a terminal: a live line per phase while an export runs (rich).

Shown on stderr only when stderr is a terminal, so logs, pipes, CI and notebooks stay
clean; ``quiet=True`` (``--quiet`` on the command line) turns it off everywhere. Each
line disappears when its phase ends: the report keeps the timings.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

__all__ = ["Advance", "Progress"]

#: Called with how much of a phase's total was just done (nodes, bytes).
Advance = Callable[[int], None]


def _nothing(_: int = 1) -> None:
    """The advance of a silent progress."""


class Progress:
    """Live progress of the phases of one export, or nothing when ``enabled`` is false."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    @classmethod
    def for_terminal(cls, quiet: bool = False) -> Progress:
        """Enabled when stderr is a terminal and ``quiet`` is false."""
        return cls(not quiet and sys.stderr.isatty())

    @contextmanager
    def phase(
        self, name: str, total: int | None = None, unit: Literal["nodes", "bytes"] = "nodes"
    ) -> Iterator[Advance]:
        """Show ``name`` while the block runs; the block calls the yielded function to advance.

        With a ``total`` the line shows a bar and the count (``unit``: ``nodes`` or
        ``bytes``); without one, a spinner and the elapsed time.
        """
        if not self.enabled:
            yield _nothing
            return
        # rich is imported only when something is shown.
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            MofNCompleteColumn,
            ProgressColumn,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.progress import Progress as RichProgress

        columns: list[ProgressColumn] = [SpinnerColumn(), TextColumn("pt2onnx {task.description:<10}")]
        if total is not None:
            columns += [BarColumn(), DownloadColumn() if unit == "bytes" else MofNCompleteColumn()]
            if unit == "nodes":
                columns.append(TextColumn("nodes"))
        columns.append(TimeElapsedColumn())
        display = RichProgress(*columns, console=Console(file=sys.stderr), transient=True)
        task = display.add_task(name, total=total)

        def advance(amount: int = 1) -> None:
            display.advance(task, amount)

        with display:
            yield advance
