"""A benchmark whose trace failed because a module it imports was not installed is traced again
once that module can be imported: PyTorch 2.6.0's ``fill_test`` imports
``torch.testing._internal.common_device_type``, which needs ``expecttest``, and installing it
used to change nothing (the failure was cached with the file's digest until the file changed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexer.trace import FileTrace, TraceStatus
from tests.conftest import db_rows, run_perfq
from tests.oot_fixture import git, make_oot_repo, script

pytestmark = [pytest.mark.torch]

HELPER = "perfq_test_bench_helper"


def _trace_of(repo: Path, bench: str) -> tuple[str, str]:
    (row,) = db_rows(repo / ".git/perfq/index.duckdb", f"SELECT status, reason FROM traces WHERE bench = '{bench}'")
    return row


def test_a_trace_that_missed_a_module_is_retried_once_it_is_installed(tmp_path: Path):
    pytest.importorskip("torch")
    repo = make_oot_repo(tmp_path).path
    (repo / "test/microbench/needs_helper.py").write_text(
        f"import {HELPER}\n" + script("x = torch.randn(16, 16, device=device)", "output = torch.flip(x, [0])")
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a script that needs a helper module")
    site = tmp_path / "site"
    site.mkdir()
    env = {"PYTHONPATH": str(site)}

    first = run_perfq(repo, "index", "-q", env=env)
    assert first.returncode == 0, first.stderr
    status, reason = _trace_of(repo, "needs_helper")
    assert status == "failed" and reason.endswith(f"ModuleNotFoundError: No module named '{HELPER}'")

    again = run_perfq(repo, "index", "-q", env=env)  # still missing: the failure is reused, not retried
    assert again.returncode == 0, again.stderr
    assert _trace_of(repo, "needs_helper")[0] == "failed"

    (site / f"{HELPER}.py").write_text("VALUE = 1\n")
    installed = run_perfq(repo, "index", "-q", env=env)
    assert installed.returncode == 0, installed.stderr
    assert _trace_of(repo, "needs_helper") == ("ok", "")
    ops = db_rows(repo / ".git/perfq/index.duckdb", "SELECT base FROM trace_ops WHERE bench = 'needs_helper'")
    assert ("flip",) in ops


def test_only_a_missing_top_level_module_asks_for_a_retry():
    def failed(reason: str) -> FileTrace:
        return FileTrace("b.py", TraceStatus.failed, reason)

    assert failed("meta: ModuleNotFoundError: No module named 'expecttest'").missing_module() == "expecttest"
    # a missing submodule of an installed package: installing something rarely brings it, and
    # checking would import the package (torch) on every build
    assert failed("ModuleNotFoundError: No module named 'torch.fb'").missing_module() is None
    assert failed("RuntimeError: no such device here").missing_module() is None
    assert FileTrace("b.py", TraceStatus.ok, "No module named 'x'").missing_module() is None
    assert failed("ModuleNotFoundError: No module named 'json'").installed_since()
    assert not failed(f"ModuleNotFoundError: No module named '{HELPER}_absent'").installed_since()
