"""A full disk (a tiny tmpfs, mounted when the suite runs as root) while `perfq index` writes the
index or `perfq import` writes the history: one line, the previous file intact, no scratch file."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from perfq.options import EXIT_ERROR
from tests.aten_fixture import make_repo


@pytest.fixture
def tiny(tmp_path: Path) -> Iterator[Path]:
    """A 256 KB tmpfs (skipped where it cannot be mounted: not root, no tmpfs)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                                           capture_output=True).returncode != 0:
        pytest.skip("a tmpfs cannot be mounted here")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _one_line(proc: subprocess.CompletedProcess, needle: str) -> None:
    assert proc.returncode == EXIT_ERROR, (proc.returncode, proc.stderr)
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1 and needle in proc.stderr, proc.stderr


def test_an_index_onto_a_full_disk_is_one_line_and_leaves_no_scratch(tmp_path: Path, tiny: Path, cli):
    repo = make_repo(tmp_path / "repo")
    db = tiny / "index.duckdb"
    _one_line(cli(repo, "index", "-q", "--no-trace", "--db", str(db)), "No space left on device")
    assert not db.exists()
    assert not [p for p in tiny.iterdir() if ".tmp" in p.name]


def test_an_import_onto_a_full_disk_is_one_line(tmp_path: Path, tiny: Path, cli):
    from perfq.run.results import export_runs
    from tests.test_run_import import _run

    repo = make_repo(tmp_path / "repo")
    result = tmp_path / "r.json"
    export_runs([_run(values=tuple(float(v) for v in range(20_000)))], result)
    (tiny / "filler").write_bytes(b"\0" * (200 * 1024))
    proc = cli(repo, "import", str(result), "--history", str(tiny / "history.duckdb"))
    assert proc.returncode == EXIT_ERROR and proc.stderr.count("\n") == 1, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr


def test_a_facts_cache_that_cannot_be_written_names_the_index(tmp_path: Path, cli):
    """Issue 37 (low): a failed save of the facts cache (a full disk; here a directory in its place, which
    fails the same way on every machine) surfaced as "cannot write the output"; it names the index's cache."""
    repo = make_repo(tmp_path / "repo")
    db = tmp_path / "index.duckdb"
    (tmp_path / "index.duckdb.facts").mkdir()
    _one_line(cli(repo, "index", "-q", "--no-trace", "--db", str(db)),
              f"cannot write the facts cache of the index at {db}.facts")
