"""Opening DuckDB files with one-line errors for locked, corrupt or missing files."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from common.errors import PerfqError
from schema.engine import duckdb


class DatabaseLocked(PerfqError):
    """Another process holds the database file (a writer, or readers while we want to write)."""


def open_db(path: Path, read_only: bool = False, threads: int | None = None) -> duckdb.DuckDBPyConnection:
    """Open ``path`` (DuckDB's ``threads``: its default, one per core, when None); a lock held
    by another process or a corrupt file is a PerfqError."""
    if read_only and not path.exists():
        raise PerfqError(f"no database at {path}")
    if not read_only:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return duckdb.connect(str(path), read_only=read_only, config={"threads": threads} if threads else {})
    except duckdb.IOException as exc:
        text = str(exc)
        if "lock" in text.lower():
            raise DatabaseLocked(f"{path} is locked by another process; try again when it has finished") from None
        raise PerfqError(f"cannot open {path}: {text.splitlines()[0]}") from None
    except duckdb.Error as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PerfqError(f"{path} is not a usable perfq database ({first})") from None


@contextlib.contextmanager
def damage_is_an_error(path: Path) -> Iterator[None]:
    """Reads of ``path`` in the block: a DuckDB error (a damaged data block, found only when a
    query reads it) is a one-line PerfqError naming the file, not a traceback; an interruption
    propagates."""
    try:
        yield
    except duckdb.InterruptException:
        raise
    except duckdb.Error as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PerfqError(f"{path} is not a usable perfq database ({first})") from None


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """One transaction on ``con``: committed when the block ends, rolled back on any exception
    (Ctrl-C too), which propagates."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
