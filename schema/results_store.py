"""The results history's runs, samples and failures (tables of migration 0001_runs.sql).

A run is one side (base or head) of a labelled comparison on one machine. Its id is a
uuid that travels with the export, so merging the result files of many CI jobs into
one DuckDB is idempotent: rows are keyed by (run id, sequence number) and inserted only
when missing; a run that was incomplete locally becomes complete if the import has it so.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple

import duckdb

from perfq.errors import PerfqError
from perfq.schema.db import open_db
from perfq.schema.history import connect_history

RUN_FIELDS = (
    "id",
    "label",
    "side",
    "ref",
    "commit_sha",
    "torch_version",
    "python",
    "host",
    "cpu",
    "started_at",
    "ended_at",
    "command",
    "status",
    "notes",
    "env",
)
SAMPLE_FIELDS = ("seq", "repeat_index", "benchmark", "test", "mode", "device", "metric", "unit", "value")
FAILURE_FIELDS = ("seq", "benchmark", "command", "returncode", "stderr_tail", "failed_at")


def now() -> str:
    """The current UTC time as an ISO string (what runs store)."""
    return datetime.now(UTC).replace(tzinfo=None).isoformat(timespec="seconds")


@dataclass
class Sample:
    seq: int
    repeat_index: int
    benchmark: str
    test: str
    mode: str
    device: str
    metric: str
    unit: str
    value: float


@dataclass
class Failure:
    seq: int
    benchmark: str
    command: str
    returncode: int | None
    stderr_tail: str
    failed_at: str


class RunStatus(str, Enum):
    """Where a run is: started, finished, or stopped early (Ctrl-C) with what it measured so far."""

    running = "running"
    complete = "complete"
    incomplete = "incomplete"


@dataclass
class Run:
    """One side of a comparison with what it measured so far."""

    label: str
    side: str
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
    status: str = RunStatus.running  # a RunStatus; imported files may carry other words
    notes: str = ""
    env: str = ""  # JSON: machine, interpreter, torch build, commit, environment overrides (perfq.run.machine)
    samples: list[Sample] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)

    def add_sample(self, repeat_index: int, benchmark: str, m: Any) -> None:
        """Append a measurement (anything with test/mode/device/metric/unit/value)."""
        self.samples.append(
            Sample(
                len(self.samples),
                repeat_index,
                benchmark,
                m.test,
                m.mode,
                m.device,
                m.metric,
                m.unit,
                float(m.value),
            )
        )

    def add_failure(self, benchmark: str, command: str, returncode: int | None, stderr_tail: str) -> None:
        self.failures.append(Failure(len(self.failures), benchmark, command, returncode, stderr_tail, now()))

    def row(self) -> list[Any]:
        return [getattr(self, f) for f in RUN_FIELDS]


def _write(con: duckdb.DuckDBPyConnection, runs: list[Run]) -> tuple[int, int, int]:
    """Insert missing rows of ``runs``; returns (new runs, new samples, new failures)."""
    new_runs = new_samples = new_failures = 0
    for run in runs:
        existing = con.execute("SELECT status FROM runs WHERE id = ?", [run.id]).fetchone()
        if existing is None:
            placeholders = ", ".join("?" for _ in RUN_FIELDS)
            con.execute(f"INSERT INTO runs ({', '.join(RUN_FIELDS)}) VALUES ({placeholders})", run.row())
            new_runs += 1
        elif existing[0] != RunStatus.complete:
            con.execute(
                "UPDATE runs SET status = ?, ended_at = ?, notes = ? WHERE id = ?",
                [run.status, run.ended_at, run.notes, run.id],
            )
        new_samples += _insert_missing(con, "samples", SAMPLE_FIELDS, run.id, run.samples)
        new_failures += _insert_missing(con, "failures", FAILURE_FIELDS, run.id, run.failures)
    return new_runs, new_samples, new_failures


def _insert_missing(con: duckdb.DuckDBPyConnection, table: str, fields: list[str] | tuple[str, ...], run_id: str,
                    items: list[Any]) -> int:
    """Insert the ``items`` of a run (samples or failures) whose ``seq`` is not stored yet."""
    have = {r[0] for r in con.execute(f"SELECT seq FROM {table} WHERE run_id = ?", [run_id]).fetchall()}
    rows = [[run_id, *[getattr(item, f) for f in fields]] for item in items if item.seq not in have]
    if rows:
        con.executemany(
            f"INSERT INTO {table} (run_id, {', '.join(fields)}) VALUES (?, {', '.join('?' for _ in fields)})", rows
        )
    return len(rows)


def save_runs(history: Path, runs: list[Run]) -> tuple[int, int, int]:
    """Write ``runs`` (and their new samples/failures) to the history in one transaction."""
    con = connect_history(history)
    try:
        con.execute("BEGIN TRANSACTION")
        try:
            counts = _write(con, runs)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    except duckdb.Error as exc:
        raise PerfqError(f"cannot write results to {history}: {str(exc).splitlines()[0]}") from None
    finally:
        con.close()
    return counts


def run_from_dict(data: dict[str, Any]) -> Run:
    run = Run(**{k: data.get(k) for k in RUN_FIELDS if k in data})
    run.samples = [Sample(**{k: s.get(k) for k in SAMPLE_FIELDS}) for s in data.get("samples", [])]
    run.failures = [Failure(**{k: f.get(k) for k in FAILURE_FIELDS}) for f in data.get("failures", [])]
    for k in ("started_at", "ended_at"):
        value = getattr(run, k)
        if value is not None and not isinstance(value, str):
            setattr(run, k, str(value))
    return run


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    cur = con.execute(sql, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def read_runs(con: duckdb.DuckDBPyConnection, where: str = "", params: list[Any] | None = None) -> list[Run]:
    """Runs (with samples and failures) matching an optional SQL condition on ``runs``."""
    runs = []
    for row in _rows(con, f"SELECT * FROM runs {where} ORDER BY started_at, side, id", params):
        row = {k: (str(v) if k in ("started_at", "ended_at") and v is not None else v) for k, v in row.items()}
        run = run_from_dict(row)
        run.samples = [
            Sample(**r)
            for r in _rows(
                con, f"SELECT {', '.join(SAMPLE_FIELDS)} FROM samples WHERE run_id = ? ORDER BY seq", [run.id]
            )
        ]
        run.failures = [
            Failure(**{**r, "failed_at": str(r["failed_at"]) if r["failed_at"] is not None else None})
            for r in _rows(
                con,
                f"SELECT {', '.join(FAILURE_FIELDS)} FROM failures WHERE run_id = ? ORDER BY seq",
                [run.id],
            )
        ]
        runs.append(run)
    return runs


def load_duckdb(path: Path) -> list[Run]:
    """Runs from another machine's history DuckDB file."""
    con = open_db(path, read_only=True)
    try:
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        if not {"runs", "samples"} <= tables:
            raise PerfqError(f"{path}: no perfq runs in this database")
        return read_runs(con)
    finally:
        con.close()


