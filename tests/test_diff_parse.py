"""Diff parsing: changed lines on both sides, statuses, and rebuilding a patch's new side."""

from __future__ import annotations

import difflib
import re

import pytest

from common import git as gitmod
from common.diff import apply_hunks, parse_diff
from common.errors import PerfqError

OLD = "".join(f"line {i}\n" for i in range(1, 11))


def _diff(old: str, new: str, path: str = "a.cpp") -> str:
    body = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}", n=0))
    return f"diff --git a/{path} b/{path}\n" + body


def test_modified_lines_on_both_sides():
    new = OLD.replace("line 3\n", "line three\n").replace("line 8\n", "")
    (fc,) = parse_diff(_diff(OLD, new))
    assert fc.status == "modified" and fc.path == "a.cpp"
    assert fc.removed == {3, 8}
    assert 3 in fc.added


@pytest.mark.parametrize(
    "new",
    [
        OLD.replace("line 5\n", "line 5\ninserted\n"),
        OLD.replace("line 1\n", "first\nline 1\n"),
        OLD.replace("line 10\n", "line 10\nlast\n"),
        OLD.replace("line 4\nline 5\n", ""),
        OLD.replace("line 2\n", "two\n").replace("line 9\n", "nine\nnine and a half\n"),
    ],
)
def test_apply_hunks_rebuilds_the_new_side(new):
    (fc,) = parse_diff(_diff(OLD, new))
    assert apply_hunks(OLD.encode(), fc) == new.encode()


def test_pure_insertion_maps_to_the_line_it_follows():
    (fc,) = parse_diff(_diff(OLD, OLD.replace("line 5\n", "line 5\ninserted\n")))
    assert fc.removed == {5} and fc.added == {6}


def test_added_deleted_and_renamed_files():
    text = (
        "diff --git a/new.cpp b/new.cpp\nnew file mode 100644\n--- /dev/null\n+++ b/new.cpp\n@@ -0,0 +1 @@\n+int x;\n"
        "diff --git a/gone.cpp b/gone.cpp\ndeleted file mode 100644\n--- a/gone.cpp\n+++ /dev/null\n"
        "@@ -1 +0,0 @@\n-int y;\n"
        "diff --git a/old.cpp b/moved.cpp\nsimilarity index 100%\nrename from old.cpp\nrename to moved.cpp\n"
    )
    statuses = {fc.path: fc.status for fc in parse_diff(text)}
    assert statuses == {"new.cpp": "added", "gone.cpp": "deleted", "moved.cpp": "renamed"}


def test_garbage_is_a_clear_error():
    assert parse_diff("") == []
    with pytest.raises(PerfqError, match="not a unified diff"):
        parse_diff("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n-only one line\n")


def test_yaml_entries_select_ops_and_backwards():
    from common.config import Config
    from query.changes import changed_functions

    derivatives = (
        "- name: _softmax(Tensor self, int dim, bool half_to_float) -> Tensor\n"
        "  self: _softmax_backward_data(grad, result, dim, self.scalar_type())\n"
        "\n"
        "- name: relu(Tensor self) -> Tensor\n"
        "  self: threshold_backward(grad, result, 0)\n"
    )
    new = derivatives.replace("self.scalar_type())", "self.scalar_type()) * 1")
    (fc,) = parse_diff(_diff(derivatives, new, "tools/autograd/derivatives.yaml"))
    texts = {"tools/autograd/derivatives.yaml": (derivatives.encode(), new.encode())}
    cs = changed_functions([fc], lambda p: texts[p][0], lambda p: texts[p][1], Config())
    assert [op for op, _ in cs.yaml_ops] == ["_softmax", "_softmax_backward_data"] * 2


# A removed line whose text starts with "-- " and an added one starting with "++ " look like
# file headers ("--- a/x", "+++ b/x"); the hand-written parsers dropped the rest of the hunk.
HEADER_LOOKALIKES = """diff --git a/x.lua b/x.lua
--- a/x.lua
+++ b/x.lua
@@ -1,3 +1,3 @@
 a
--- comment removed
+++ plus plus added
 for i = 1, n do
@@ -10,2 +10,3 @@
 c
+while (x < n) { __syncthreads(); }
 d
"""


def test_header_lookalike_lines_stay_in_their_hunk():
    (fc,) = parse_diff(HEADER_LOOKALIKES)
    assert fc.path == "x.lua"
    assert [[(ln.kind, ln.new_line, ln.text) for ln in h.lines] for h in fc.hunks] == [
        [(" ", 1, "a"), ("-", 2, "-- comment removed"), ("+", 2, "++ plus plus added"), (" ", 3, "for i = 1, n do")],
        [(" ", 10, "c"), ("+", 11, "while (x < n) { __syncthreads(); }"), (" ", 12, "d")],
    ]
    assert fc.removed == {2} and fc.added == {2, 11}


def test_hints_and_history_read_header_lookalikes_as_content():
    from perfq.bisect.hints import scan_diff
    from perfq.coverage.history import COMMIT_MARK, parse_log

    hints = scan_diff(HEADER_LOOKALIKES)
    assert [(h.kind, h.file, h.line) for h in hints if h.kind == "sync"] == [("sync", "x.lua", 11)]
    log = f"{COMMIT_MARK}abc def\n\n{HEADER_LOOKALIKES}"
    assert [(c.path, c.ranges) for c in parse_log(log.splitlines(keepends=True))] == [("x.lua", ((1, 3), (10, 12)))]


