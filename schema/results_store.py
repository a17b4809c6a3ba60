"""The results history's runs, samples and failures (tables of migration 0001_runs.sql), and the
walls of the invocations that measured them (0005_invocations.sql).

A run is one side (base or head) of a labelled comparison on one machine. Its id is a
uuid that travels with the export, so merging the result files of many CI jobs into
one DuckDB is idempotent: rows are keyed by (run id, sequence number) and inserted only
when missing; a run that was incomplete locally becomes complete if the import has it so.

The rows are typed in :mod:`schema.results_rows` (``RunRow``, ``Sample``, ``Failure``,
``Invocation``, one ``StoredRun`` per run); the run's domain (``perfq.run.runs.Run``, which a run fills as it
samples) is converted to and from them by ``perfq.run.store``, above this layer.

Readers open the history read-only and wait (bounded) for a writer's short hold; a
``perfq run`` writes after every invocation and waits likewise (see :mod:`schema.history`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from common.errors import PerfqError
from common.test_names import ADDRESS, MASKED, stable_test_name
from schema.db import transaction
from schema.engine import duckdb
from schema.history import LOCK_WAIT, connect_history, tables
from schema.results_rows import (
    FAILURE_FIELDS,
    INVOCATION_FIELDS,
    RUN_FIELDS,
    SAMPLE_FIELDS,
    Failure,
    Invocation,
    RunRow,
    RunStatus,
    Sample,
    StoredRun,
)


def _write(con: duckdb.DuckDBPyConnection, runs: Sequence[StoredRun]) -> tuple[int, int, int]:
    """Insert missing rows of ``runs``; returns (new runs, new samples, new failures)."""
    new_runs = new_samples = new_failures = 0
    for stored in runs:
        run = stored.row
        existing = con.execute("SELECT status FROM runs WHERE id = ?", [run.id]).fetchone()
        if existing is None:
            placeholders = ", ".join("?" for _ in RUN_FIELDS)
            con.execute(f"INSERT INTO runs ({', '.join(RUN_FIELDS)}) VALUES ({placeholders})", list(run))
            new_runs += 1
        elif existing[0] != RunStatus.complete:
            con.execute(
                "UPDATE runs SET status = ?, ended_at = ?, notes = ?, env = ? WHERE id = ?",
                [run.status, run.ended_at, run.notes, run.env, run.id],
            )
        new_samples += _insert_missing(con, "samples", SAMPLE_FIELDS, run.id, stored.samples)
        new_failures += _insert_missing(con, "failures", FAILURE_FIELDS, run.id, stored.failures)
        _insert_missing(con, "invocations", INVOCATION_FIELDS, run.id, stored.invocations)
    return new_runs, new_samples, new_failures


def _insert_missing(con: duckdb.DuckDBPyConnection, table: str, fields: list[str] | tuple[str, ...], run_id: str,
                    items: Sequence[Sample | Failure | Invocation]) -> int:
    """Insert the ``items`` of a run (samples or failures) whose ``seq`` is not stored yet."""
    have = {r[0] for r in con.execute(f"SELECT seq FROM {table} WHERE run_id = ?", [run_id]).fetchall()}
    rows = [[run_id, *[getattr(item, f) for f in fields]] for item in items if item.seq not in have]
    if rows:
        con.executemany(
            f"INSERT INTO {table} (run_id, {', '.join(fields)}) VALUES (?, {', '.join('?' for _ in fields)})", rows
        )
    return len(rows)


def save_runs(history: Path, runs: Sequence[StoredRun], wait: float = LOCK_WAIT) -> tuple[int, int, int]:
    """Write ``runs`` (and their new samples/failures) to the history in one transaction.

    Waits up to ``wait`` seconds for readers or another writer to let go of the file.
    """
    con = connect_history(history, wait=wait)
    try:
        with transaction(con):
            counts = _write(con, runs)
    except duckdb.Error as exc:
        raise PerfqError(f"cannot write results to {history}: {str(exc).splitlines()[0]}") from None
    finally:
        con.close()
    return counts


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    cur = con.execute(sql, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def read_runs(con: duckdb.DuckDBPyConnection, where: str = "", params: list[Any] | None = None,
              with_samples: bool = True) -> list[StoredRun]:
    """Runs (with failures, and samples unless ``with_samples`` is False) matching a condition on ``runs``."""
    have = {r[0] for r in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = 'runs'"
                                      " AND database_name = current_database()").fetchall()}
    columns = ", ".join(f if f in have else f"NULL AS {f}" for f in RUN_FIELDS)  # read-only: an older history
    rows = _rows(con, f"SELECT {columns} FROM runs {where} ORDER BY started_at, side, id", params)
    runs = [RunRow(**{**row, "started_at": _text(row["started_at"]), "ended_at": _text(row["ended_at"])})
            for row in rows]
    ids = [run.id for run in runs]
    failures: dict[str, list[Failure]] = {}
    for r in _rows(con, f"SELECT run_id, {', '.join(FAILURE_FIELDS)} FROM failures WHERE list_contains(?, run_id)"
                        " ORDER BY run_id, seq", [ids]):
        failures.setdefault(r.pop("run_id"), []).append(Failure(**{**r, "failed_at": _text(r["failed_at"])}))
    counts = dict(con.execute("SELECT run_id, count(*) FROM samples WHERE list_contains(?, run_id) GROUP BY run_id",
                              [ids]).fetchall())
    return [StoredRun(run, _samples(con, run.id) if with_samples else (), tuple(failures.get(run.id, ())),
                      sample_count=None if with_samples else counts.get(run.id, 0)) for run in runs]


def _samples(con: duckdb.DuckDBPyConnection, run_id: str) -> tuple[Sample, ...]:
    sql = f"SELECT {', '.join(SAMPLE_FIELDS)} FROM samples WHERE run_id = ? ORDER BY seq"
    return tuple(Sample(**{**r, "test": stable_test_name(r["test"])}) for r in _rows(con, sql, [run_id]))


def _stable_test(column: str) -> str:
    """SQL of ``column`` (a stored test name) in its stable form: a history written before perfq masked object
    addresses (``<function<lambda>at0x7f...>``) reads as one written after (:mod:`common.test_names`)."""
    return f"regexp_replace({column}, '{ADDRESS}', '{MASKED}', 'g')"


RESULT_TABLES = frozenset({"runs", "samples", "failures"})


def open_read(history: Path, wait: float = LOCK_WAIT) -> duckdb.DuckDBPyConnection:
    """Open the history read-only (never migrated, never created), waiting for a writer's short hold."""
    if not history.exists():
        raise PerfqError(f"no results history at {history}; run `perfq run` or `perfq import` first")
    con = connect_history(history, read_only=True, wait=wait)
    if not tables(con) >= RESULT_TABLES:
        con.close()
        raise PerfqError(f"no perfq runs stored in {history} yet; run `perfq run` or `perfq import` first")
    return con


