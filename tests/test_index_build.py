"""Building the index: incremental modes, atomicity, locking and bad input."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.config import Config
from common.errors import PerfqError
from indexer import build as build_module
from indexer import incremental
from indexer import relink as relink_module
from indexer.build import build_index
from perfq.options import EXIT_ERROR
from schema import writer
from schema.graph_file import graph_file, read_graph_file
from schema.index_store import IndexStore
from schema.packed_graph import PARTS, pack_graph
from schema.writer import build_lock, write_graph
from tests.aten_fixture import commit_all, make_repo, perfq, replace_in

KERNEL = "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp"
SOFTMAX_OP = "aten/src/ATen/native/SoftmaxOp.cpp"
OTHER_IMPL = "namespace other {\nvoid softmax_op_kernel_impl(int) {}\n}\n"
EDGE_TABLES = {
    "call_edges": "SELECT caller_id, callee_id, kind FROM call_edges",
    "op_calls": "SELECT function_id, op, via FROM op_calls",
    "reach_edges": "SELECT dst, src, kind FROM reach_edges",
    "functions": "SELECT id, qualname, start_line, end_line FROM functions",
    "files": "SELECT path, sha256 FROM files",
}


def _snapshot(db: Path) -> dict[str, set]:
    """The tables' rows, and the digests of the packed graph's parts the queries read."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = {name: set(con.execute(sql).fetchall()) for name, sql in EDGE_TABLES.items()}
        token = con.execute("SELECT value FROM meta WHERE key = 'graph_token'").fetchone()[0]
    finally:
        con.close()
    graph = read_graph_file(db, token)
    assert graph is not None  # every build writes it
    return {**rows, "graph": {(part, hashlib.md5(bytes(data)).hexdigest()) for part, data in graph.items()}}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def test_body_only_edit_is_patched_and_equals_a_full_link(repo: Path, tmp_path: Path):
    db = tmp_path / "index.duckdb"
    first = build_index(repo, Config(), db, jobs=1, quiet=True)
    assert first.mode == "linked" and first.reparsed > 0
    replace_in(repo, KERNEL, "    out[i] = out[i] * 2;\n", "    out[i] = out[i] * 2;\n    out[i] += helper(i);\n")
    patched = build_index(repo, Config(), db, jobs=1, quiet=True)
    assert (patched.mode, patched.reparsed) == ("patched", 1)
    full_db = tmp_path / "full.duckdb"
    shutil.copyfile(db.with_name(db.name + ".facts"), full_db.with_name(full_db.name + ".facts"))
    build_index(repo, Config(), full_db, jobs=1, quiet=True, full=True)
    assert _snapshot(db) == _snapshot(full_db)


def test_body_edit_calling_the_same_functions_keeps_the_graph(repo: Path, tmp_path: Path, monkeypatch):
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True)
    before = _snapshot(db)["graph"]
    repacked = []
    monkeypatch.setattr(incremental, "_repack_graph", lambda *args: repacked.append(args))
    replace_in(repo, KERNEL, "    out[i] = out[i] * 2;\n", "    out[i] = out[i] * 3;\n")
    patched = build_index(repo, Config(), db, jobs=1, quiet=True)
    assert (patched.mode, patched.reparsed) == ("patched", 1) and repacked == []  # same calls: graph kept
    full_db = tmp_path / "full.duckdb"
    build_index(repo, Config(), full_db, jobs=1, quiet=True, full=True)
    assert _snapshot(db) == _snapshot(full_db) and _snapshot(db)["graph"] == before


LINKED_ROWS = {  # every column, lines and details included, duplicates kept
    "calls": "SELECT * FROM calls",
    "call_edges": "SELECT * FROM call_edges",
    "op_calls": "SELECT * FROM op_calls",
    "reach_edges": "SELECT * FROM reach_edges",
    "functions": "SELECT id, file_id, qualname, start_line, end_line FROM functions",
}


