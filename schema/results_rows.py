"""The results history's rows, typed: what ``schema.results_store`` writes and reads (no database here).

One ``StoredRun`` per run: its ``runs`` row and its rows of ``samples``, ``failures`` and
``invocations`` (tables of migrations 0001_runs.sql and 0005_invocations.sql), with the
vocabularies the tables hold (``Side``, ``RunStatus``). The run's domain, ``perfq.run.runs.Run``,
is made from and into these by ``perfq.run.store``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

SAMPLE_FIELDS = ("seq", "repeat_index", "benchmark", "test", "mode", "device", "metric", "unit", "value")
FAILURE_FIELDS = ("seq", "benchmark", "command", "returncode", "stderr_tail", "failed_at")
INVOCATION_FIELDS = ("seq", "seconds", "tests", "started_at", "machine")


class Side(str, Enum):
    """Which side of a labelled comparison a run measured."""

    base = "base"
    head = "head"


@dataclass(frozen=True)
class Sample:
    """One measured value of one test in one invocation (``seq`` numbers a run's samples)."""

    seq: int
    repeat_index: int
    benchmark: str
    test: str
    mode: str
    device: str
    metric: str
    unit: str
    value: float


@dataclass(frozen=True)
class Failure:
    """A benchmark invocation that failed (non-zero exit, time-out, nothing parsable)."""

    seq: int
    benchmark: str
    command: str
    returncode: int | None
    stderr_tail: str
    failed_at: str


@dataclass(frozen=True)
class Invocation:
    """One benchmark process of a run: its wall time and the tests it measured (JSON: "bench/test" -> seconds)."""

    seq: int
    seconds: float
    tests: str
    started_at: str
    machine: str = ""  # JSON: the contention it ran under (perfq.run.machine.Contention); '' when not measured


class RunStatus(str, Enum):
    """Where a run is: started, finished, or stopped early (Ctrl-C) with what it measured so far."""

    running = "running"
    complete = "complete"
    incomplete = "incomplete"


class RunRow(NamedTuple):
    """A row of ``runs``: one side of a labelled comparison on one machine."""

    id: str
    label: str
    side: str
    ref: str
    commit_sha: str
    torch_version: str
    python: str
    host: str
    cpu: str
    started_at: str | None
    ended_at: str | None
    command: str
    status: str
    notes: str
    env: str
    max_samples: int | None = None  # samples a side where sampling stopped a decided test (migration 0007)
    sample_ceiling: int | None = None  # the most samples a side an adaptive run took of a test; None: not adaptive


RUN_FIELDS = RunRow._fields


class StoredRun(NamedTuple):
    """A run as the history holds it: its row and its rows of samples, failures and invocations
    (read back: the samples, or only their ``sample_count``; no invocations)."""

    row: RunRow
    samples: tuple[Sample, ...] = ()
    failures: tuple[Failure, ...] = ()
    invocations: tuple[Invocation, ...] = ()
    sample_count: int | None = None
