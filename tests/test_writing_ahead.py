"""Writing an index ahead (schema/write_ahead.writing_ahead): a forked child writes the rows the link's
first step settled while the second step runs; the index must be the one written in line, also
when the child fails, and an error must leave neither a scratch file nor a changed index."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pytest

from perfq.errors import PerfqError
from perfq.indexer.link import NativeLink, link
from perfq.schema import write_ahead
from perfq.schema.write_ahead import writing_ahead
from perfq.schema.writer import write_index
from tests.test_link_two_steps import CPP, OPS, PYTHON, facts

META = {"repo": "fixture"}


def _tables(db: Path) -> dict[str, list[tuple]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        names = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        return {t: con.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in names}
    finally:
        con.close()


def _ahead(db: Path) -> None:
    """The build's way: the first step's settled rows written while ``finish`` appends more."""
    native = NativeLink([facts("cpp", p, s) for p, s in CPP.items()], OPS)
    with writing_ahead(db, {t: native.t.rows[t] for t in NativeLink.SETTLED}) as written:
        tables = native.finish([facts("python", p, s) for p, s in PYTHON.items()], [], [], {}, [])
        assert len(tables.rows["calls"]) > written()["calls"]  # finish appended Python calls
        write_index(db, dict(tables.rows), META, written())


@pytest.fixture
def in_line(tmp_path: Path) -> dict[str, list[tuple]]:
    files = [*(facts("cpp", p, s) for p, s in CPP.items()), *(facts("python", p, s) for p, s in PYTHON.items())]
    db = tmp_path / "in_line.duckdb"
    write_index(db, dict(link(files, [], OPS, [], {}, []).rows), META)
    return _tables(db)


def _scratch_files(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.endswith((".tmp", ".tmp.wal"))]


def test_an_index_written_ahead_is_the_index_written_in_line(tmp_path: Path, in_line):
    db = tmp_path / "index.duckdb"
    _ahead(db)
    assert _tables(db) == in_line
    assert _scratch_files(tmp_path) == []


def test_a_failed_child_is_repeated_in_line(tmp_path: Path, in_line, monkeypatch):
    parent = os.getpid()
    real = write_ahead._write_ahead

    def fails_in_the_child(*args):
        if os.getpid() != parent:
            raise RuntimeError("the child dies")
        real(*args)

    monkeypatch.setattr(write_ahead, "_write_ahead", fails_in_the_child)
    db = tmp_path / "index.duckdb"
    _ahead(db)
    assert _tables(db) == in_line


@pytest.mark.parametrize("when", ["while the child writes", "after it wrote"])
def test_an_error_in_the_block_leaves_the_index_and_no_scratch_file(tmp_path: Path, in_line, when):
    db = tmp_path / "index.duckdb"
    _ahead(db)
    native = NativeLink([facts("cpp", p, s) for p, s in CPP.items()], OPS)
    settled = {t: native.t.rows[t] for t in NativeLink.SETTLED}
    with pytest.raises(KeyboardInterrupt), writing_ahead(db, settled) as written:
        if when == "after it wrote":
            written()
            assert _scratch_files(tmp_path)
        raise KeyboardInterrupt
    assert _tables(db) == in_line
    assert _scratch_files(tmp_path) == []


def test_a_write_that_fails_in_line_too_is_one_clear_error(tmp_path: Path, monkeypatch):
    def disk_full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(write_ahead, "_write_ahead", disk_full)
    db = tmp_path / "index.duckdb"
    with pytest.raises(PerfqError, match="cannot write the index at .*: No space left on device"):
        _ahead(db)
    assert not db.exists() and _scratch_files(tmp_path) == []
