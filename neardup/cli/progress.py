"""Per-stage progress rows for the CLI: counts, %, rate, elapsed and ETA, on stderr.

Shown only on a terminal (stderr a tty) and without ``-q``; otherwise every method is a no-op,
so piped or logged runs carry no progress output. Rows stay on screen when the run ends, so the
time each stage took remains visible above the summary.

:func:`neardup.dedup` reports ``progress(stage, done, total)``. A stage that reports only its
start and end (``total == 1``) is shown in documents (the corpus size, once known), so its
count and rate are in documents; a stage that reports finer counts is shown in its own units
(pairs for ``verify``, MB for a store load's ``identify`` and ``check`` of its inputs,
documents otherwise) with a % and an ETA that follow them. The CLI's own stages (``read``, ``write``) are driven through :meth:`StageProgress.begin`,
:meth:`~StageProgress.advance` and :meth:`~StageProgress.end`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import _jit

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["StageProgress"]

#: units of stages that report real counts (not just start/end); others count documents
_UNITS = {"verify": "pairs", "check": "bytes", "identify": "bytes", "group": "groups"}
#: units counted in one thing and shown in another: bytes as MB
_SHOWN = {"bytes": ("MB", 1e6)}


def _hms(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def _shown(unit: str) -> tuple[str, float]:
    """The unit a count is shown in, and what one of it is in the counted unit."""
    return _SHOWN.get(unit, (unit, 1.0))


def _rate(task: Any) -> float | None:
    """Items per second: a finished stage's average; a running stage's recent rate (rich's
    30 s window, once it has two samples), else its average so far."""
    if task.finished:
        return task.completed / task.finished_time if task.finished_time else None
    if task.speed:
        return float(task.speed)
    return task.completed / task.elapsed if task.elapsed and task.completed else None


def _columns() -> list[Any]:
    from rich.progress import BarColumn, ProgressColumn, TaskProgressColumn, TextColumn
    from rich.text import Text

    class CountColumn(ProgressColumn):
        """``1,234/5,800 docs``, or ``1,234 docs`` while the total is unknown."""

        def render(self, task: Any) -> Text:
            unit, scale = _shown(task.fields.get("unit", ""))
            big = max(task.total or 0, task.completed) / scale >= 10 or scale == 1
            fmt = ",.0f" if big else ",.1f"  # 0.4/2.5 MB, not 0/2 MB
            done = format(task.completed / scale, fmt)
            if task.total is not None:
                done += "/" + format(task.total / scale, fmt)
            return Text(f"{done} {unit}".rstrip(), style="progress.download")

    class RateColumn(ProgressColumn):
        """Items per second (see :func:`_rate`)."""

        def render(self, task: Any) -> Text:
            speed = _rate(task)
            if not speed:
                return Text("")
            unit, scale = _shown(task.fields.get("unit", ""))
            speed /= scale
            text = f"{speed:,.0f}" if speed >= 10 else f"{speed:.3g}"
            return Text(f"{text} {unit}/s", style="progress.data.speed")

    class ElapsedColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            elapsed = task.finished_time if task.finished else task.elapsed
            return Text(_hms(elapsed or 0.0), style="progress.elapsed")

    class EtaColumn(ProgressColumn):
        """``eta H:MM:SS`` while running (``eta -:--:--`` until it can be estimated); nothing
        when the total is unknown (reading) or the stage is done. While a kernel compiles (a
        cold kernel cache: the first run), a running row says so instead of sitting at 0 %."""

        def render(self, task: Any) -> Text:
            if not task.finished and (state := _jit.compiling_now()) is not None:
                name, n = state
                return Text(f"compiling kernel {n} ({name}), first run only", style="yellow")
            if task.finished or task.total is None:
                return Text("")
            speed = _rate(task)
            left = None if not speed or task.total is None else task.remaining / speed
            return Text(
                "eta " + ("-:--:--" if left is None else _hms(left)), style="progress.remaining"
            )

    return [
        TextColumn("{task.description:<11}"),
        BarColumn(bar_width=24),
        TaskProgressColumn(),
        CountColumn(),
        RateColumn(),
        ElapsedColumn(),
        EtaColumn(),
    ]


class StageProgress:
    """Progress rows, one per stage; a no-op when ``enabled`` is false.

    Use as a context manager (the display runs inside it); the instance itself is the
    ``progress(stage, done, total)`` callback :func:`neardup.dedup` takes.
    """

    def __init__(
        self,
        enabled: bool,
        *,
        console: Console | None = None,
        get_time: Callable[[], float] | None = None,
    ) -> None:
        self.enabled = enabled
        self.documents: int | None = None  # the corpus size, once read
        self._tasks: dict[str, Any] = {}
        self._progress: Any = None
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import Progress

        self._progress = Progress(
            *_columns(),
            console=console or Console(stderr=True),
            transient=False,
            get_time=get_time,
        )

    @classmethod
    def for_stderr(cls, quiet: bool) -> StageProgress:
        """Enabled when stderr is a terminal and ``-q`` was not given."""
        return cls(not quiet and sys.stderr.isatty())

    def __enter__(self) -> StageProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def begin(self, stage: str, total: int | None = None, unit: str = "docs") -> None:
        """Show a row for ``stage`` (its total may be unknown: no %, no ETA)."""
        if self._progress is None:
            return
        if stage in self._tasks:
            self._progress.update(self._tasks[stage], total=total, unit=unit)
        else:
            self._tasks[stage] = self._progress.add_task(stage, total=total, unit=unit)

    def advance(self, stage: str, completed: int) -> None:
        """Set ``stage``'s count so far."""
        if self._progress is None:
            return
        if stage not in self._tasks:
            self.begin(stage)
        self._progress.update(self._tasks[stage], completed=completed)

    def end(self, stage: str, completed: int | None = None) -> None:
        """Mark ``stage`` done (its total becomes its final count when it was unknown)."""
        if self._progress is None:
            return
        if stage not in self._tasks:
            self.begin(stage)
        task_id = self._tasks[stage]
        task = self._progress.tasks[task_id]
        done = task.completed if completed is None else completed
        total = task.total if task.total is not None else done
        self._progress.update(task_id, completed=max(done, total), total=total)

    def __call__(self, stage: str, done: int, total: int) -> None:
        """The :func:`neardup.dedup` callback."""
        if self._progress is None:
            return
        if total <= 1 and self.documents is not None:  # start/end only: count documents
            unit, scale = "docs", self.documents
            done, total = done * scale // max(total, 1), scale
        else:
            unit = _UNITS.get(stage, "docs")
        task_id = self._tasks.get(stage)
        if task_id is None:
            self._tasks[stage] = self._progress.add_task(
                stage, total=total, completed=done, unit=unit
            )
        else:
            self._progress.update(task_id, total=total, completed=done, unit=unit)
