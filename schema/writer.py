"""The one writer of index files: builds a new DuckDB file beside the target, fills it
with bulk inserts, and swaps it in atomically, so readers never see a half-written
index and an interrupted build leaves the previous one intact."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import operator
import os
import re
import shutil
import stat
import threading
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

from common import files
from common.errors import PerfqError
from schema.engine import duckdb
from schema.graph_file import graph_token, write_graph_file
from schema.version import SCHEMA_VERSION


def index_ddl() -> str:
    return resources.files("schema").joinpath("index.sql").read_text(encoding="utf-8")


def index_tables() -> list[str]:
    """The tables of an index of this schema version, as index.sql creates them (a catalog
    query costs a patch ~10 ms)."""
    return list(table_columns())


@functools.cache
def table_columns() -> dict[str, tuple[tuple[str, str], ...]]:
    """Each table of index.sql with its columns' (name, DuckDB type), in order: the writer is keyed
    by the tables as the DDL generated from their row types creates them (wherever a row type is
    declared: schema/model.py or a rule's module above), never by the row types themselves."""
    return {
        table: tuple((line.split()[0], line.split()[1].rstrip(",")) for line in body.splitlines() if line.strip())
        for table, body in re.findall(r"^CREATE TABLE (\w+) \(\n(.*?)^\);", index_ddl(), flags=re.MULTILINE | re.DOTALL)
    }


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[str, str]]:
    """(name, type) of ``table``'s columns: an index table's from index.sql, another's from the database."""
    known = table_columns().get(table)
    if known is not None:
        return list(known)
    return [(r[0], r[1]) for r in con.execute(f"DESCRIBE {table}").fetchall()]


_AS_LISTS = 5000  # rows up to which list parameters beat numpy columns (whose import alone costs 0.08 s)


def insert_rows(con: duckdb.DuckDBPyConnection, table: str, rows: list[tuple]) -> None:
    """Bulk-insert ``rows`` (tuples in the column order of the table's row type) into ``table``: up to a few thousand as
    one list parameter per column (an incremental build never imports numpy), more as numpy
    columns; a table of blobs (the packed graph: a few rows of megabytes) row by row, which
    binds them 10x faster than a BLOB[] list."""
    if not rows:
        return
    cols = _columns(con, table)
    names = ", ".join(name for name, _ in cols)
    if any(kind == "BLOB" for _, kind in cols):
        for row in rows:
            con.execute(f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(cols))})", list(row))
        return
    columns = list(zip(*rows, strict=True))
    if len(rows) <= _AS_LISTS:
        values = ", ".join(f"unnest(?::{kind}[])" for _, kind in cols)
        con.execute(f"INSERT INTO {table} ({names}) SELECT {values}", [list(c) for c in columns])
        return
    import numpy as np  # here: only large loads need it

    data = {col: _numpy_column(np, kind, values) for (col, kind), values in zip(cols, columns, strict=True)}
    con.register("_perfq_rows", data)
    try:
        con.execute(f"INSERT INTO {table} SELECT {names} FROM _perfq_rows")
    finally:
        con.unregister("_perfq_rows")


_NUMERIC = {"INTEGER": "int64", "BIGINT": "int64", "BOOLEAN": "bool"}


def _numpy_column(np, kind: str, values: tuple):  # np: numpy, imported by the caller for large loads only
    """A column as numpy: integers and booleans natively (by the column's type, not a check of
    every value), anything else, or any column holding NULL, as Python objects."""
    dtype = _NUMERIC.get(kind)
    if dtype is not None and None not in values:
        try:
            return np.array(values, dtype=dtype)
        except (TypeError, ValueError, OverflowError):
            pass
    return np.array(values, dtype=object)


_DUCKDB_MAGIC = (8, b"DUCK")  # where a DuckDB file names itself
_INDEX_TABLES = {"meta", "functions"}  # a database holding these is a perfq index
# table names that only perfq's index schema has together: found in the catalog of a damaged index
_INDEX_CATALOG = (b"reach_edges", b"canary_sets", b"bench_tests", b"trace_ops")


def check_replaceable(target: Path) -> None:
    """Refuse, in one line, to build an index at ``target`` unless perfq may replace what is
    there: nothing, an empty file, an empty DuckDB database, or a perfq index, recognized by what
    it is (a DuckDB database holding perfq's ``meta`` and ``functions`` tables; a damaged one by
    its catalog naming perfq's tables), never by the files beside it. A user's file, a results
    history, another database, a symlink, a directory or a device is never replaced."""
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise PerfqError(f"cannot write the index at {target}: {exc.strerror}") from None
    refuse = f"refusing to replace {target}: it is {{}}, not a perfq index (choose another place with --db)"
    if stat.S_ISLNK(info.st_mode):
        raise PerfqError(refuse.format("a symbolic link"))
    if not stat.S_ISREG(info.st_mode):
        raise PerfqError(refuse.format("a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"))
    if info.st_size == 0:
        return  # nothing to lose
    offset, magic = _DUCKDB_MAGIC
    try:
        with target.open("rb") as fh:
            head = fh.read(offset + len(magic))
    except OSError as exc:
        raise PerfqError(f"cannot read {target}: {exc.strerror}") from None
    if head[offset:] != magic:
        raise PerfqError(refuse.format("not a DuckDB file"))
    found = _tables(target)
    if found is None and not _names_index_tables(target):
        raise PerfqError(refuse.format("a DuckDB file that cannot be read"))
    if found and not found >= _INDEX_TABLES:
        what = "a perfq results history" if found & {"runs", "schema_migrations"} else "another database"
        raise PerfqError(refuse.format(what))


