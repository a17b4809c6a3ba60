"""The stored bisect session: its row, the replay queue of stored measurements, and the writer of
new ones (through :class:`perfq.schema.bisect_store.BisectStore`)."""

from __future__ import annotations

import uuid
from collections import deque
from pathlib import Path
from typing import Any

from perfq.errors import PerfqError
from perfq.schema.bisect_store import BisectStore


class Session:
    """The stored session: its row, the replay queue, and a writer for new measurements."""

    def __init__(self, history: Path) -> None:
        self.history = history
        self.store = BisectStore(history)
        self.id = ""
        self.replay: deque[tuple[str, int, list[float] | None, str | None]] = deque()
        self.seq = 0

    def latest_resumable(self, repo: Path) -> dict[str, Any]:
        found = self.store.latest_resumable(repo)
        if found is None:
            raise PerfqError(f"no interrupted bisect session to resume for {repo}")
        row, steps = found
        self.id = row.id
        self.replay.extend((s.commit, s.requested, s.values, s.unit) for s in steps)
        self.seq = len(self.replay)
        return {"good": row.good, "bad": row.bad, "commits": row.commits, "command": row.command,
                "build": row.build, "options": row.options}

    def has_resumable(self, repo: Path) -> bool:
        return self.store.has_resumable(repo)

    def create(self, repo: Path, commits: list[str], command: list[str], build: str | None,
               options: dict[str, Any]) -> None:
        self.id = uuid.uuid4().hex[:12]
        self.store.create(self.id, repo, commits, command, build, options)

    def record(self, commit: str, n: int, values: list[float] | None, error: str | None,
               unit: str | None) -> None:
        self.store.add_step(self.id, self.seq, commit, n, values, error, unit)
        self.seq += 1

    def finish(self, status: str, result: dict[str, Any] | None) -> None:
        self.store.finish(self.id, status, result)

    def close(self) -> None:
        """Nothing is held open between writes."""
