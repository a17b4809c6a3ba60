# ruff: noqa: E501  (IR fixture lines are as long as Triton prints them)
"""Pure tests of IR diff classification, op deltas, triage, reports and `changed_kernels`."""

from __future__ import annotations

from perfq.ir.diff import (
    ATTRIBUTES,
    IDENTICAL,
    STRUCTURAL,
    IRText,
    buckets,
    changed_kernels,
    classify,
    diff_collections,
    op_counts,
    op_delta,
    strip_attributes,
)
from perfq.ir.normalize import normalize_ir
from perfq.ir.report import to_json, to_markdown
from perfq.ir.store import IRRecord, store_collection
from schema.history import connect_history

TTIR = """\
#loc = loc("/src/k.py":3:1)
module {
  tt.func public @add_kernel(%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32} loc("x_ptr"(#loc)), %y_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32} loc("y_ptr"(#loc)), %n: i32 loc("n"(#loc))) attributes {noinline = false} {
    %offs = tt.make_range {end = 1024 : i32, start = 0 : i32} : tensor<1024xi32> loc(#loc1)
    %x = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>> loc(#loc2)
    %x_0 = tt.addptr %x, %offs : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32> loc(#loc2)
    %x_1 = tt.load %x_0 : tensor<1024x!tt.ptr<f32>> loc(#loc3)
    %s = arith.addf %x_1, %x_1 : tensor<1024xf32> loc(#loc4)
    tt.store %x_0, %s : tensor<1024x!tt.ptr<f32>> loc(#loc5)
    tt.return loc(#loc)
  } loc(#loc)
} loc(#loc)
"""
# one more load (a one-line kernel edit)
TTIR_EDIT = TTIR.replace(
    "    %s = arith.addf %x_1, %x_1",
    "    %y = tt.splat %y_ptr : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>> loc(#loc2)\n"
    "    %y_0 = tt.addptr %y, %offs : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32> loc(#loc2)\n"
    "    %y_1 = tt.load %y_0 : tensor<1024x!tt.ptr<f32>> loc(#loc3)\n"
    "    %s = arith.addf %x_1, %y_1",
)
# attribute-only change: y_ptr no longer 16-divisible
TTIR_ATTR = TTIR.replace(
    '%y_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32} loc', '%y_ptr: !tt.ptr<f32> loc'
)

TTGIR = """\
#blocked = #ttg.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
module attributes {"ttg.num-warps" = 4 : i32} {
  tt.func public @k(%a: tensor<1024xf32, #blocked>) {
    %0 = arith.addf %a, %a : tensor<1024xf32, #blocked>
    tt.return
  }
}
"""


def n(text: str, stage: str = "ttir") -> str:
    return normalize_ir(text, stage)


def test_classify_identical_attributes_structural():
    assert classify(n(TTIR), n(TTIR.replace("/src/", "/other/")), "ttir") == IDENTICAL
    assert classify(n(TTIR), n(TTIR_ATTR), "ttir") == ATTRIBUTES
    assert classify(n(TTIR), n(TTIR_EDIT), "ttir") == STRUCTURAL


def test_layout_and_module_attribute_changes_are_attributes_only():
    other_layout = TTGIR.replace("sizePerThread = [4]", "sizePerThread = [8]")
    more_warps = TTGIR.replace('"ttg.num-warps" = 4', '"ttg.num-warps" = 8')
    assert classify(n(TTGIR, "ttgir"), n(other_layout, "ttgir"), "ttgir") == ATTRIBUTES
    assert classify(n(TTGIR, "ttgir"), n(more_warps, "ttgir"), "ttgir") == ATTRIBUTES
    new_op = TTGIR.replace("arith.addf", "arith.mulf")
    assert classify(n(TTGIR, "ttgir"), n(new_op, "ttgir"), "ttgir") == STRUCTURAL


def test_strip_attributes_keeps_ops_and_operands():
    skeleton = strip_attributes(n(TTIR), "ttir")
    assert "tt.divisibility" not in skeleton and "noinline" not in skeleton
    assert "tt.load %v5 : tensor<1024x!tt.ptr<f32>>" in skeleton


def test_op_counts_and_delta():
    assert op_counts(n(TTIR), "ttir")["tt.load"] == 1
    assert op_delta(n(TTIR), n(TTIR_EDIT), "ttir") == {"tt.addptr": 1, "tt.load": 1, "tt.splat": 1}
    assert op_delta(n(TTIR_EDIT), n(TTIR), "ttir") == {"tt.addptr": -1, "tt.load": -1, "tt.splat": -1}
    llir = "define void @f(i32 %0) {\n  %2 = add i32 %0, 1\n  %3 = tail call i32 @llvm.nvvm.x()\n  ret void\n}\n"
    counts = op_counts(normalize_ir(llir, "llir"), "llir")
    assert counts == {"add": 1, "call @llvm.nvvm.x": 1, "ret": 1}


def _collection(**texts: str) -> dict:
    return {(kernel, "BLOCK=1024", "cuda:90", "ttir"): IRText(t, n(t)) for kernel, t in texts.items()}


