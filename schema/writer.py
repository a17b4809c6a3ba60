"""The one writer of index files: builds a new DuckDB file beside the target, fills it
with bulk inserts, and swaps it in atomically, so readers never see a half-written
index and an interrupted build leaves the previous one intact."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import duckdb
import numpy as np

from perfq.errors import PerfqError
from perfq.schema.version import SCHEMA_VERSION


def index_ddl() -> str:
    return resources.files("perfq.schema").joinpath("index.sql").read_text(encoding="utf-8")


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    return [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()]


def insert_rows(con: duckdb.DuckDBPyConnection, table: str, rows: list[tuple]) -> None:
    """Bulk-insert ``rows`` (tuples in column order) into ``table``."""
    if not rows:
        return
    cols = _columns(con, table)
    data = {}
    for i, col in enumerate(cols):
        values = [r[i] for r in rows]
        if all(type(v) is int for v in values):
            data[col] = np.array(values, dtype=np.int64)
        elif all(type(v) is bool for v in values):
            data[col] = np.array(values, dtype=np.bool_)
        else:
            data[col] = np.array(values, dtype=object)
    con.register("_perfq_rows", data)
    try:
        con.execute(f"INSERT INTO {table} SELECT {', '.join(cols)} FROM _perfq_rows")
    finally:
        con.unregister("_perfq_rows")


@contextlib.contextmanager
def build_lock(target: Path) -> Iterator[None]:
    """Exclusive lock on building ``target``: one ``perfq index`` at a time."""
    target.parent.mkdir(parents=True, exist_ok=True)
    lock_path = target.with_name(target.name + ".lock")
    with open(lock_path, "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise PerfqError(f"another perfq index is writing {target}; try again when it has finished") from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def replacing(target: Path, copy_existing: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to a scratch copy of ``target`` (empty, or a copy of it) that replaces
    ``target`` atomically when the block succeeds; on any error or Ctrl-C the scratch file
    is removed and ``target`` is untouched. Readers never see a half-written index."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    wal = Path(str(tmp) + ".wal")
    for leftover in (tmp, wal):
        leftover.unlink(missing_ok=True)
    try:
        if copy_existing:
            shutil.copyfile(target, tmp)
        con = duckdb.connect(str(tmp))
        try:
            yield con
            con.execute("CHECKPOINT")
        finally:
            con.close()
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
        wal.unlink(missing_ok=True)


def write_index(target: Path, tables: dict[str, list[tuple]], meta: dict[str, str]) -> None:
    """Write a complete index to ``target`` atomically."""
    with replacing(target) as con:
        con.execute(index_ddl())
        for table, rows in tables.items():
            insert_rows(con, table, rows)
        insert_rows(con, "meta", sorted({**meta, "schema_version": str(SCHEMA_VERSION)}.items()))
