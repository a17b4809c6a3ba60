"""A full build writes its C++ rows into the new index from a forked child while it links the
Python files (``writer.Prefill``): the index is the one a single write makes, and a failed,
stale or interrupted prefill never shows in it or leaves a scratch file."""

from __future__ import annotations

import os
import time
from pathlib import Path

import duckdb
import pytest

from common.config import Config
from common.errors import PerfqError
from indexer import relink as relink_module
from indexer.build import build_index
from indexer.link import NativeLink
from schema import writer
from schema.writer import Prefill, write_index
from tests.aten_fixture import make_repo


def _rows(db: Path) -> dict[str, list[tuple]]:
    """Every table's rows in the order they were written (meta without its timings and dates)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
        out = {t: con.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in tables if t != "meta"}
        out["meta"] = con.execute(
            "SELECT * FROM meta WHERE key NOT LIKE 'time_%' AND key <> 'built_at' ORDER BY key"
        ).fetchall()
    finally:
        con.close()
    return out


def _scratch_files(db: Path) -> list[str]:
    return [p.name for p in db.parent.iterdir() if p.name.endswith((".tmp", ".tmp.wal"))]


class _NeverKept(Prefill):
    """A prefill whose rows are never taken: the index is written in one go."""

    def heads(self, tables):
        return None


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def one_write(repo: Path, tmp_path: Path, monkeypatch) -> dict[str, list[tuple]]:
    """The rows of the fixture's index written in one go, no prefilled rows kept."""
    db = tmp_path / "one" / "index.duckdb"
    db.parent.mkdir()
    with monkeypatch.context() as m:
        m.setattr(relink_module, "Prefill", _NeverKept)
        build_index(repo, Config(), db, jobs=1, quiet=True, full=True)
    return _rows(db)


def test_a_prefilled_build_writes_every_row_once_in_the_order_of_one_write(repo, tmp_path, one_write):
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True, full=True)
    assert _rows(db) == one_write
    assert all(one_write[t] for t in NativeLink.FINAL_HEADS)  # the prefilled tables hold rows
    assert not _scratch_files(db)


def test_a_prefill_that_fails_in_its_child_is_written_in_line(repo, tmp_path, one_write, monkeypatch):
    parent, write = os.getpid(), Prefill.write

    def fails_in_children(self):
        if os.getpid() != parent:
            raise OSError(28, "No space left on device")
        write(self)

    monkeypatch.setattr(Prefill, "write", fails_in_children)
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True, full=True)
    assert _rows(db) == one_write and not _scratch_files(db)


def test_a_prefill_that_cannot_be_written_is_a_one_line_error_and_keeps_the_index(repo, tmp_path, monkeypatch):
    """A full disk fails the child's write and then the same write in line: its error is the
    one-line error of any index write."""
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True)
    before = _rows(db)

    def full_disk(*args, **kwargs):
        raise duckdb.IOException("IO Error: Could not write file: No space left on device")

    monkeypatch.setattr(writer, "insert_rows", full_disk)
    with pytest.raises(PerfqError, match="cannot write the index at .*No space left on device"):
        build_index(repo, Config(), db, jobs=1, quiet=True, full=True)
    assert _rows(db) == before and not _scratch_files(db)


def test_rows_changed_after_the_prefill_are_written_again_not_kept(tmp_path):
    db = tmp_path / "index.duckdb"
    prefill = Prefill(db, {"includes": [(0, "a.h", None)]})
    prefill.write()
    write_index(db, {"includes": [(0, "b.h", None), (1, "c.h", 0)]}, {}, prefill)  # its first row changed
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT * FROM includes ORDER BY rowid").fetchall() == [(0, "b.h", None), (1, "c.h", 0)]
    finally:
        con.close()
    assert not _scratch_files(db)


def test_ctrl_c_while_the_prefill_runs_leaves_the_index_and_no_scratch_file(repo, tmp_path, monkeypatch):
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True)
    before = _rows(db)
    pack = NativeLink.pack  # the link's last step, while the prefill runs

    def interrupted(self, *args, **kwargs):
        pack(self, *args, **kwargs)
        time.sleep(0.5)  # the child has written (part of) the scratch file by now
        raise KeyboardInterrupt

    monkeypatch.setattr(NativeLink, "pack", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_index(repo, Config(), db, jobs=1, quiet=True, full=True)
    assert _rows(db) == before and not _scratch_files(db)