def _linked_rows(db: Path) -> dict[str, list[tuple]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {name: sorted(con.execute(sql).fetchall()) for name, sql in LINKED_ROWS.items()}
    finally:
        con.close()


@pytest.mark.parametrize(
    "edit",
    [
        ("  for (int i = 0; i < 4; i++) {\n", "\n\n  for (int i = 0; i < 4; i++) {\n"),  # what follows moves down
        ("    out[i] = out[i] * 2;\n", "    out[i] = helper(out[i]);\n"),  # one call more, no line moves
        ("    inner_loop<scalar_t>(", "    helper(0); inner_loop<scalar_t>("),  # the other function's calls
        ("}  // namespace at::native\n", "}  // namespace at::native\n// a comment\n"),  # nothing to link again
        ("  });\n}\n}  // namespace\n", "  });\n\n}\n}  // namespace\n"),  # a function only grows
    ],
    ids=["lines-move", "one-function", "other-function", "comment", "extent-only"],
)
def test_a_body_edit_patches_exactly_the_rows_a_full_link_makes(repo: Path, tmp_path: Path, edit):
    """Rows of functions whose calls did not change are kept, the others' replaced: every
    column (call lines, reach details, extents) is what a full link writes."""
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True)
    replace_in(repo, KERNEL, *edit)
    assert build_index(repo, Config(), db, jobs=1, quiet=True).mode == "patched"
    full_db = tmp_path / "full.duckdb"
    build_index(repo, Config(), full_db, jobs=1, quiet=True, full=True)
    assert _linked_rows(db) == _linked_rows(full_db)
    assert _snapshot(db)["graph"] == _snapshot(full_db)["graph"]


def _keyed(db: Path) -> dict[str, set]:
    """The graph with ids replaced by what they name (ids differ between builds)."""
    con = duckdb.connect(str(db), read_only=True)

    def q(sql: str) -> list[tuple]:
        return con.execute(sql).fetchall()

    try:
        fn = {
            i: (path, name, line)
            for i, path, name, line in q(
                "SELECT f.id, fi.path, f.qualname, f.start_line FROM functions f JOIN files fi ON fi.id = f.file_id"
            )
        }
        node = {i: fn.get(i, (k, key)) for i, k, key in q("SELECT id, kind, key FROM nodes")}
        return {
            "call_edges": {(fn[a], fn[b], k) for a, b, k in q("SELECT caller_id, callee_id, kind FROM call_edges")},
            "op_calls": {(fn[f], op, via) for f, op, via in q("SELECT function_id, op, via FROM op_calls")},
            "reach": {(node[d], node[s], k) for d, s, k in q("SELECT dst, src, kind FROM reach_edges")},
            "kernels": {(o, k, n, fn.get(f)) for o, k, n, f in q("SELECT * FROM kernels")},
            "stub_impls": {(s, a, n, fn.get(f)) for s, a, n, f, *_ in q("SELECT * FROM stub_impls")},
            "library_impls": {(o, n, fn.get(f)) for _, _, o, n, f, *_ in q("SELECT * FROM library_impls")},
            "formula_calls": set(q("SELECT * FROM formula_calls")),
            "functions": set(fn.values()),
        }
    finally:
        con.close()


@pytest.mark.parametrize(
    "edit",
    [
        ("}  // namespace\n", "void extra_helper() {}\n}  // namespace\n"),  # a new function
        ("    out[i] = out[i] * 2;\n", "    out[i] = out[i] * 2;\n    extra(i);\n  }\n}\nvoid extra(int i) {\n  {\n"),
        (
            "void softmax_op_kernel_impl(",
            "void softmax_op_kernel_impl_renamed(const Tensor& x) {}\nvoid softmax_op_kernel_impl(",
        ),
        (  # a new definition of a name an unchanged file calls (SoftmaxOp.cpp's meta function)
            "}  // namespace at::native\n",
            "}  // namespace at::native\nnamespace at::meta {\n"
            "void set_output_raw_strided(int a, IntArrayRef s, IntArrayRef t, TensorOptions o) {}\n}\n",
        ),
    ],
    ids=["new-function", "split-function", "new-before", "called-from-another-file"],
)
def test_structural_edit_is_patched_and_equals_a_full_link(repo: Path, tmp_path: Path, edit):
    _patched_equals_full_link(repo, tmp_path, KERNEL, edit)