def _names_index_tables(path: Path) -> bool:
    """Whether the bytes of the (damaged) DuckDB file ``path`` name every table of
    ``_INDEX_CATALOG``: a perfq index whose data blocks are damaged; read in 1 MB chunks."""
    missing = set(_INDEX_CATALOG)
    overlap = max(map(len, _INDEX_CATALOG)) - 1
    carried = b""
    try:
        for chunk in files.chunks(str(path.parent), path.name):
            window = carried + chunk
            missing = {name for name in missing if name not in window}
            if not missing:
                return True
            carried = window[-overlap:]
    except OSError:
        return False
    return False


def _tables(path: Path) -> set[str] | None:
    """The tables of the DuckDB file at ``path``, or None when it cannot be opened or read."""
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        if "lock" in str(exc).lower():
            raise PerfqError(f"{path} is in use by another process; try again when it has finished") from None
        return None
    try:
        return {row[0] for row in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' AND NOT temporary").fetchall()}
    except duckdb.Error:
        return None
    finally:
        con.close()


_HELD: set[str] = set()  # lock files this process holds (POSIX locks are per process)


@contextlib.contextmanager
def build_lock(target: Path) -> Iterator[None]:
    """Exclusive lock on building ``target``: one ``perfq index`` at a time.

    A POSIX record lock (``lockf``): it belongs to this process alone, so forked workers never
    hold it, and the kernel releases it when the process dies, however it dies; a lock left by a
    dead build is simply taken. The holder's pid is written into the lock file for the message.
    Scratch files of dead builds are removed once the lock is held."""
    lock_path = target.with_name(target.name + ".lock")
    held = str(lock_path.absolute())
    if held in _HELD:  # checked before opening: closing a second descriptor would drop the lock
        raise PerfqError(f"another perfq index (pid {os.getpid()}) is writing {target}; try again when it has finished")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise PerfqError(f"cannot write the index at {target}: {exc.strerror}") from None
    _HELD.add(held)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            who = f" (pid {holder})" if holder.isdigit() else ""
            raise PerfqError(
                f"another perfq index{who} is writing {target}; try again when it has finished"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        remove_scratch(target)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.lockf(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
        _HELD.discard(held)


def scratch_files(target: Path) -> list[Path]:
    """Scratch files a build of ``target`` writes before renaming them into place (the new
    index, its WAL, the facts and stat caches' temporary files)."""
    patterns = (f".{target.name}.*.tmp", f".{target.name}.*.tmp.wal", f"{target.name}.facts.*.tmp",
                f"{target.name}.stat.*.tmp")
    return sorted({p for pattern in patterns for p in target.parent.glob(pattern)})


def remove_scratch(target: Path) -> None:
    """Remove the scratch files of builds of ``target`` that died (call with the build lock held:
    no live build has any then)."""
    _remove(*scratch_files(target))


class UnreadableIndex(Exception):
    """The index to copy could not be copied or opened (damaged, foreign, unreadable)."""


def _scratch(target: Path) -> tuple[Path, Path]:
    """The scratch file a build of ``target`` writes, and its WAL."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    return tmp, Path(str(tmp) + ".wal")


def _remove(*paths: Path) -> None:
    """Remove scratch files (a stale WAL would be replayed into a new one) as far as possible."""
    for path in paths:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


class CopyInProgress:
    """A scratch copy of an index made, and connected to, in a thread while the caller does
    other work (a patch finds and hashes its files meanwhile). ``replacing`` takes it."""

    def __init__(self, target: Path) -> None:
        self.target = target
        self.tmp, self.wal = _scratch(target)
        self._con: duckdb.DuckDBPyConnection | None = None
        self._error: Exception | None = None
        self._taken = False
        self._thread = threading.Thread(target=self._copy, name="perfq-index-copy", daemon=True)
        self._thread.start()

    def _copy(self) -> None:
        try:
            _remove(self.tmp, self.wal)
            shutil.copyfile(self.target, self.tmp)
            self._con = duckdb.connect(str(self.tmp))
        except (OSError, duckdb.Error) as exc:
            self._error = exc

    def take(self) -> duckdb.DuckDBPyConnection:
        """The connection to the copy; UnreadableIndex when it could not be made or opened."""
        self._thread.join()
        self._taken = True
        if self._con is None:
            raise UnreadableIndex(str(self._error))
        return self._con

    def discard(self) -> None:
        """Close and remove the copy unless ``replacing`` took it (it cleans up after itself)."""
        self._thread.join()
        if self._taken:
            return
        if self._con is not None:
            self._con.close()
        _remove(self.tmp, self.wal)


@contextlib.contextmanager
def copying(target: Path) -> Iterator[CopyInProgress]:
    """Start copying ``target`` for a patch (``replacing(target, copy=...)``); the copy is
    removed on leaving the block if nothing took it."""
    copy = CopyInProgress(target)
    try:
        yield copy
    finally:
        copy.discard()


@contextlib.contextmanager
def _write_errors(target: Path) -> Iterator[None]:
    """An unwritable place or a full disk while writing ``target``'s files: a one-line PerfqError."""
    try:
        yield
    except (OSError, duckdb.IOException, duckdb.FatalException) as exc:  # fatal: a checkpoint on a full disk
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else (str(exc).splitlines() or ["I/O error"])[0]
        raise PerfqError(f"cannot write the index at {target}: {why} (choose another place with --db)") from None


@contextlib.contextmanager
def replacing(
    target: Path, copy: CopyInProgress | None = None, prefilled: bool = False
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to a scratch file (empty, ``copy``'s copy of ``target``, or, ``prefilled``,
    the one a Prefill wrote) that replaces ``target`` atomically when the block succeeds; on any
    error or Ctrl-C the scratch file is removed and ``target`` is untouched. Readers never see a
    half-written index. UnreadableIndex when ``copy`` could not be made or opened."""
    tmp, wal = _scratch(target)
    try:
        with _write_errors(target):
            if copy is not None:
                con = copy.take()
            else:
                if not prefilled:
                    _remove(tmp, wal)
                con = duckdb.connect(str(tmp))
            try:
                yield con
                con.execute("CHECKPOINT")
            finally:
                con.close()
            os.replace(tmp, target)
    finally:
        _remove(tmp, wal)


class Prefill:
    """The first rows of a new index's tables (rows the rest of its build only appends to),
    written into the build's scratch file ahead of the others, typically by a forked child
    while the build makes them (``common.pool.alongside``); ``write_index`` appends the rest."""

    def __init__(self, target: Path, tables: dict[str, list[tuple]]) -> None:
        self.target = target
        self.tmp, self.wal = _scratch(target)  # named here: a forked child has another pid
        self.tables = {table: list(rows) for table, rows in tables.items()}  # the rows as they are now

    def write(self) -> None:
        """Write the scratch file: the schema and the rows (safe to repeat)."""
        with _write_errors(self.target):
            self.discard()
            con = duckdb.connect(str(self.tmp))
            try:
                con.execute(index_ddl())
                for table, rows in self.tables.items():
                    insert_rows(con, table, rows)
                con.execute("CHECKPOINT")
            finally:
                con.close()

    def heads(self, tables: dict[str, list[tuple]]) -> dict[str, int] | None:
        """How many rows of each of ``tables`` the scratch file holds: None unless it was
        written and each table still begins with the very rows written."""
        if not self.tmp.is_file():
            return None
        for table, head in self.tables.items():
            rows = tables.get(table, [])
            if len(rows) < len(head) or not all(map(operator.is_, head, rows[: len(head)])):
                return None
        return {table: len(head) for table, head in self.tables.items()}

    def discard(self) -> None:
        """Remove the scratch file and its WAL."""
        _remove(self.tmp, self.wal)


def write_index(
    target: Path, tables: dict[str, list[tuple]], meta: dict[str, str], prefill: Prefill | None = None
) -> None:
    """Write a complete index to ``target`` atomically, then its graph file (graph_file.py);
    with ``prefill``, the rows it wrote are not written again (all are when they are not the
    heads of ``tables``)."""
    graph = tables.get("graph", [])
    written = prefill.heads(tables) if prefill is not None else None
    if prefill is not None and written is None:
        prefill.discard()
    with replacing(target, prefilled=written is not None) as con:
        if written is None:
            con.execute(index_ddl())
        for table, rows in tables.items():
            if table != "graph":
                start = written.get(table, 0) if written else 0
                insert_rows(con, table, rows[start:] if start else rows)
        insert_rows(con, "meta", sorted({**meta, "schema_version": str(SCHEMA_VERSION)}.items()))
        token = write_graph(con, graph)
    write_graph_file(target, graph, token)


def write_graph(con: duckdb.DuckDBPyConnection, rows: list[tuple[str, bytes]], in_table: bool = True) -> str:
    """Name the packed graph ``rows`` in ``meta`` and store them in the ``graph`` table, or,
    for a patch (``in_table`` False), empty the table: the file beside the index holds them,
    and without it a query packs them from the tables again (5 MB of blobs written and
    checkpointed cost a patch ~60 ms). Returns their token."""
    token = graph_token(rows)
    con.execute("DELETE FROM graph")
    if in_table:
        insert_rows(con, "graph", rows)
    con.execute("INSERT OR REPLACE INTO meta VALUES ('graph_token', ?)", [token])
    return token