def test_blob_ids_are_git_s_own(tmp_path):
    """A --full-index diff names each side's blob; blob_id computes the same id from the
    bytes (how affected knows a working-tree file is the committed version), and read_blobs
    reads a blob by its id as by its revision and path."""
    from tests.aten_fixture import commit_all, git

    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "a.cpp").write_bytes(b"int a;\n")
    (tmp_path / "gone.cpp").write_bytes(b"int g;\n")
    base = commit_all(tmp_path)
    (tmp_path / "a.cpp").write_bytes(b"int a = 1;\r\n\xff\n")
    (tmp_path / "gone.cpp").unlink()
    (tmp_path / "new.cpp").write_bytes(b"")
    head = commit_all(tmp_path)
    changes = {fc.path: fc for fc in parse_diff(gitmod.diff(tmp_path, base, head))}
    for path in ("a.cpp", "new.cpp"):
        expected = git(tmp_path, "rev-parse", f"{head}:{path}").strip()
        assert changes[path].new_blob == expected
        assert gitmod.blob_id((tmp_path / path).read_bytes(), expected) == expected
    assert changes["gone.cpp"].new_blob is None  # deleted: no new side
    assert changes["new.cpp"].old_blob is None  # added: no old side
    for path in ("a.cpp", "gone.cpp"):
        old = changes[path].old_blob
        assert old == git(tmp_path, "rev-parse", f"{base}:{path}").strip()
        by_id, by_path = gitmod.read_blobs(tmp_path, [(None, old), (base, path)]).values()
        assert by_id == by_path == (b"int a;\n" if path == "a.cpp" else b"int g;\n")
    abbreviated = gitmod.out(tmp_path, "diff", base, head)  # git's default short ids name nothing in full
    assert all(fc.new_blob is None and fc.old_blob is None for fc in parse_diff(abbreviated))


def test_resolve_with_base_asks_git_once_and_agrees_with_merge_base(tmp_path, monkeypatch):
    """Both commits and their merge base from one ``git rev-parse``; a criss-cross history (two
    merge bases), unrelated histories and unknown refs answer as merge_base and resolve_refs do."""
    from tests.aten_fixture import commit_all, git

    def write_commit(text: str) -> str:
        (tmp_path / "a.cpp").write_text(text)
        return commit_all(tmp_path)

    git(tmp_path, "init", "-q", "-b", "main")
    root = write_commit("int a;\n")
    main = write_commit("int b;\n")
    git(tmp_path, "checkout", "-q", "-b", "work", root)
    work = write_commit("int c;\n")
    calls = []
    real_run = gitmod.subprocess.run
    monkeypatch.setattr(gitmod.subprocess, "run", lambda args, **kw: calls.append(args) or real_run(args, **kw))
    assert gitmod.resolve_with_base(tmp_path, "HEAD", "main") == (work, main, root)
    assert gitmod.resolve_with_base(tmp_path, "work", "work") == (work, work, work)
    assert gitmod.resolve_with_base(tmp_path, "main", "HEAD~1") == (main, root, root)
    assert len(calls) == 3
    for bad in ("nope", "--all", ""):
        with pytest.raises(PerfqError, match=f"unknown ref '{re.escape(bad)}'"):
            gitmod.resolve_with_base(tmp_path, "HEAD", bad)
    git(tmp_path, "merge", "-q", "--no-edit", "-s", "ours", main)  # work and main now have two merge bases
    git(tmp_path, "checkout", "-q", "-b", "cross", main)
    git(tmp_path, "merge", "-q", "--no-edit", "-s", "ours", work)
    assert len(git(tmp_path, "merge-base", "--all", "cross", "work").split()) == 2
    head, other, base = gitmod.resolve_with_base(tmp_path, "cross", "work")
    assert (head, other, base) == (gitmod.resolve_ref(tmp_path, "cross"), gitmod.resolve_ref(tmp_path, "work"),
                                   gitmod.merge_base(tmp_path, other, head))
    git(tmp_path, "checkout", "-q", "--orphan", "alone")
    write_commit("int d;\n")
    with pytest.raises(PerfqError, match="have no common ancestor"):
        gitmod.resolve_with_base(tmp_path, "alone", "main")


def test_resolve_refs_asks_once_and_names_the_unknown_ref(tmp_path):
    from tests.aten_fixture import commit_all, git

    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "a.cpp").write_text("int a;\n")
    first = commit_all(tmp_path)
    (tmp_path / "a.cpp").write_text("int b;\n")
    second = commit_all(tmp_path)
    assert gitmod.resolve_refs(tmp_path, ["HEAD", "HEAD~1", "main"]) == [second, first, second]
    for bad in ("nope", "--all", "", "HEAD~1..HEAD"):
        with pytest.raises(PerfqError, match=f"unknown ref '{re.escape(bad)}'"):
            gitmod.resolve_refs(tmp_path, ["HEAD", bad])