@pytest.mark.parametrize(
    ("path", "edit"),
    [  # a new function before the kernels of a structured op, and before a library registration's
        ("aten/src/ATen/native/SoftmaxOp.cpp", ("namespace at::meta {\n", "void first() {}\nnamespace at::meta {\n")),
        ("aten/src/ATen/native/quantized/cpu/qthing.cpp", ("namespace {\n", "namespace {\nvoid first() {}\n")),
        # a dispatch kernel removed (its op keeps no function), and one whose signature changed
        (SOFTMAX_OP, ("Tensor lonely_kernel(const Tensor& self) {\n  make_size(3);\n  return self;\n}\n", "")),
        (SOFTMAX_OP, ("lonely_kernel(const Tensor& self) {", "lonely_kernel(const Tensor& self, int x) {")),
        # an overload next to a function of the same name, before it: every id of the file is fresh
        (KERNEL, ("void softmax_op_kernel_impl(", "void softmax_op_kernel_impl(int) {}\nvoid softmax_op_kernel_impl(")),
        (SOFTMAX_OP, ("static int make_size(", "static int make_size(float x) { return 0; }\nstatic int make_size(")),
        # a function of the same name in another namespace, after and before it
        (KERNEL, ("REGISTER_DISPATCH(", f"{OTHER_IMPL}REGISTER_DISPATCH(")),
        (KERNEL, ("namespace {\n", f"{OTHER_IMPL}namespace {{\n")),
    ],
    ids=["dispatch-kernels", "library-impl", "kernel-removed", "kernel-signature", "overload-before", "overload",
         "same-name-after", "same-name-before"],
)
def test_structural_edit_of_registered_kernels_is_patched_and_equals_a_full_link(
    repo: Path, tmp_path: Path, path: str, edit
):
    _patched_equals_full_link(repo, tmp_path, path, edit)


def test_functions_still_there_keep_their_ids_through_a_structural_patch(repo: Path, tmp_path: Path):
    """A new function gets a fresh id; the others of its file keep theirs, and so do the edges
    into them (only their own calls are linked again)."""
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True)

    def ids() -> dict[str, int]:
        con = duckdb.connect(str(db), read_only=True)
        try:
            sql = "SELECT f.qualname, f.id FROM functions f JOIN files fi ON fi.id = f.file_id WHERE fi.path = ?"
            return dict(con.execute(sql, [KERNEL]).fetchall())
        finally:
            con.close()

    before = ids()
    replace_in(repo, KERNEL, "}  // namespace\n", "void extra_helper() { helper(1); }\n}  // namespace\n")
    assert build_index(repo, Config(), db, jobs=1, quiet=True).mode == "patched"
    after = ids()
    assert {q: i for q, i in after.items() if q in before} == before
    assert after["at::native::(anonymous namespace)::extra_helper"] > max(before.values())


def _patched_equals_full_link(repo: Path, tmp_path: Path, path: str, edit: tuple[str, str]) -> None:
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True)
    replace_in(repo, path, *edit)
    report = build_index(repo, Config(), db, jobs=1, quiet=True)
    assert (report.mode, report.reparsed) == ("patched", 1)
    full_db = tmp_path / "full.duckdb"
    build_index(repo, Config(), full_db, jobs=1, quiet=True, full=True)
    assert _keyed(db) == _keyed(full_db)
    if "set_output_raw_strided" in edit[1]:  # the unchanged caller's edge into the new definition
        assert any(callee[1] == "at::meta::set_output_raw_strided" for _, callee, _ in _keyed(db)["call_edges"])


def test_an_index_moved_with_its_repository_is_still_patched(repo: Path, tmp_path: Path):
    """Its inputs name the repository's yaml by its path inside the repository, so a checkout
    elsewhere (another CI workspace) with the index restored beside it patches, not re-links."""
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True)
    moved, moved_db = tmp_path / "elsewhere" / "repo", tmp_path / "elsewhere" / "index.duckdb"
    shutil.copytree(repo, moved)
    for suffix in ("", ".facts", ".graph"):
        shutil.copyfile(f"{db}{suffix}", f"{moved_db}{suffix}")
    replace_in(moved, KERNEL, "    out[i] = out[i] * 2;\n", "    out[i] = out[i] * 3;\n")
    assert build_index(moved, Config(), moved_db, jobs=1, quiet=True).mode == "patched"


