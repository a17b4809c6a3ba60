"""git log parsing and churn from a temp git repository with history."""

from __future__ import annotations

import subprocess

import duckdb
import pytest

from common.errors import PerfqError
from perfq.coverage.churn import op_churn
from perfq.coverage.history import COMMIT_MARK, changed_lines, parse_log
from tests.coverage_fixture_db import build_index, build_repo

LOG = f"""{COMMIT_MARK}aaa ppp

diff --git a/x.cpp b/x.cpp
index 1..2 100644
--- a/x.cpp
+++ b/x.cpp
@@ -3,2 +3,3 @@ void f() {{
-a
-a2
+b
+b2
+b3
@@ -10 +11 @@
-c
+d
@@ -20,4 +21,0 @@
-gone
-gone
-gone
-gone
diff --git a/old.cpp b/old.cpp
deleted file mode 100644
--- a/old.cpp
+++ /dev/null
@@ -1,3 +0,0 @@
-x
-x
-x
{COMMIT_MARK}bbb
diff --git a/new.py b/new.py
new file mode 100644
--- /dev/null
+++ b/new.py
@@ -0,0 +1,2 @@
+@@ not a hunk
+y
"""


def test_parse_log_hunks_deletions_and_roots():
    changes = list(parse_log(LOG.splitlines(keepends=True)))
    assert [(c.commit, c.path, c.ranges, c.parents) for c in changes] == [
        ("aaa", "x.cpp", ((3, 5), (11, 11), (21, 21)), 1),
        ("bbb", "new.py", ((1, 2),), 0),
    ]


def test_changed_lines_reads_period_and_skips_root_diff(tmp_path):
    commits = build_repo(tmp_path / "repo")
    hist = changed_lines(tmp_path / "repo", "180.days")
    assert hist.commits == [commits["c3"], commits["c2"], commits["c1"]]
    assert hist.total_commits == 5
    by_commit = {(c.commit, c.path): c.ranges for c in hist.changes}
    assert by_commit[(commits["c1"], "aten/src/ATen/native/BinaryOps.cpp")] == ((45, 45),)
    assert by_commit[(commits["c3"], "aten/src/ATen/native/Lerp.cpp")] == ((5, 5),)
    everything = changed_lines(tmp_path / "repo", "40.years")
    assert commits["c0"] in everything.root_commits
    assert not [c for c in everything.changes if c.commit == commits["c0"]]  # the import is not churn


def test_changed_lines_errors_are_one_line(tmp_path):
    with pytest.raises(PerfqError, match="not a git repository"):
        changed_lines(tmp_path, "1.day")
    build_repo(tmp_path / "r")
    with pytest.raises(PerfqError, match="unknown git ref"):
        changed_lines(tmp_path / "r", "1.day", ref="no-such-ref")
    empty = tmp_path / "empty"
    empty.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=empty, check=True)
    assert changed_lines(empty, "1.day").commits == []


def _churn(tmp_path, since):
    repo = tmp_path / "repo"
    if not repo.exists():
        build_repo(repo)
    con = duckdb.connect(str(build_index(tmp_path / f"i{since}.duckdb")), read_only=True)
    try:
        return op_churn(repo, con, since)
    finally:
        con.close()


def test_op_churn_counts_commits_reaching_each_op(tmp_path):
    commits = build_repo(tmp_path / "repo")
    op_commits, note = _churn(tmp_path, "180.days")
    assert op_commits["add.Tensor"] == {commits["c1"]}
    assert op_commits["add.Scalar"] == {commits["c1"]}  # reached through add.Tensor
    assert op_commits["lerp.Scalar"] == {commits["c1"], commits["c3"]}
    assert op_commits["lerp.Tensor"] == {commits["c2"]}
    assert "softmax.int" not in op_commits
    assert note.commits == 3 and note.commits_with_indexed_changes == 3
    old, _ = _churn(tmp_path, "40.years")
    assert old["add.Tensor"] == {commits["c1"], commits["c_old"]}


def test_one_commit_tree_has_no_history(tmp_path):
    repo = tmp_path / "one"
    repo.mkdir()
    (repo / "a.cpp").write_text("int x;\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "i"], cwd=repo, check=True
    )
    con = duckdb.connect(str(build_index(tmp_path / "i.duckdb")), read_only=True)
    op_commits, note = op_churn(repo, con, "180.days")
    con.close()
    assert op_commits is None
    assert "one-commit tree" in str(note.note)


def test_non_git_tree_has_no_history(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    con = duckdb.connect(str(build_index(tmp_path / "i.duckdb")), read_only=True)
    op_commits, note = op_churn(plain, con, "180.days")
    con.close()
    assert op_commits is None and "not a git repository" in str(note.note)
