"""perfq never replaces a path it did not create, and reads source files within their limits:
`--db` and `--out` refuse what is not their own kind of file, temp files have unique names,
source symlinks leaving the repository or pointing at devices are skipped (issue 33, items 1-3)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from perfq.common.cli import EXIT_ERROR
from perfq.config import Config
from perfq.schema.engine import duckdb
from tests.aten_fixture import make_repo


def _one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == EXIT_ERROR, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    for needle in needles:
        assert needle in proc.stderr, (needle, proc.stderr)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    return make_repo(tmp_path_factory.mktemp("paths") / "repo")


def _history(path: Path) -> bytes:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE runs (run_id VARCHAR); INSERT INTO runs VALUES ('r1')")
    con.close()
    return path.read_bytes()


@pytest.mark.parametrize("kind", ["notes", "history", "other-db", "symlink", "directory"])
def test_index_db_never_replaces_a_file_perfq_did_not_create(repo: Path, tmp_path: Path, cli, kind: str):
    target = tmp_path / "target"
    if kind == "notes":
        target.write_text("notes\n")
    elif kind == "history":
        _history(target)
    elif kind == "other-db":
        con = duckdb.connect(str(target))
        con.execute("CREATE TABLE mine (x INTEGER)")
        con.close()
    elif kind == "symlink":
        (tmp_path / "real").write_text("mine\n")
        target.symlink_to(tmp_path / "real")
    else:
        target.mkdir()
    before = target.read_bytes() if target.is_file() else None
    _one_line_error(cli(repo, "index", "-q", "--no-trace", "--db", str(target)), "refusing to replace", "--db")
    if before is not None:
        assert target.read_bytes() == before
    assert target.is_symlink() == (kind == "symlink")
    assert not [p for p in tmp_path.iterdir() if p.name not in ("target", "real")]


def test_index_db_replaces_its_own_index_and_an_empty_file(repo: Path, tmp_path: Path, cli):
    target = tmp_path / "index.duckdb"
    target.touch()
    assert cli(repo, "index", "-q", "--no-trace", "--db", str(target)).returncode == 0
    assert cli(repo, "index", "-q", "--no-trace", "--full", "--db", str(target)).returncode == 0
    assert cli(repo, "stats", "--db", str(target)).returncode == 0