def test_new_registration_relinks(repo: Path, tmp_path: Path):
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True)
    replace_in(
        repo,
        KERNEL,
        "REGISTER_DISPATCH(softmax_op_stub",
        "REGISTER_DISPATCH(other_stub, &softmax_op_kernel_impl);\nREGISTER_DISPATCH(softmax_op_stub",
    )
    report = build_index(repo, Config(), db, jobs=1, quiet=True)
    assert (report.mode, report.reparsed) == ("linked", 1)


def test_a_new_include_relinks(repo: Path, tmp_path: Path):
    """Includes decide where a file's method calls resolve, and a patch does not redo them."""
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True)
    text = (repo / KERNEL).read_text()
    (repo / KERNEL).write_text('#include <ATen/native/SoftmaxOp.h>\n' + text)
    report = build_index(repo, Config(), db, jobs=1, quiet=True)
    assert (report.mode, report.reparsed) == ("linked", 1)


def test_interrupted_build_keeps_the_previous_index(repo: Path, tmp_path: Path, monkeypatch):
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True)
    before = _snapshot(db)
    (repo / "aten/src/ATen/native/New.cpp").write_text("namespace at::native { void fresh() {} }\n")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(relink_module, "write_index", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_index(repo, Config(), db, jobs=1, quiet=True)
    assert _snapshot(db) == before
    assert not [p for p in db.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_patch_checks_and_patches_on_one_connection(repo: Path, tmp_path: Path, monkeypatch):
    """Opening a DuckDB file costs tens of milliseconds: the patch opens only its scratch copy, once;
    the index itself is opened once, read-only, to recognize it as perfq's (issue 37: by what it is,
    never by the files beside it)."""
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True)
    opened: list[str] = []
    connect = writer.duckdb.connect
    monkeypatch.setattr(writer.duckdb, "connect", lambda path, *a, **k: opened.append(path) or connect(path, *a, **k))
    replace_in(repo, KERNEL, "    out[i] = out[i] * 2;\n", "    out[i] = out[i] * 3;\n")
    assert build_index(repo, Config(), db, jobs=1, quiet=True).mode == "patched"
    assert [Path(p).name for p in opened if Path(p).name.endswith(".tmp")] == [Path(opened[-1]).name]
    assert len(opened) == 2 and opened[0] == str(db)


@pytest.mark.parametrize("damage", ["garbage", "empty", "foreign"])
def test_an_index_that_cannot_be_patched_is_rebuilt_and_no_scratch_copy_is_left(repo: Path, tmp_path: Path, damage):
    """An empty file where the index was is rebuilt; text or another DuckDB database there is no
    perfq index, whatever perfq files lie beside it (issue 37): refused, left as it is."""
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True)
    if damage == "foreign":  # a DuckDB file, but not a perfq index
        db.unlink()
        con = duckdb.connect(str(db))
        con.execute("CREATE TABLE t (x INTEGER)")
        con.close()
    else:
        db.write_bytes(b"not a database\n" * 100 if damage == "garbage" else b"")
    before = db.read_bytes()
    replace_in(repo, KERNEL, "    out[i] = out[i] * 2;\n", "    out[i] = out[i] * 3;\n")
    if damage == "empty":
        assert build_index(repo, Config(), db, jobs=1, quiet=True).mode == "linked"
        assert _snapshot(db)["functions"]
    else:
        with pytest.raises(PerfqError, match="refusing to replace"):
            build_index(repo, Config(), db, jobs=1, quiet=True)
        assert db.read_bytes() == before
    assert not [p for p in db.parent.iterdir() if p.name.endswith((".tmp", ".tmp.wal"))]


@pytest.mark.parametrize("damage", ["garbage", "stale"])
def test_a_packed_graph_that_cannot_be_patched_is_rebuilt_by_a_relink(repo: Path, tmp_path: Path, damage):
    """A new function patches the packed graph the index holds; one that is damaged, or lacks
    an edge the patch removes, makes the build re-link (and write a whole graph again)."""
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True)
    graph_file(db).unlink()  # the graph table is read
    con = duckdb.connect(str(db))
    if damage == "garbage":
        con.execute("UPDATE graph SET data = 'not json'::BLOB WHERE part = 'names'")
    else:  # an older graph: no edges at all
        write_graph(con, pack_graph(con.execute("SELECT id, kind, key, label FROM nodes").fetchall(), []))
    con.close()
    split = "    out[i] = out[i] * 2;\n    extra(i);\n  }\n}\nvoid extra(int i) {\n  {\n"  # edges removed and added
    replace_in(repo, KERNEL, "    out[i] = out[i] * 2;\n", split)
    assert build_index(repo, Config(), db, jobs=1, quiet=True).mode == "linked"
    full_db = tmp_path / "full.duckdb"
    build_index(repo, Config(), full_db, jobs=1, quiet=True, full=True)
    assert _snapshot(db)["graph"] == _snapshot(full_db)["graph"]


