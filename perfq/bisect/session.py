"""The stored bisect session: its row, the replay queue of stored measurements, where the bisect
started (to put it back after a crash), and the writer of new measurements (through
:class:`schema.bisect_store.BisectStore`)."""

from __future__ import annotations

import uuid
from collections import deque
from pathlib import Path
from typing import Any

from common.errors import PerfqError
from perfq.bisect.git import Origin
from schema.bisect_store import BisectStore


class Session:
    """The stored session: its row, the replay queue, and a writer for new measurements.

    A new session is stored only once the bisect really starts (its tree stashed with consent),
    with its :class:`~perfq.bisect.git.Origin` under ``options["origin"]``; the origin is cleared
    once the tree is back, so ``--resume`` after a crash knows what to restore."""

    def __init__(self, history: Path) -> None:
        self.history = history
        self.store = BisectStore(history)
        self.id = ""
        self.options: dict[str, Any] = {}
        self.replay: deque[tuple[str, int, list[float] | None, str | None]] = deque()
        self.seq = 0

    def latest_resumable(self, repo: Path) -> dict[str, Any]:
        found = self.store.latest_resumable(repo)
        if found is None:
            raise PerfqError(f"no interrupted bisect session to resume for {repo}")
        row, steps = found
        self.id = row.id
        self.options = dict(row.options)
        self.replay.extend((s.commit, s.requested, s.values, s.unit) for s in steps)
        self.seq = len(self.replay)
        return {"good": row.good, "bad": row.bad, "commits": row.commits, "command": row.command,
                "build": row.build, "options": row.options}

    def origin(self) -> Origin | None:
        """Where the stored session started, when its tree was not put back (it was killed)."""
        return Origin.from_json(self.options.get("origin"))

    def has_resumable(self, repo: Path) -> bool:
        return self.store.has_resumable(repo)

    def start(self, repo: Path, commits: list[str], command: list[str], build: list[str] | None,
              options: dict[str, Any], origin: Origin) -> None:
        """Store a new session (or, resumed, its origin) before anything is checked out."""
        self.options = {**(self.options or options), "origin": origin.to_json()}
        if self.id:
            self.store.set_options(self.id, self.options)
            return
        self.id = uuid.uuid4().hex[:12]
        self.store.create(self.id, repo, commits, command, build, self.options)

    def restored(self) -> None:
        """The tree is back where it started: nothing to restore on ``--resume``."""
        if self.id:
            self.options = {**self.options, "origin": None}
            self.store.set_options(self.id, self.options)

    def record(self, commit: str, n: int, values: list[float] | None, error: str | None,
               unit: str | None) -> None:
        self.store.add_step(self.id, self.seq, commit, n, values, error, unit)
        self.seq += 1

    def finish(self, status: str, result: dict[str, Any] | None) -> None:
        if self.id:
            self.store.finish(self.id, status, result)

    def close(self) -> None:
        """Nothing is held open between writes."""
