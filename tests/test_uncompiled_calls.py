"""Build configuration (issue 40 item 1) at the link: a call site on a line the target build is
known not to compile (an ``#if defined(__aarch64__)`` branch on x86-64) calls nothing; one whose
condition the build does not decide keeps its call. The facts cache keeps each file's directives,
so the same facts serve other macros, and an in-place patch links what a full link links."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from common.config import Config
from indexer.build import build_index
from indexer.build_config import machine_macros
from indexer.extract import file_facts
from indexer.rules.calls import compiled_calls
from tests.aten_fixture import FILES, make_repo, replace_in, write_tree

GEMM = "aten/src/ATen/native/Gemm.cpp"
GEMM_TEXT = """\
namespace at::native {
void gemm_heuristic(int n) {}

void arm_only_caller(int n) {
#if defined(__aarch64__) && AT_MKLDNN_ACL_ENABLED()
  gemm_heuristic(n);
#endif
}

void vendor_caller(int n) {
#if SOME_VENDOR_FLAG
  gemm_heuristic(n);
#endif
}

void plain_caller(int n) {
  gemm_heuristic(n + 1);
}

void gemm_arm_kernel(const Tensor& out, const Tensor& self, int64_t dim) {}
void gemm_vendor_kernel(const Tensor& out, const Tensor& self, int64_t dim) {}
#if defined(__aarch64__)
REGISTER_DISPATCH(softmax_op_stub, &gemm_arm_kernel);
#elif SOME_VENDOR_FLAG
REGISTER_DISPATCH(softmax_op_stub, &gemm_vendor_kernel);
#endif
}  // namespace at::native
"""
X86 = Config().with_overrides({"build": {"undefined": ["__aarch64__"], "torch": False}})
ARM = Config().with_overrides({"build": {"defines": {"__aarch64__": 1, "AT_MKLDNN_ACL_ENABLED()": 1},
                                         "torch": False}})


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = make_repo(tmp_path / "repo")
    write_tree(root, {GEMM: GEMM_TEXT})
    return root


def _callers_of(db: Path, callee: str) -> set[str]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(
            "SELECT a.qualname FROM call_edges e JOIN functions a ON a.id = e.caller_id "
            "JOIN functions b ON b.id = e.callee_id WHERE b.qualname = ?", [callee]
        ).fetchall()
    finally:
        con.close()
    return {qualname for (qualname,) in rows}


def _registered(db: Path) -> set[str]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {impl for (impl,) in con.execute("SELECT impl_name FROM stub_impls").fetchall()}
    finally:
        con.close()


def _warnings(db: Path) -> list[str]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [m for (m,) in con.execute("SELECT message FROM warnings WHERE file = ?", [GEMM]).fetchall()]
    finally:
        con.close()


def test_a_call_in_a_branch_the_build_leaves_out_links_nothing(repo: Path, tmp_path: Path):
    db = tmp_path / "index.duckdb"
    build_index(repo, X86, db, jobs=1, quiet=True, trace=False)
    callers = _callers_of(db, "at::native::gemm_heuristic")
    # the aarch64 branch is not compiled; SOME_VENDOR_FLAG is not known: its call stays
    assert callers == {"at::native::vendor_caller", "at::native::plain_caller"}
    (warning,) = _warnings(db)
    assert "1 call site(s) on lines the target build does not compile" in warning
    assert "lines 6-6 (#if defined(__aarch64__) && AT_MKLDNN_ACL_ENABLED())" in warning
    # a registration in a left-out branch registers nothing; a build-conditional one stays
    assert "gemm_arm_kernel" not in _registered(db) and "gemm_vendor_kernel" in _registered(db)


def test_other_macros_relink_the_cached_facts_with_the_other_branches(repo: Path, tmp_path: Path):
    db = tmp_path / "index.duckdb"
    build_index(repo, X86, db, jobs=1, quiet=True, trace=False)
    report = build_index(repo, ARM, db, jobs=1, quiet=True, trace=False)
    assert (report.mode, report.reparsed) == ("linked", 0)  # the facts cache serves any macros
    assert "at::native::arm_only_caller" in _callers_of(db, "at::native::gemm_heuristic")
    assert "gemm_arm_kernel" in _registered(db)


def test_a_call_moved_into_a_left_out_branch_is_patched_as_a_full_link_links_it(repo: Path, tmp_path: Path):
    db = tmp_path / "index.duckdb"
    build_index(repo, X86, db, jobs=1, quiet=True, trace=False)
    replace_in(repo, GEMM, "  gemm_heuristic(n + 1);\n", "#ifdef __aarch64__\n  gemm_heuristic(n + 1);\n#endif\n")
    report = build_index(repo, X86, db, jobs=1, quiet=True, trace=False)
    assert (report.mode, report.reparsed) == ("patched", 1)
    full_db = tmp_path / "full.duckdb"
    build_index(repo, X86, full_db, jobs=1, quiet=True, trace=False, full=True)
    assert _callers_of(db, "at::native::gemm_heuristic") == {"at::native::vendor_caller"}
    assert _callers_of(full_db, "at::native::gemm_heuristic") == {"at::native::vendor_caller"}


def test_compiled_calls_keep_files_without_conditions_and_unknown_builds():
    facts = file_facts("cpp", GEMM, GEMM_TEXT.encode(), sha="x")
    x86 = machine_macros("x86_64", "linux")
    kept, dropped = compiled_calls(facts, x86)
    assert [c.line for c, _ in dropped] == [6] and len(kept) == len(facts.calls) - 1
    assert compiled_calls(facts, None) == (facts.calls, [])  # no build known: every call kept
    plain = file_facts("cpp", "a.cpp", FILES["aten/src/ATen/native/SoftmaxOp.cpp"].encode(), sha="y")
    assert "directives" not in plain.constructs  # no condition: nothing cached, nothing evaluated
