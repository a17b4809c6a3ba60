"""Opening an existing index read-only, with clear errors when it is missing or foreign."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from common.errors import PerfqError
from schema.db import open_db
from schema.engine import duckdb
from schema.version import SCHEMA_VERSION


@contextlib.contextmanager
def open_index(path: Path, threads: int | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection to the index at ``path`` (with DuckDB's ``threads``, see open_db)."""
    if not path.exists():
        raise PerfqError(f"no perfq index at {path}; build one with `perfq index` at the repository root")
    con = open_db(path, read_only=True, threads=threads)
    try:
        try:
            version = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except duckdb.Error as exc:
            if damaged(exc):
                raise _damaged(path, exc) from None
            raise PerfqError(f"{path} is not a perfq index (no meta table); rebuild it with `perfq index`") from None
        if version is None or not str(version[0]).isdigit() or int(version[0]) != SCHEMA_VERSION:
            raise PerfqError(
                f"{path} has index schema v{version[0] if version else '?'}, this perfq reads "
                f"v{SCHEMA_VERSION}; rebuild it with `perfq index`"
            )
        try:
            yield con
        except duckdb.Error as exc:  # a damaged block is only found when a query reads it
            if damaged(exc):
                raise _damaged(path, exc) from None
            if isinstance(exc, duckdb.CatalogException | duckdb.BinderException):  # a table or column dropped
                first = (str(exc).splitlines() or [type(exc).__name__])[0]
                raise PerfqError(f"{path} lacks a table or column of index schema v{SCHEMA_VERSION} ({first}); "
                                 "rebuild it with `perfq index --full`") from None
            raise
    finally:
        con.close()


def damaged(exc: duckdb.Error) -> bool:
    """Whether ``exc`` says the file itself is damaged (checksum, short read, undecodable block),
    as opposed to a query's own mistake."""
    return type(exc) is duckdb.Error or isinstance(
        exc, duckdb.IOException | duckdb.InternalException | duckdb.SerializationException
    )


def _damaged(path: Path, exc: duckdb.Error) -> PerfqError:
    first = (str(exc).splitlines() or [type(exc).__name__])[0][:160]
    return PerfqError(f"{path} is damaged ({first}); rebuild it with `perfq index --full`")


def meta(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    return dict(con.execute("SELECT key, value FROM meta").fetchall())
