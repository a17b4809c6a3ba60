"""The results history database: runs, samples, IR collections, bisect sessions.

Each feature owns one migration file in ``schema/migrations`` (``NNNN_name.sql``);
``connect_history`` applies the ones not yet applied, in order, each in a transaction,
and records them in ``schema_migrations``. A re-index never touches this file.

Several processes share the file: a ``perfq run`` writes after every benchmark invocation
while ``perfq history``/``compare`` read. DuckDB lets one process write or several read, so
every open waits (bounded, with back-off) for another process's hold instead of failing, and
readers open read-only and never migrate: a reader holds the file for milliseconds and never
blocks a writer for longer than its own query.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from common.errors import PerfqError
from schema.db import DatabaseLocked, open_db, transaction
from schema.engine import duckdb

LOCK_WAIT = 30.0  # seconds an open waits for another process's hold on the history
_HISTORY_TABLES = {"schema_migrations", "runs", "ir_records", "bisect_sessions"}  # any of these: a history


def migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) of every shipped migration, in order."""
    found = []
    for entry in resources.files("schema").joinpath("migrations").iterdir():
        name = entry.name
        if not name.endswith(".sql") or not name[:4].isdigit():
            continue
        found.append((int(name[:4]), name[5:-4], entry.read_text(encoding="utf-8")))
    return sorted(found)


def migrate(con: duckdb.DuckDBPyConnection) -> None:
    """Apply pending migrations to ``con``."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT,"
        " applied_at TIMESTAMP DEFAULT current_timestamp)"
    )
    done = {row[0] for row in con.execute("SELECT version FROM schema_migrations").fetchall()}
    newest = max(done, default=0)
    shipped = migrations()
    if shipped and newest > shipped[-1][0]:
        raise PerfqError(
            f"history database schema v{newest} is newer than this perfq (v{shipped[-1][0]}); upgrade perfq"
        )
    for version, name, sql in shipped:
        if version in done:
            continue
        with transaction(con):
            con.execute(sql)
            con.execute("INSERT INTO schema_migrations (version, name) VALUES (?, ?)", [version, name])


def open_waiting(path: Path, read_only: bool, wait: float,
                 opener: Callable[[], duckdb.DuckDBPyConnection] | None = None) -> duckdb.DuckDBPyConnection:
    """``open_db`` (or ``opener``) retried with back-off while another process holds the file, for at most
    ``wait`` seconds; then the DatabaseLocked error."""
    deadline = time.monotonic() + wait
    pause = 0.01
    while True:
        try:
            return opener() if opener is not None else open_db(path, read_only=read_only)
        except DatabaseLocked:
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.25)


def tables(con: duckdb.DuckDBPyConnection, database: str | None = None) -> set[str]:
    """Names of the tables in the main schema of ``database`` (default: the connection's own)."""
    return {row[0] for row in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' AND NOT temporary"
        " AND database_name = coalesce($db, current_database())", {"db": database}).fetchall()}


def _check_is_history(con: duckdb.DuckDBPyConnection, path: Path, read_only: bool) -> None:
    """A database with tables but none of a history's (e.g. the index) is refused, never written into."""
    found = tables(con)
    if found & _HISTORY_TABLES or (not found and not read_only):
        return
    what = "a perfq index" if {"functions", "meta"} <= found else "empty" if not found else "another database"
    raise PerfqError(f"{path} is not a perfq results history ({what}); --history takes the history.duckdb file")


def connect_history(path: Path, read_only: bool = False, wait: float = LOCK_WAIT) -> duckdb.DuckDBPyConnection:
    """Open the results history at ``path``, waiting up to ``wait`` seconds for another process's hold.

    Read-write creates and migrates it; read-only (every reader) checks that it is a history and
    never writes to it.
    """
    con = open_waiting(path, read_only, wait)
    try:
        _check_is_history(con, path, read_only)
        if not read_only:
            migrate(con)
    except BaseException:
        con.close()
        raise
    return con
