"""The preprocessor branches the index does not see (``#if 0``, the later branches of a group that
leaves braces unbalanced) are rows of ``unseen_branches``, per file, kept by an in-place patch as a
full link makes them."""

from __future__ import annotations

import duckdb

from common.config import Config
from indexer.build import build_index
from indexer.link import link
from tests.aten_fixture import make_repo, replace_in
from tests.cpp_facts import cpp_facts

KERNEL = "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp"
SOURCE = """
namespace at::native {
#if 0
int retired(int x) { return x - 1; }
#endif
#ifdef USE_FAST
struct Fast : Base {
#else
struct Fast {
#endif
  int run(int x) { return x; }
};
int live(int x) { return x + 1; }
}
"""


def test_unseen_branches_are_rows_of_their_file():
    facts = cpp_facts("aten/src/ATen/native/Fast.cpp", SOURCE)
    assert facts.constructs["unseen_branches"] == [(3, 3, "#if 0"), (8, 8, "#else")]
    assert "retired" not in {f.name for f in facts.functions} and "live" in {f.name for f in facts.functions}
    tables = link([cpp_facts("a.cpp", "int a() { return 0; }\n"), facts], [], [], [])
    assert tables.rows["unseen_branches"] == [(1, 3, 3, "#if 0"), (1, 8, 8, "#else")]


def _unseen(db) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT path, first_line, last_line, directive FROM unseen_branches"
                           " JOIN files ON files.id = file_id ORDER BY ALL").fetchall()
    finally:
        con.close()


def _line_of(repo, path: str, text: str) -> int:
    """The 1-based line of ``path`` in ``repo`` that is ``text``."""
    return (repo / path).read_text().splitlines().index(text) + 1


def test_a_patch_keeps_the_changed_files_unseen_branches_as_a_full_link_makes_them(tmp_path):
    repo, db = make_repo(tmp_path / "repo"), tmp_path / "index.duckdb"
    retired = "#if 0\nint old() { return 1; }\n#endif\n"
    replace_in(repo, KERNEL, "namespace at::native {\n", "namespace at::native {\n" + retired)
    build_index(repo, Config(), db, jobs=1, quiet=True, trace=False)
    first = _line_of(repo, KERNEL, "#if 0") + 1
    assert _unseen(db) == [(KERNEL, first, first, "#if 0")]
    replace_in(repo, KERNEL, retired,
               "#if false\nint old() { return 1; }\nint older() { return 2; }\n#endif\n")
    assert build_index(repo, Config(), db, jobs=1, quiet=True, trace=False).mode == "patched"
    assert _unseen(db) == [(KERNEL, first, first + 1, "#if false")]
    full = tmp_path / "full.duckdb"
    build_index(repo, Config(), full, jobs=1, quiet=True, full=True, trace=False)
    assert _unseen(full) == _unseen(db)
