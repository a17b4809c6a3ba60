"""Shared infrastructure seen in execution (issue 40, held-out c02): the copy kernel's operators
are run by 25 of 56 traced benchmarks, under ``shared_fraction``, and no canary path names its
file; but the traces saw ``copy_`` run *inside other operators* (``to``, ``clone``, ``cat``,
``contiguous``...) in many benchmarks. An operator that many benchmarks run only inside other
operators is a building block of theirs: a change to it is shared infrastructure."""

from __future__ import annotations

import duckdb

from common.config import Config
from query.affected import _broad
from schema.index_store import IndexStore
from schema.writer import index_ddl

BENCHES = [f"b{i:02}_test" for i in range(40)]


def _store() -> IndexStore:
    con = duckdb.connect(":memory:")
    con.execute(index_ddl())
    ops = [("copy_", "copy_", "", "aten", "copy_(Tensor(a!) self, Tensor src) -> Tensor(a!)"),
           ("cat", "cat", "", "aten", "cat(Tensor[] tensors, int dim=0) -> Tensor"),
           ("relu", "relu", "", "aten", "relu(Tensor self) -> Tensor")]
    con.executemany("INSERT INTO ops VALUES (?, ?, ?, ?, ?, false, NULL, 'function', '', NULL)", ops)
    rows = [(b, "t", "aten", "copy_", "dense", "", True) for b in BENCHES[:12]]  # inside others' kernels
    rows += [(b, "t", "aten", "copy_", "dense", "", False) for b in BENCHES[12:14]]  # called itself
    rows += [(b, "t", "aten", "cat", "dense", "", False) for b in BENCHES[:3]]
    rows += [(b, "t", "aten", "relu", "dense", "a kernel calls it", True) for b in BENCHES[:20]]  # inferred
    con.executemany("INSERT INTO trace_ops VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    return IndexStore(con)


def test_operators_run_inside_other_operators_in_many_benchmarks_are_shared_infrastructure():
    store, cfg, traced = _store(), Config(), set(BENCHES)
    assert store.nested_benchmarks(["copy_"]) == set(BENCHES[:12])
    why = _broad(False, 1, set(BENCHES[:14]), store.nested_benchmarks(["copy_"]), traced, cfg)
    assert "inside other operators in 12 of the 40 traced benchmarks" in why


def test_an_operator_benchmarked_for_itself_or_inferred_is_not():
    store, cfg, traced = _store(), Config(), set(BENCHES)
    assert _broad(False, 1, set(BENCHES[:3]), store.nested_benchmarks(["cat"]), traced, cfg) == ""
    assert store.nested_benchmarks(["relu"]) == set()  # inferred, not seen: no evidence
    assert _broad(False, 1, set(), set(), traced, cfg) == ""


def test_only_nested_runs_on_the_layouts_the_change_runs_for_count():
    """23-case set, quantize-per-tensor-fbgemm: a quantizing kernel reaches ``copy_`` through its
    float-to-quantized branch only; the 12 benchmarks running ``copy_`` inside other operators on
    dense tensors never run that branch, so the change is not shared infrastructure."""
    store, cfg, traced = _store(), Config(), set(BENCHES)
    assert store.nested_benchmarks(["copy_"], {"copy_": {"quantized"}}) == set()
    assert store.nested_benchmarks(["copy_"], {"copy_": {"dense"}}) == set(BENCHES[:12])
    assert store.nested_benchmarks(["copy_"], {"copy_": {"any"}}) == set(BENCHES[:12])
    nested = store.nested_benchmarks(["copy_"], {"copy_": {"quantized"}})
    assert _broad(False, 1, set(BENCHES[:14]), nested, traced, cfg) == ""
