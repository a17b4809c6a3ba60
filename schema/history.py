"""The results history database: runs, samples, IR collections, bisect sessions.

Each feature owns one migration file in ``schema/migrations`` (``NNNN_name.sql``);
``connect_history`` applies the ones not yet applied, in order, each in a transaction,
and records them in ``schema_migrations``. A re-index never touches this file.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import duckdb

from perfq.errors import PerfqError
from perfq.schema.db import open_db


def migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) of every shipped migration, in order."""
    found = []
    for entry in resources.files("perfq.schema").joinpath("migrations").iterdir():
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
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(sql)
            con.execute("INSERT INTO schema_migrations (version, name) VALUES (?, ?)", [version, name])
            con.execute("COMMIT")
        except duckdb.Error:
            con.execute("ROLLBACK")
            raise


def connect_history(path: Path, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open (creating and migrating as needed) the results history at ``path``."""
    con = open_db(path, read_only=read_only)
    if not read_only:
        migrate(con)
    return con