def runs_for_label(history: Path, label: str, with_samples: bool = True) -> list[StoredRun]:
    """Every run stored under ``label``."""
    con = open_read(history)
    try:
        return read_runs(con, "WHERE label = ?", [label], with_samples)
    finally:
        con.close()


def test_walls(history: Path) -> dict[tuple[str, str], float]:
    """(benchmark, test) -> median of its share (seconds) of the invocations that measured it (process
    start included: perfq.run.execute.test_shares); {} without a history."""
    if not history.exists():
        return {}
    con = connect_history(history, read_only=True)
    try:
        if "invocations" not in tables(con):
            return {}
        rows = con.execute(
            f"SELECT {_stable_test('name')} AS key, median(share) FROM (SELECT unnest(map_keys(m)) AS name,"
            " unnest(map_values(m)) AS share"
            " FROM (SELECT json_transform(tests, '\"MAP(VARCHAR, DOUBLE)\"') AS m FROM invocations"
            " WHERE starts_with(tests, '{'))) GROUP BY ALL"
        ).fetchall()
    finally:
        con.close()
    out = {}
    for name, seconds in rows:
        bench, _, test = name.partition("/")
        out[(bench, test)] = float(seconds)
    return out


class LabelSamples(NamedTuple):
    """A label's finite samples as columns, sorted by test key, side (base first) and value.

    ``keys`` are the distinct (benchmark, test, mode, device, metric, unit) tuples in sorted order;
    ``key[i]`` indexes them, ``head[i]`` is True for the head side.
    """

    keys: list[tuple[str, str, str, str, str, str]]
    key: np.ndarray
    head: np.ndarray
    value: np.ndarray
    renamed: int = 0  # stored test names read in their stable form (written with an object's address)
    group: np.ndarray | None = None  # the invocation group of each sample: one round of one run (ids from 0)


