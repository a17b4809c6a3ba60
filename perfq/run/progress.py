"""Feedback while `perfq run` works: one overall bar on a terminal, plain lines anywhere else.

On a terminal: one bar over every planned invocation (job x side x round) with the elapsed
time and the time remaining first (``0:00:21 elapsed, ~0:01:03 left``), then the current round,
side and job, cut with an ellipsis so that the line fits the terminal (80 columns included). Elsewhere (CI logs, pipes):
one line per finished invocation with the same facts, and a "still running" line whenever
nothing was printed for ``HEARTBEAT`` seconds, so a log is never silent for a minute.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Column

from common.render import plain
from perfq.run.execute import Tick, TickKind
from perfq.terminal import console

HEARTBEAT = 50.0  # seconds without a line before a "still running" line
POLL = 5.0  # how often the heartbeat looks


def clock(seconds: float) -> str:
    """``1:05`` / ``1:02:03``."""
    seconds = int(max(seconds, 0))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


BAR_FIXED = 58  # columns the bar, the counts, the failures and both times take (up to 999/999 and 99 failed)


def bar_columns(width: int) -> tuple:
    """The bar's columns for a ``width``-column terminal: the bar, done/total, failures, elapsed and left
    (never cut), then where the run is, cut with an ellipsis to what is left of the line."""
    where = Column(no_wrap=True, overflow="ellipsis", max_width=max(width - BAR_FIXED, 12))
    return (
        BarColumn(bar_width=12), MofNCompleteColumn(), TextColumn("[red]{task.fields[failed]}"),
        TimeElapsedColumn(), TextColumn("elapsed,"), TimeRemainingColumn(), TextColumn("left"),
        TextColumn("[bold]{task.fields[where]}", table_column=where),
    )


class RunFeedback:
    """A progress callback for :func:`perfq.run.execute.execute`; use as a context manager."""

    def __init__(self, total: int, rounds: int, interactive: bool, stream: TextIO | None = None) -> None:
        self.total, self.rounds, self.done, self.failed = total, rounds, 0, 0
        self.interactive = interactive
        self.stream = stream if stream is not None else sys.stderr
        self.started = self.last_line = time.monotonic()
        self.where = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bar: Progress | None = None
        self._task = None

    def __enter__(self) -> RunFeedback:
        if self.interactive:
            con = console(stderr=True)
            self._bar = Progress(*bar_columns(con.width), console=con, transient=False)
            self._task = self._bar.add_task("run", total=self.total, where="starting", failed="")
            self._bar.start()
        else:
            self._thread = threading.Thread(target=self._heartbeat, name="perfq-run-heartbeat", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._bar is not None:
            self._bar.stop()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def __call__(self, tick: Tick) -> None:
        with self._lock:
            if tick.kind == TickKind.adaptive:
                self.total += tick.units
                self.rounds = max(self.rounds, tick.round + 1)
                self._say(f"adaptive round {tick.round + 1}: {tick.units} more invocation(s) for unknown verdicts")
            elif tick.kind == TickKind.start:
                if not self.done and not self.where:  # the pace counts from the first invocation, not the setup
                    self.started = time.monotonic()
                title = tick.job.title if tick.job else ""
                self.where = plain(f"round {tick.round + 1}/{self.rounds} · {tick.side} · {title}")
            else:
                self.done += tick.units
                self.failed += bool(tick.error)
                if not tick.skipped:
                    self._finished(tick)
            if self._bar is not None:
                failed = f"{self.failed} failed" if self.failed else ""
                self._bar.update(self._task, completed=self.done, total=self.total, where=escape(self.where),
                                 failed=failed)

    def remaining(self) -> float | None:
        """Seconds left at the pace so far (None before the first invocation ends)."""
        if not self.done:
            return None
        return (time.monotonic() - self.started) / self.done * max(self.total - self.done, 0)

    def _finished(self, tick: Tick) -> None:
        if self._bar is not None:
            if tick.error:
                self._bar.console.print(f"[red]failed[/red] round {tick.round + 1} {tick.side}: "
                                        f"{escape(plain(tick.error))}")
            return
        pct = 100 * self.done // max(self.total, 1)
        left = self.remaining()
        what = f"FAILED ({tick.error})" if tick.error else f"{tick.samples} samples"
        self._say(f"[{self.done}/{self.total} {pct}%] round {tick.round + 1}/{self.rounds} {tick.side} "
                  f"{plain(tick.job.title) if tick.job else ''}: {plain(what)} in {tick.seconds:.1f} s; elapsed "
                  f"{clock(time.monotonic() - self.started)}" + (f", ~{clock(left)} left" if left is not None else ""))

    def _say(self, line: str) -> None:
        if self._bar is not None:
            self._bar.console.print(escape(line))
            return
        print(f"perfq run: {line}", file=self.stream, flush=True)
        self.last_line = time.monotonic()

    def _heartbeat(self) -> None:
        while not self._stop.wait(POLL):
            with self._lock:
                quiet = time.monotonic() - self.last_line
                if quiet >= HEARTBEAT:
                    self._say(f"still running: {self.where or 'starting'} ({clock(quiet)} since the last line, "
                              f"{self.done}/{self.total} done)")
