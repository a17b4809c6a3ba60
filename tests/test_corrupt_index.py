"""A damaged index (random blocks, truncation) gives every reader a one-line error, never a traceback:
damage in the data blocks is only found when a query reads them, long after the file opened."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import duckdb
import pytest

from perfq.options import EXIT_ERROR
from tests.aten_fixture import commit_all, make_repo, perfq, replace_in

HEADER = 3 * 4096  # DuckDB's file headers; blocks of BLOCK bytes follow
BLOCK = 256 * 1024
READERS = [
    ("affected", "HEAD~1"),
    ("affected", "HEAD~1", "--format", "json"),
    ("stats",),
    ("coverage",),
    ("coverage", "--scaffold", "softmax_op"),
    ("backtest", "HEAD~1..HEAD"),
]


def _opens(path: Path) -> bool:
    """Whether the index still opens and its meta table reads (what happens before any query)."""
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error:
        return False
    try:
        con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall()
        return True
    except duckdb.Error:
        return False
    finally:
        con.close()


def _reads_everything(path: Path) -> bool:
    con = duckdb.connect(str(path), read_only=True)
    try:
        for (table,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall():
            con.execute(f"SELECT * FROM {table}").fetchall()
        return True
    except duckdb.Error:
        return False
    finally:
        con.close()


def _damage_data_blocks(path: Path) -> None:
    """Overwrite every block with random bytes unless the file then no longer opens: the catalog
    and meta survive, the tables' data does not."""
    size = path.stat().st_size
    for offset in range(HEADER, size, BLOCK):
        with path.open("r+b") as fh:
            fh.seek(offset)
            saved = fh.read(BLOCK)
            fh.seek(offset)
            fh.write(os.urandom(len(saved)))
        if not _opens(path):
            with path.open("r+b") as fh:
                fh.seek(offset)
                fh.write(saved)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> tuple[Path, Path]:
    """A repo with a kernel change on top of the indexed commit, and a copy of its good index."""
    root = tmp_path_factory.mktemp("corrupt")
    repo = make_repo(root / "repo")
    proc = perfq(repo, "index", "-q", "--no-trace")
    assert proc.returncode == 0, proc.stderr
    replace_in(repo, "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp", "out[i] * 2", "out[i] * 3")
    commit_all(repo, "kernel change")
    good = root / "good.duckdb"
    shutil.copyfile(repo / ".git/perfq/index.duckdb", good)
    return repo, good


def _one_line_error(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == EXIT_ERROR, (proc.returncode, proc.stderr)
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert "is damaged" in proc.stderr and "rebuild it with `perfq index --full`" in proc.stderr


@pytest.mark.parametrize("args", READERS, ids=lambda a: "-".join(a))
def test_damaged_data_blocks_are_a_one_line_error(indexed, cli, args):
    repo, good = indexed
    db = repo / ".git/perfq/index.duckdb"
    shutil.copyfile(good, db)
    _damage_data_blocks(db)
    assert _opens(db) and not _reads_everything(db)
    _one_line_error(cli(repo, *args))


@pytest.mark.parametrize("args", READERS, ids=lambda a: "-".join(a))
@pytest.mark.parametrize("keep", [0.5, 0.1, 0.0], ids=["half", "tenth", "empty"])
def test_a_truncated_index_is_a_one_line_error(indexed, cli, args, keep: float):
    repo, good = indexed
    db = repo / ".git/perfq/index.duckdb"
    shutil.copyfile(good, db)
    os.truncate(db, int(db.stat().st_size * keep))
    proc = cli(repo, *args)
    assert proc.returncode == EXIT_ERROR, proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr


def test_the_reported_dd_damage_never_gives_a_traceback(indexed, perfq):
    """The issue's reproduction: dd of random bytes into the middle of the file."""
    repo, good = indexed
    db = repo / ".git/perfq/index.duckdb"
    shutil.copyfile(good, db)
    subprocess.run(["dd", "if=/dev/urandom", f"of={db}", "bs=4096", "seek=200", "count=100", "conv=notrunc"],
                   check=True, capture_output=True)
    for args in READERS:
        proc = perfq(repo, *args)
        assert "Traceback" not in proc.stderr, (args, proc.stderr)
        one_line = proc.returncode == EXIT_ERROR and proc.stderr.count("\n") == 1
        assert proc.returncode == 0 or one_line, (args, proc.stderr)


def test_a_full_build_replaces_a_damaged_index(indexed, cli):
    repo, good = indexed
    db = repo / ".git/perfq/index.duckdb"
    shutil.copyfile(good, db)
    _damage_data_blocks(db)
    assert cli(repo, "index", "-q", "--no-trace", "--full").returncode == 0
    assert _reads_everything(db)
    assert cli(repo, "stats").returncode == 0