def test_a_changed_file_gone_before_the_patch_reads_it_is_a_relink_not_a_traceback(repo: Path, tmp_path: Path,
                                                                                    monkeypatch):
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True)
    replace_in(repo, KERNEL, "    out[i] = out[i] * 2;\n", "    out[i] = out[i] * 3;\n")
    from common import files

    read_limited = files.read_limited

    def vanished(root: str, rel: str, limit: int) -> bytes:  # removed between the listing and the patch's read
        if Path(rel).name == Path(KERNEL).name:
            raise FileNotFoundError(2, "No such file or directory", f"{root}/{rel}")
        return read_limited(root, rel, limit)

    monkeypatch.setattr(files, "read_limited", vanished)
    report = build_index(repo, Config(), db, jobs=1, quiet=True)
    assert report.mode == "linked"
    assert [p for p, _ in report.skipped] == [KERNEL]  # the re-link records the file it cannot read


def test_a_second_writer_is_refused(repo: Path, tmp_path: Path):
    db = tmp_path / "index.duckdb"
    with build_lock(db), pytest.raises(PerfqError, match=r"another perfq index \(pid \d+\) is writing"):
        build_index(repo, Config(), db, jobs=1, quiet=True)


def test_binary_and_non_utf8_files_are_recorded_not_fatal(repo: Path, tmp_path: Path):
    (repo / "aten/src/ATen/native/blob.h").write_bytes(b"\x00\x01\x02binary")
    (repo / "aten/src/ATen/native/latin1.cpp").write_bytes(b"// caf\xe9\nnamespace at::native { void latin() {} }\n")
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True)
    con = duckdb.connect(str(db), read_only=True)
    status = dict(
        con.execute("SELECT path, status FROM files WHERE path LIKE '%blob.h' OR path LIKE '%latin1.cpp'").fetchall()
    )
    assert status == {"aten/src/ATen/native/blob.h": "skipped", "aten/src/ATen/native/latin1.cpp": "ok"}
    assert con.execute("SELECT count(*) FROM functions WHERE name = 'latin'").fetchone()[0] == 1
    con.close()


def test_cli_errors_for_bad_trees(tmp_path: Path):
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = perfq(empty, "index", "-q")
    assert proc.returncode == EXIT_ERROR and "native_functions.yaml not found" in proc.stderr
    assert proc.stderr.strip().count("\n") == 0
    repo = make_repo(tmp_path / "bad")
    (repo / "aten/src/ATen/native/native_functions.yaml").write_text("- func: [unclosed\n")
    proc = perfq(repo, "index", "-q")
    assert proc.returncode == EXIT_ERROR and "malformed YAML" in proc.stderr
    assert not (repo / ".git/perfq/index.duckdb").exists()


def test_non_git_tree_keeps_its_index_in_dot_perfq(tmp_path: Path):
    from tests.aten_fixture import write_tree

    tree = write_tree(tmp_path / "plain")
    proc = perfq(tree, "index", "-q")
    assert proc.returncode == 0, proc.stderr
    assert (tree / ".perfq/index.duckdb").exists()