def open_read(history: Path) -> duckdb.DuckDBPyConnection:
    """Open the history for reading (migrated, so queries never hit a missing table)."""
    if not history.exists():
        raise PerfqError(f"no results history at {history}; run `perfq run` or `perfq import` first")
    return connect_history(history)


def runs_for_label(history: Path, label: str) -> list[Run]:
    """Every run stored under ``label``."""
    con = open_read(history)
    try:
        return read_runs(con, "WHERE label = ?", [label])
    finally:
        con.close()


class HistoryRow(NamedTuple):
    """One run's summary of one test of a benchmark."""

    label: str
    side: str
    ref: str | None
    commit_sha: str | None
    torch_version: str | None
    host: str | None
    started_at: str | None
    status: str
    test: str
    mode: str | None
    device: str | None
    metric: str | None
    unit: str | None
    median: float
    n: int
    min: float
    max: float


def history_rows(history: Path, benchmark: str, test: str | None = None) -> list[HistoryRow]:
    """Per run and test: median, count, min, max of a benchmark's samples, oldest run first."""
    con = open_read(history)
    try:
        sql = (
            "SELECT r.label, r.side, r.ref, r.commit_sha, r.torch_version, r.host, r.started_at, r.status,"
            " s.test, s.mode, s.device, s.metric, s.unit, median(s.value) AS median, count(*) AS n,"
            " min(s.value) AS min, max(s.value) AS max"
            " FROM samples s JOIN runs r ON r.id = s.run_id"
            " WHERE (s.benchmark = ? OR s.benchmark = ?)"
        )
        params: list[Any] = [benchmark, f"{benchmark}_test"]
        if test:
            sql += " AND s.test = ?"
            params.append(test)
        sql += (
            " GROUP BY r.id, r.label, r.side, r.ref, r.commit_sha, r.torch_version, r.host, r.started_at,"
            " r.status, s.test, s.mode, s.device, s.metric, s.unit ORDER BY s.test, r.started_at, r.side"
        )
        rows = _rows(con, sql, params)
    finally:
        con.close()
    for row in rows:
        row["started_at"] = str(row["started_at"]) if row["started_at"] is not None else None
    return [HistoryRow(**row) for row in rows]
