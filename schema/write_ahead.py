"""Writing an index ahead: a forked child writes the rows the link has settled into the scratch
index while the build links on (the writer's other half; the patch path never loads it, nor the
process machinery it needs)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from perfq.common.pool import alongside
from perfq.schema.engine import duckdb
from perfq.schema.writer import cannot_write, index_ddl, insert_rows, scratch_paths


def _write_ahead(tmp: Path, tables: dict[str, list[tuple]], counts: dict[str, int]) -> None:
    """Create the scratch index ``tmp`` and write the first ``counts`` rows of ``tables``
    (writing_ahead's child; repeated in line, from scratch, when the child failed)."""
    for leftover in (tmp, Path(str(tmp) + ".wal")):
        leftover.unlink(missing_ok=True)
    con = duckdb.connect(str(tmp))
    try:
        con.execute(index_ddl())
        for table, rows in tables.items():
            insert_rows(con, table, rows[: counts[table]])
        con.execute("CHECKPOINT")
    finally:
        con.close()


@contextlib.contextmanager
def writing_ahead(target: Path, tables: dict[str, list[tuple]]) -> Iterator[Callable[[], dict[str, int]]]:
    """While the block runs, a forked child creates the scratch index of ``target`` and writes
    the rows ``tables`` hold now, on the core the block leaves idle; the block may append more
    rows to them. Yields ``written``: call it when the block's rows are ready; it waits for the
    child (repeating its write in line if the child failed) and returns the row counts it wrote,
    for ``write_index(..., written())`` inside the block. On any error the child is stopped and
    the scratch file removed."""
    tmp, wal = scratch_paths(target)
    counts = {table: len(rows) for table, rows in tables.items()}
    child = contextlib.ExitStack()
    child.enter_context(alongside(_write_ahead, tmp, tables, counts))

    def written() -> dict[str, int]:
        child.close()  # waits (once), repeats a failed write here
        return counts

    try:
        yield written
        written()
    except BaseException as exc:
        child.__exit__(type(exc), exc, exc.__traceback__)  # stops the child if it still runs
        for path in (tmp, wal):
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
        if isinstance(exc, OSError | duckdb.IOException):  # the write repeated in line failed
            raise cannot_write(target, exc) from None
        raise