def test_ctrl_c_is_one_line_and_exit_130(repo: Path, monkeypatch, capsys):
    import sys

    from perfq import cli

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(build_module, "build_index", interrupted)
    monkeypatch.setattr(sys, "argv", ["perfq", "index", "--repo", str(repo), "-q"])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    assert exit_info.value.code == 130
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: interrupted") and "\n" not in err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_inside_a_duckdb_query_is_one_line_and_exit_130(repo: Path, monkeypatch, capsys, sig):
    """DuckDB turns the KeyboardInterrupt raised in a query into RuntimeError('Query interrupted');
    the user still sees the interruption, not a traceback."""
    from perfq import cli

    def a_long_query(*args, **kwargs):
        threading.Timer(0.3, os.kill, (os.getpid(), sig)).start()  # DuckDB sees it by the query's end
        duckdb.connect().execute("SELECT count(*) FROM range(400000000) t(x) WHERE x % 7 = 3").fetchall()
        raise AssertionError("the query was not interrupted")

    monkeypatch.setattr(build_module, "discover", a_long_query)
    monkeypatch.setattr(sys, "argv", ["perfq", "index", "--repo", str(repo), "-q"])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    assert exit_info.value.code == 130
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: interrupted") and "\n" not in err


def test_a_build_in_a_ci_log_says_each_phase_as_it_starts(repo: Path):
    """Outside a terminal (a CI log) the build names each phase when it begins, so the C++ link
    (while the others are parsed), link and write are never a silent stretch."""
    proc = perfq(repo, "index", "--no-trace", env={"CI": "true"})
    assert proc.returncode == 0, proc.stderr
    phases = [line.split(":")[0] for line in proc.stderr.splitlines() if line.startswith("[perfq] ")]
    assert phases == ["[perfq] extract", "[perfq] link-cpp", "[perfq] link", "[perfq] write"], proc.stderr


def test_patched_graph_is_the_graph_packed_from_the_patched_tables(repo: Path, tmp_path: Path):
    """A patch patches the packed graph it had; it writes the bytes a full link's packing of
    the same nodes and edges writes."""
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True)
    replace_in(repo, KERNEL, "}  // namespace\n", "void extra_helper() { helper(1); }\n}  // namespace\n")
    assert build_index(repo, Config(), db, jobs=1, quiet=True).mode == "patched"
    stored, packed = _stored_and_packed(db)
    assert stored == packed and set(stored) == set(PARTS)


def test_a_patch_after_a_patch_whose_graph_file_is_gone_packs_the_old_graph_from_the_tables(repo: Path, tmp_path: Path):
    """After a patch only the file holds the packed graph; without it the next patch starts from
    the graph packed from the tables, and still writes the packing of its own tables."""
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True)
    replace_in(repo, KERNEL, "}  // namespace\n", "void extra_helper() { helper(1); }\n}  // namespace\n")
    assert build_index(repo, Config(), db, jobs=1, quiet=True).mode == "patched"
    graph_file(db).unlink()
    replace_in(repo, KERNEL, "}  // namespace\n", "void more_help() { extra_helper(); }\n}  // namespace\n")
    assert build_index(repo, Config(), db, jobs=1, quiet=True).mode == "patched"
    stored, packed = _stored_and_packed(db)
    assert stored == packed


def _stored_and_packed(db: Path) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """The packed graph the index's file holds, and the one packed from its tables."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        token = con.execute("SELECT value FROM meta WHERE key = 'graph_token'").fetchone()[0]
        stored = {part: bytes(data) for part, data in read_graph_file(db, token).items()}
        packed = IndexStore(con).packed_from_tables()
    finally:
        con.close()
    return stored, packed


_END = "}  // namespace at::native\n"
_ANCHORS = {  # where new functions go: before these texts
    SOFTMAX_OP: ["namespace at::native {\n", "static int make_size(", "Tensor lonely_kernel(", _END],
    KERNEL: ["namespace {\n", "void softmax_op_kernel_impl(", "REGISTER_DISPATCH(", _END],
}
_NAMES = ["gen_a", "gen_b", "make_size", "lonely_kernel", "helper", "softmax_op_kernel_impl"]
_new_function = st.tuples(
    st.sampled_from(sorted(_ANCHORS)),
    st.integers(0, 3),  # anchor
    st.sampled_from(_NAMES),
    st.booleans(),  # in a namespace of its own
    st.lists(st.sampled_from([*_NAMES, "at::softmax_op"]), max_size=2),  # what it calls
)


# backward formulas naming the fuzz's functions: in the scopes the generated code sees (global,
# torch::autograd::generated::details) and qualified into ATen (indexer/rules/formulas.py)
_DERIVATIVES = """\
- name: fancy(Tensor self) -> Tensor
  self: gen_a(grad) + helper(grad) + at::native::make_size(grad)

