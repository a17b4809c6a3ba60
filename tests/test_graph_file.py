"""The packed graph's copy beside the index: written with every graph, read only when it is
the graph the index names, and never able to change an answer."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import duckdb
import pytest

from common.config import Config
from indexer.build import build_index
from schema.graph_file import graph_file, graph_token, read_graph_file
from schema.index_store import IndexStore
from tests.aten_fixture import commit_all, git, make_repo, perfq, replace_in

KERNEL = "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp"


def _table(db: Path) -> tuple[dict[str, bytes], str]:
    """The graph table's parts and the token the index names its graph by."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        parts = dict(con.execute("SELECT part, data FROM graph").fetchall())
        token = con.execute("SELECT value FROM meta WHERE key = 'graph_token'").fetchone()[0]
    finally:
        con.close()
    return parts, token


def _packed_from_tables(db: Path) -> dict[str, bytes]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return IndexStore(con).packed_from_tables()
    finally:
        con.close()


def _file_holds_the_graph(db: Path) -> bool:
    """The file holds the graph of the index's tables, under the token its meta names."""
    _, token = _table(db)
    mapped, packed = read_graph_file(db, token), _packed_from_tables(db)
    return (
        mapped is not None
        and token == graph_token(list(packed.items()))
        and {part: bytes(view) for part, view in mapped.items()} == packed
    )


def test_full_and_incremental_builds_write_the_graph_the_index_holds(tmp_path: Path):
    """A full link stores the graph in the table and the file; a patch that changes it, in
    the file only (its table emptied: writing 5 MB of blobs costs a patch ~60 ms)."""
    repo = make_repo(tmp_path / "repo")
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True)
    assert _file_holds_the_graph(db) and _table(db)[0] == _packed_from_tables(db)
    first_token = _table(db)[1]
    replace_in(repo, KERNEL, "}  // namespace\n", "void extra_helper() { helper(1); }\n}  // namespace\n")
    assert build_index(repo, Config(), db, jobs=1, quiet=True).mode == "patched"
    assert _table(db)[1] != first_token  # a new function: the graph was patched
    assert _file_holds_the_graph(db) and _table(db)[0] == {}


def test_a_store_reads_the_file_only_when_it_holds_the_indexed_graph(tmp_path: Path):
    repo = make_repo(tmp_path / "repo")
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True)
    old_file = tmp_path / "old.graph"
    shutil.copyfile(graph_file(db), old_file)
    replace_in(repo, KERNEL, "}  // namespace\n", "void extra_helper() { helper(1); }\n}  // namespace\n")
    build_index(repo, Config(), db, jobs=1, quiet=True)
    parts = _packed_from_tables(db)

    def read() -> tuple[type, list[int]]:
        con = duckdb.connect(str(db), read_only=True)
        try:
            g = IndexStore(con, db).graph()
            return type(g.src), list(g.src)
        finally:
            con.close()

    assert read()[0] is memoryview  # the file, mapped
    shutil.copyfile(old_file, graph_file(db))  # the previous build's graph: stale
    kind, src = read()
    assert kind is not memoryview  # packed from the tables (a patch left the graph table empty)
    assert src == list(memoryview(parts["src"]).cast("i"))


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda data: data[: len(data) // 2], id="cut-short"),
        pytest.param(lambda data: b"", id="empty"),
        pytest.param(lambda data: b"\0" * len(data), id="zeroed"),
        pytest.param(lambda data: data.replace(b'"token"', b'"tokem"', 1), id="no-token"),
        pytest.param(lambda data: data[:20] + b"{not json" + data[29:], id="bad-header"),
        pytest.param(lambda data: _after_header(data, os.urandom), id="random-parts"),  # header whole
        pytest.param(lambda data: _after_header(data, lambda n: b"\xff" * n), id="0xff-parts"),
    ],
)
def test_a_damaged_or_missing_file_never_changes_the_answer(tmp_path: Path, damage):
    repo = make_repo(tmp_path / "repo")
    assert perfq(repo, "index", "-q").returncode == 0
    git(repo, "checkout", "-q", "-b", "work")
    replace_in(repo, KERNEL, "out[i] * 2", "out[i] * 3")
    commit_all(repo)
    expected = _answer(repo, "main")
    assert expected["benchmarks"]
    path = graph_file(repo / ".git/perfq/index.duckdb")
    data = path.read_bytes()
    path.write_bytes(damage(data))
    assert _answer(repo, "main") == expected
    path.unlink()
    assert _answer(repo, "main") == expected


def _after_header(data: bytes, fill) -> bytes:
    """``data`` with every byte after its header line replaced by ``fill(n)``."""
    end = data.index(b"\n", data.index(b"\n") + 1) + 1
    return data[:end] + fill(len(data) - end)


def _answer(repo: Path, base: str) -> dict:
    proc = perfq(repo, "affected", base, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_patched_index_without_its_file_gives_the_same_answer(tmp_path: Path):
    """After a patch only the file holds the packed graph: without it a query packs the graph
    from the tables again, and answers the same."""
    repo = make_repo(tmp_path / "repo")
    assert perfq(repo, "index", "-q").returncode == 0
    git(repo, "checkout", "-q", "-b", "work")
    replace_in(repo, KERNEL, "}  // namespace\n", "void extra_helper() { helper(1); }\n}  // namespace\n")
    commit_all(repo)
    proc = perfq(repo, "index", "--format", "json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["mode"] == "patched", proc.stderr
    replace_in(repo, KERNEL, "out[i] * 2", "out[i] * 3")
    commit_all(repo)
    expected = _answer(repo, "HEAD~1")
    assert expected["benchmarks"]
    graph_file(repo / ".git/perfq/index.duckdb").unlink()
    assert _answer(repo, "HEAD~1") == expected
