"""Bisect sessions in the results history (tables of migration 0003_bisect.sql).

Every write is one statement in its own transaction with the file open only meanwhile, so
other perfq commands (even the benchmark being bisected) can use the history between steps;
a lock held by one of them is waited for (up to ~30 s).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, NamedTuple

from common.errors import PerfqError
from schema.db import transaction
from schema.engine import duckdb
from schema.history import connect_history

RESUMABLE = ("running", "interrupted")


class SessionRow(NamedTuple):
    """A stored session, JSON columns decoded."""

    id: str
    good: str
    bad: str
    commits: list[str]
    command: list[str]
    build: str | None  # JSON argv (a plain string from an older perfq: a shell command)
    options: dict[str, Any]


class StepRow(NamedTuple):
    """One stored measurement: ``values`` is None when the build or a run failed."""

    commit: str
    requested: int
    values: list[float] | None
    unit: str | None


class BisectStore:
    """Named queries on ``bisect_sessions`` and ``bisect_steps`` of the history at ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if path.exists():  # check/migrate now: a locked or corrupt file fails early; a missing one is made by a write
            connect_history(path).close()

    def latest_resumable(self, repo: Path) -> tuple[SessionRow, list[StepRow]] | None:
        """The newest running or interrupted session of ``repo`` and its steps, or None (no history:
        none is created)."""
        if not self.path.exists():
            return None
        con = connect_history(self.path)
        try:
            row = con.execute(
                "SELECT id, good, bad, commits, command, build, options FROM bisect_sessions "
                "WHERE repo = ? AND status IN ('running', 'interrupted') ORDER BY started_at DESC LIMIT 1",
                [str(repo)]).fetchone()
            if row is None:
                return None
            steps = con.execute(
                "SELECT commit_sha, requested, ok, run_values, unit FROM bisect_steps WHERE session_id = ? "
                "ORDER BY seq", [row[0]]).fetchall()
        finally:
            con.close()
        session = SessionRow(row[0], row[1], row[2], json.loads(row[3]), json.loads(row[4]), row[5],
                             json.loads(row[6]))
        return session, [StepRow(sha, n, json.loads(vals) if ok else None, unit) for sha, n, ok, vals, unit in steps]

    def has_resumable(self, repo: Path) -> bool:
        if not self.path.exists():
            return False
        con = connect_history(self.path)
        try:
            return con.execute("SELECT count(*) FROM bisect_sessions WHERE repo = ? AND status IN "
                               "('running', 'interrupted')", [str(repo)]).fetchone()[0] > 0
        finally:
            con.close()

    def create(self, session_id: str, repo: Path, commits: list[str], command: list[str], build: list[str] | None,
               options: dict[str, Any]) -> None:
        """A running session; ``build`` is stored as a JSON argv (a plain string: an older perfq's)."""
        self._tx("INSERT INTO bisect_sessions (id, repo, good, bad, commits, command, build, options, "
                 "status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'running')",
                 [session_id, str(repo), commits[0], commits[-1], json.dumps(commits), json.dumps(command),
                  json.dumps(build) if build else None, json.dumps(options)])

    def set_options(self, session_id: str, options: dict[str, Any]) -> None:
        self._tx("UPDATE bisect_sessions SET options = ?, updated_at = current_timestamp WHERE id = ?",
                 [json.dumps(options), session_id])

    def add_step(self, session_id: str, seq: int, commit: str, requested: int, values: list[float] | None,
                 error: str | None, unit: str | None) -> None:
        self._tx("INSERT INTO bisect_steps (session_id, seq, commit_sha, requested, ok, run_values, error, "
                 "unit) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                 [session_id, seq, commit, requested, values is not None,
                  json.dumps(values) if values is not None else None, error, unit])

    def finish(self, session_id: str, status: str, result: dict[str, Any] | None) -> None:
        self._tx("UPDATE bisect_sessions SET status = ?, result = ?, updated_at = current_timestamp "
                 "WHERE id = ?", [status, json.dumps(result, default=str) if result else None, session_id])

    def _tx(self, sql: str, params: list[Any]) -> None:
        for attempt in range(150):
            try:
                con = connect_history(self.path)
                break
            except PerfqError as exc:
                if "locked" not in str(exc) or attempt == 149:
                    raise
                time.sleep(0.2)
        try:
            with transaction(con):
                con.execute(sql, params)
        except duckdb.Error as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise PerfqError(f"cannot write the bisect session to {self.path}: {first}") from None
        finally:
            con.close()
