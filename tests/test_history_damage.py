"""Issue 37: `perfq compare LABEL --history damaged.duckdb` was a traceback (`Corrupt database file`,
found only when a query reads the damaged block) where `run` and `history` give one line. Every
offset of a real history is damaged in turn: the comparison answers or fails in one PerfqError."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from common.errors import PerfqError
from perfq.run.compare import Settings
from perfq.run.compare_labels import comparison_for_label
from tests.run_fakebench import make_bench_root

BLOCK = 4096


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    """A history holding an A/B run of the fake benchmark under label L."""
    tmp = tmp_path_factory.mktemp("damage")
    root = make_bench_root(tmp)
    done = subprocess.run(
        [sys.executable, "-m", "perfq", "run", "--label", "L", "--ab", "--bench", "fake", "--bench-root", str(root),
         "--repeat", "2", "--base-python", sys.executable, "--head-python", sys.executable, "--no-adaptive",
         "--history", str(tmp / "h.duckdb"), "--repo", str(tmp)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return tmp / "h.duckdb"


def test_a_damaged_block_anywhere_is_an_answer_or_one_error(history, tmp_path):
    size = history.stat().st_size
    errors = []
    for offset in range(3 * BLOCK, size, 8 * BLOCK):
        copy = tmp_path / "h.duckdb"
        shutil.copyfile(history, copy)
        with open(copy, "r+b") as fh:
            fh.seek(offset)
            fh.write(os.urandom(BLOCK))
        try:
            comparison_for_label(copy, "L", Settings())
        except PerfqError as exc:
            errors.append(str(exc))
    assert errors and all("\n" not in e for e in errors)
    assert any("Corrupt database file" in e for e in errors)  # damage found at query time, not at open