- name: lonely(Tensor self) -> Tensor
  self: at::native::gen_b(grad) + softmax_op_kernel_impl(grad)
"""


@pytest.fixture(scope="module")
def indexed_base(tmp_path_factory) -> tuple[Path, Path]:
    """The fixture repository indexed, and a pristine copy of both (the index names the yaml by
    its absolute path: a repository elsewhere would be linked again, not patched); with a
    derivatives.yaml whose formulas call names the fuzz adds functions of."""
    base = tmp_path_factory.mktemp("patch-fuzz")
    repo, db = make_repo(base / "work" / "repo"), base / "work" / "index.duckdb"
    (repo / "tools/autograd").mkdir(parents=True, exist_ok=True)
    (repo / "tools/autograd/derivatives.yaml").write_text(_DERIVATIVES)
    commit_all(repo)
    build_index(repo, Config(), db, jobs=1, quiet=True)
    shutil.copytree(base / "work", base / "pristine")
    return base / "work", base / "pristine"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(added=st.lists(_new_function, min_size=1, max_size=3), remove=st.booleans())
def test_any_structural_patch_equals_a_full_link(indexed_base, added, remove):
    """New functions of any name (the file's own, another file's, new ones), in any place and
    namespace, calling anything, and a function removed: the patch gives the tables a full link
    gives, and the packed graph of its tables."""
    work, pristine = indexed_base
    shutil.rmtree(work)
    shutil.copytree(pristine, work)
    repo, db = work / "repo", work / "index.duckdb"
    for n, (path, anchor, name, namespaced, calls) in enumerate(added):
        body = " ".join(f"{callee}({n});" for callee in calls)
        text = f"void {name}(int x{n}) {{ {body} }}\n"
        if namespaced:
            text = f"namespace other{n} {{\n{text}}}\n"
        replace_in(repo, path, _ANCHORS[path][anchor], text + _ANCHORS[path][anchor])
    if remove:
        replace_in(repo, SOFTMAX_OP, "Tensor composite_thing(const Tensor& self) {\n  return self;\n}\n", "")
    assert build_index(repo, Config(), db, jobs=1, quiet=True).mode == "patched"
    with tempfile.TemporaryDirectory() as scratch:
        full_db = Path(scratch) / "full.duckdb"
        build_index(repo, Config(), full_db, jobs=1, quiet=True, full=True)
        assert _keyed(db) == _keyed(full_db)
    stored, packed = _stored_and_packed(db)
    assert stored == packed


@pytest.mark.parametrize("fault", [KeyboardInterrupt, OSError])
def test_a_build_stopped_while_its_copy_is_made_leaves_the_index_and_no_scratch_copy(
    repo: Path, tmp_path: Path, monkeypatch, fault
):
    """A patch starts copying the index before it finds and hashes the files: Ctrl-C or an error
    then still leaves the index as it was, and removes the copy nobody took."""
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True)
    before = _snapshot(db)
    replace_in(repo, KERNEL, "    out[i] = out[i] * 2;\n", "    out[i] = out[i] * 3;\n")

    def stopped(*args, **kwargs):
        raise fault()

    monkeypatch.setattr(build_module, "discover", stopped)
    with pytest.raises(fault):
        build_index(repo, Config(), db, jobs=1, quiet=True)
    assert _snapshot(db) == before
    assert not [p for p in db.parent.iterdir() if p.name.endswith((".tmp", ".tmp.wal"))]
    monkeypatch.undo()
    assert build_index(repo, Config(), db, jobs=1, quiet=True).mode == "patched"


def test_an_index_that_cannot_be_copied_is_rebuilt(repo: Path, tmp_path: Path, monkeypatch):
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True)
    replace_in(repo, KERNEL, "    out[i] = out[i] * 2;\n", "    out[i] = out[i] * 3;\n")

    def unreadable(src, dst, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(src))

    monkeypatch.setattr(writer.shutil, "copyfile", unreadable)
    assert build_index(repo, Config(), db, jobs=1, quiet=True).mode == "linked"
    assert not [p for p in db.parent.iterdir() if p.name.endswith((".tmp", ".tmp.wal"))]