def test_diff_collections_statuses_order_and_buckets():
    a = _collection(**{"m:same": TTIR, "m:edit": TTIR, "m:attr": TTIR, "m:gone": TTIR})
    b = _collection(**{"m:same": TTIR.replace("/src/", "/elsewhere/"), "m:edit": TTIR_EDIT,
                       "m:attr": TTIR_ATTR, "m:new": TTIR})
    diffs = diff_collections(a, b, "A", "B", with_raw=True)
    status = {d.kernel: d.status for d in diffs}
    assert status == {"m:same": "identical", "m:edit": "structural", "m:attr": "attributes-only",
                      "m:gone": "removed", "m:new": "added"}
    assert [d.kernel for d in diffs][0] == "m:edit" and diffs[-1].kernel == "m:same"  # changed first
    same = next(d for d in diffs if d.kernel == "m:same")
    assert not same.raw_identical and same.diff == "" and "/elsewhere/" in same.raw_diff
    edit = next(d for d in diffs if d.kernel == "m:edit")
    assert edit.op_delta == {"tt.addptr": 1, "tt.load": 1, "tt.splat": 1}
    assert "+    %v9 = tt.load %v8 : tensor<1024x!tt.ptr<f32>>" in edit.diff
    assert edit.bucket == "structural: +1 tt.addptr, +1 tt.load, +1 tt.splat"
    attr = next(d for d in diffs if d.kernel == "m:attr")
    assert attr.bucket == "attributes-only: signature" and attr.op_delta == {}
    assert [b for b, _ in buckets(diffs)][0].startswith("structural")


def test_json_shape_and_markdown_report():
    diffs = diff_collections(_collection(**{"m:k": TTIR, "m:z": TTIR}),
                             _collection(**{"m:k": TTIR_EDIT, "m:z": TTIR}), "base", "head")
    doc = to_json("base", "head", diffs)
    assert doc["a"] == "base" and doc["b"] == "head"
    first = doc["kernels"][0]
    assert {"kernel", "specialization", "target", "stage", "status", "op_delta"} <= set(first)
    assert first == {**first, "kernel": "m:k", "specialization": "BLOCK=1024", "target": "cuda:90",
                     "stage": "ttir", "status": "structural", "op_delta": {"tt.addptr": 1, "tt.load": 1,
                                                                           "tt.splat": 1}}
    md = to_markdown("base", "head", diffs)
    assert md.index("m:k") < md.index("1 identical IRs")  # changed kernels first, identical folded
    assert "<details><summary>m:k · cuda:90 · ttir · structural" in md and "```diff" in md
    assert "| structural: +1 tt.addptr, +1 tt.load, +1 tt.splat | 1 |" in md


def _records(kernels: dict[str, str]) -> list[IRRecord]:
    return [IRRecord(k, "BLOCK=1024", "cuda:90", "ttir", t, triton_version="x") for k, t in kernels.items()]


def test_changed_kernels_from_history(tmp_path):
    db = tmp_path / "history.duckdb"
    store_collection(db, "base", "manifest", _records({"m:a": TTIR, "m:b": TTIR, "m:c": TTIR}), "c1")
    store_collection(db, "head", "manifest",
                     _records({"m:a": TTIR.replace("/src/", "/x/"), "m:b": TTIR_EDIT, "m:c": TTIR_ATTR}), "c2")
    con = connect_history(db)
    try:
        assert changed_kernels(con, "base", "head") == {"m:b", "m:c"}
        assert changed_kernels(con, "base", "missing") == set()
        rows = con.execute("SELECT label, commit_sha, source_hash FROM ir_records ORDER BY label, kernel").fetchall()
        assert [r[:2] for r in rows] == [("base", "c1")] * 3 + [("head", "c2")] * 3
    finally:
        con.close()


def test_recollecting_a_label_replaces_only_the_same_keys(tmp_path):
    db = tmp_path / "history.duckdb"
    store_collection(db, "L", "manifest", _records({"m:a": TTIR, "m:b": TTIR}))
    store_collection(db, "L", "manifest", _records({"m:a": TTIR_EDIT}))
    con = connect_history(db)
    try:
        rows = dict(con.execute("SELECT kernel, raw_text FROM ir_records WHERE label='L'").fetchall())
        assert rows == {"m:a": TTIR_EDIT, "m:b": TTIR}
        assert con.execute("SELECT count(*) FROM ir_collections").fetchone()[0] == 2
    finally:
        con.close()


def test_markdown_leaves_out_diffs_past_the_comment_budget():
    diffs = diff_collections(_collection(**{"m:k": TTIR, "m:j": TTIR}),
                             _collection(**{"m:k": TTIR_EDIT, "m:j": TTIR_ATTR}), "base", "head")
    full = to_markdown("base", "head", diffs)
    assert full.count("```diff") == 2 and "left out" not in full
    short = to_markdown("base", "head", diffs, budget=len(full) - 200)
    assert short.count("```diff") == 1
    assert "_1 diffs left out to keep this comment short: run `perfq ir diff base head`" in short