_KEY_COLUMNS = ("benchmark", "test", "mode", "device", "metric", "unit")
_EMPTY = "''"
_SIDES = "((r.label = $base_label AND r.side = $base_side) OR (r.label = $head_label AND r.side = $head_side))"


def _key_column(column: str) -> str:
    value = f"coalesce(s.{column}, {_EMPTY})"
    return f"{_stable_test(value) if column == 'test' else value} AS {column}"


def side_samples(history: Path, base: tuple[str, str], head: tuple[str, str]) -> LabelSamples:
    """Every finite sample of two stored sides, each a (label, side), in columns: ``head[i]`` is
    True for the second.

    Samples carry a 64-bit hash of their key, mapped to the sorted keys in numpy (strings are never
    fetched per sample); a hash collision falls back to a join on the key columns.
    """
    cols = ", ".join(_KEY_COLUMNS)
    values = (
        "SELECT (r.label = $head_label AND r.side = $head_side) AS head,"
        f" {', '.join(_key_column(c) for c in _KEY_COLUMNS)},"
        " s.value, hash(r.id, s.repeat_index) AS invocation FROM samples s JOIN runs r ON r.id = s.run_id"
        f" WHERE {_SIDES} AND isfinite(s.value)"
    )
    params = {"base_label": base[0], "base_side": base[1], "head_label": head[0], "head_side": head[1]}
    con = open_read(history)
    try:
        rows = con.execute(f"SELECT {cols}, hash({cols}) FROM ({values}) GROUP BY ALL ORDER BY {cols}",
                           params).fetchall()
        renamed = con.execute("SELECT count(DISTINCT s.test) FROM samples s JOIN runs r ON r.id = s.run_id"
                              f" WHERE {_SIDES} AND regexp_matches(s.test, '{ADDRESS}')", params).fetchone()[0]
        hashes = np.array([r[-1] for r in rows], dtype=np.uint64)
        if np.unique(hashes).size == hashes.size:
            arrays = con.execute(f"SELECT hash({cols}) AS h, head, value, invocation FROM ({values})",
                                 params).fetchnumpy()
            by_hash = np.argsort(hashes)
            key = by_hash[np.searchsorted(hashes[by_hash], arrays["h"])]
        else:
            arrays = con.execute(
                f"WITH v AS ({values}), k AS (SELECT {cols}, row_number() OVER (ORDER BY {cols}) - 1 AS key "
                f"FROM (SELECT DISTINCT {cols} FROM v)) SELECT k.key, v.head, v.value, v.invocation FROM v "
                f"JOIN k USING ({cols})",
                params).fetchnumpy()
            key = arrays["key"]
    finally:
        con.close()
    group = np.unique(np.asarray(arrays["invocation"], dtype=np.uint64), return_inverse=True)[1].astype(np.int64)
    return LabelSamples([tuple(r[:-1]) for r in rows], np.asarray(key, dtype=np.int64),
                        np.asarray(arrays["head"], dtype=bool), np.asarray(arrays["value"], dtype=np.float64), renamed,
                        group.reshape(-1))


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
            f" {_stable_test('s.test')} AS test, s.mode, s.device, s.metric, s.unit, median(s.value) AS median,"
            " count(*) AS n, min(s.value) AS min, max(s.value) AS max"
            " FROM samples s JOIN runs r ON r.id = s.run_id"
            " WHERE (s.benchmark = ? OR s.benchmark = ?)"
        )
        params: list[Any] = [benchmark, f"{benchmark}_test"]
        if test:
            sql += f" AND {_stable_test('s.test')} = ?"
            params.append(stable_test_name(test))
        sql += (
            " GROUP BY r.id, r.label, r.side, r.ref, r.commit_sha, r.torch_version, r.host, r.started_at,"
            f" r.status, {_stable_test('s.test')}, s.mode, s.device, s.metric, s.unit"
            " ORDER BY test, r.started_at, r.side"
        )
        rows = _rows(con, sql, params)
    finally:
        con.close()
    for row in rows:
        row["started_at"] = str(row["started_at"]) if row["started_at"] is not None else None
    return [HistoryRow(**row) for row in rows]
