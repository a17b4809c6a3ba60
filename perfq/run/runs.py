"""The run's domain: a run (one side of a labelled comparison on one machine) and what it measured.

`perfq run` fills a :class:`Run` as it samples (``add_sample`` from a parsed :class:`Measurement`,
``add_failure``, ``add_invocation``); :mod:`perfq.run.store` saves and reads runs through the
history's rows (``schema.results_store``: its SQL and row types), so the store takes these types
and the schema layer below never needs them.
"""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from perfq.run.opbench import Measurement
from schema.results_rows import Failure, Invocation, RunRow, RunStatus, Sample, Side, StoredRun


def now() -> str:
    """The current UTC time as an ISO string, to the millisecond (runs started in one second keep their order)."""
    return datetime.now(UTC).replace(tzinfo=None).isoformat(timespec="milliseconds")


@dataclass
class Run:
    """One side of a comparison with what it measured so far."""

    label: str
    side: Side
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    ref: str = ""
    commit_sha: str = ""
    torch_version: str = ""
    python: str = ""
    host: str = ""
    cpu: str = ""
    started_at: str = field(default_factory=now)
    ended_at: str | None = None
    command: str = ""
    status: RunStatus = RunStatus.running
    notes: str = ""
    env: str = ""  # JSON: machine, interpreter, torch build, commit, environment overrides (perfq.run.machine)
    max_samples: int | None = None  # where its sampling stopped a decided test (samples a side)
    sample_ceiling: int | None = None  # the most samples a side it took of a test (adaptive); None: not adaptive
    samples: list[Sample] = field(default_factory=list, metadata={"internal": True})
    failures: list[Failure] = field(default_factory=list, metadata={"internal": True})
    invocations: list[Invocation] = field(default_factory=list, metadata={"internal": True})  # local: not exported
    stored_samples: int | None = field(default=None, metadata={"internal": True})  # count, when not loaded

    @property
    def sample_count(self) -> int:
        """Samples of the run (counted in the history when they were not loaded)."""
        return len(self.samples) if self.stored_samples is None else self.stored_samples

    def add_sample(self, repeat_index: int, benchmark: str, m: Measurement) -> None:
        """Append a measurement; a non-finite value (``nan``, ``inf`` printed by a benchmark) is not a
        measurement and is dropped."""
        if not math.isfinite(float(m.value)):
            return
        self.samples.append(Sample(len(self.samples), repeat_index, benchmark, m.test, m.mode, m.device, m.metric,
                                   m.unit, float(m.value)))

    def add_failure(self, benchmark: str, command: str, returncode: int | None, stderr_tail: str) -> None:
        self.failures.append(Failure(len(self.failures), benchmark, command, returncode, stderr_tail, now()))

    def add_invocation(self, seconds: float, shares: dict[tuple[str, str], float], started_at: str,
                       machine: dict[str, Any] | None = None) -> None:
        """Record one benchmark process: its wall, each measured (benchmark, test)'s share of it in seconds,
        and the contention it ran under (``machine``)."""
        tests = {f"{bench}/{test}": round(share, 4) for (bench, test), share in sorted(shares.items())}
        self.invocations.append(Invocation(len(self.invocations), float(seconds), json.dumps(tests), started_at,
                                           json.dumps(machine) if machine else ""))

    def stored(self) -> StoredRun:
        """The run as the history's rows."""
        row = RunRow(*(getattr(self, name) for name in RunRow._fields))
        return StoredRun(row, tuple(self.samples), tuple(self.failures), tuple(self.invocations))

    @classmethod
    def from_stored(cls, stored: StoredRun) -> Run:
        """A run read back from the history (its samples, or their count when they were not read)."""
        return cls(**stored.row._asdict(), samples=list(stored.samples), failures=list(stored.failures),
                   invocations=list(stored.invocations), stored_samples=stored.sample_count)
