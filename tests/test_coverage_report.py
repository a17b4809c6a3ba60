"""perfq coverage: facts from a fixture index -> grouped, ranked report and summary."""

from __future__ import annotations

import duckdb
import pytest

from perfq.coverage.facts import load_facts
from perfq.coverage.report import (
    CoverageFacts,
    Link,
    LinkSource,
    Overload,
    Ratio,
    StaleBenchmark,
    build_report,
    functions_touched,
    ops_reached,
)
from schema.index_store import IndexStore
from tests.coverage_fixture_db import build_index


@pytest.fixture()
def facts(tmp_path):
    con = duckdb.connect(str(build_index(tmp_path / "index.duckdb")), read_only=True)
    try:
        yield load_facts(con)
    finally:
        con.close()


def test_load_facts_reads_ops_keys_kernels_and_links(facts):
    assert set(facts.ops) == {
        "add.Tensor",
        "add.Scalar",
        "softmax.int",
        "lerp.Scalar",
        "lerp.Tensor",
        "relu",
        "addcmul",
    }
    assert facts.ops["add.Tensor"].dispatch_keys == ("CPU", "CUDA")
    assert facts.ops["add.Scalar"].dispatch_keys == ("CompositeExplicitAutograd",)
    assert facts.ops["softmax.int"].kernel_functions == (3, 4)
    assert facts.function_lines[3] == 56 and facts.function_lines[4] == 100
    assert facts.function_paths[4] == "aten/src/ATen/native/cuda/SoftMax.cu"
    assert facts.bench_ops["add_test"] == {"add.Tensor"}


def test_groups_by_base_with_overloads_and_benchmarks(facts):
    report = build_report(facts, None)
    rows = {r.op: r for r in report.rows}
    assert set(rows) == {"add", "softmax", "lerp", "relu", "addcmul"}
    assert rows["add"].overloads == ("add.Scalar", "add.Tensor")
    assert rows["add"].benchmarks == ("add_test",)  # the group is covered through add.Tensor
    assert rows["add"].links == (Link("add_test", "add.Tensor", LinkSource.traced),)
    assert rows["softmax"].links == (Link("softmax_test", "softmax.int", LinkSource.static),)
    assert rows["lerp"].benchmarks == () and not rows["lerp"].covered
    assert rows["softmax"].kernel_lines == 156
    assert rows["lerp"].kernel_lines == 20 + 11
    assert rows["softmax"].areas == ("aten/src/ATen/native/cpu", "aten/src/ATen/native/cuda")
    assert rows["addcmul"].areas == ("(no kernel found)",)
    assert all(r.churn is None for r in report.rows)


def test_without_history_ranks_by_kernel_size_then_keys(facts):
    report = build_report(facts, None)
    assert [r.op for r in report.rows] == ["softmax", "lerp", "add", "relu", "addcmul"]
    assert report.summary.ranking == "kernel_lines, dispatch_keys"


def test_churn_ranks_first_and_unions_commits_over_overloads(facts):
    op_commits = {"lerp.Scalar": {"a", "b"}, "lerp.Tensor": {"b", "c"}, "add.Tensor": {"a"}}
    report = build_report(facts, op_commits)
    assert [(r.op, r.churn) for r in report.rows[:3]] == [("lerp", 3), ("add", 1), ("softmax", 0)]


def test_summary_by_key_area_and_stale_benchmarks(facts):
    s = build_report(facts, None).summary
    assert (s.ops_total, s.ops_covered) == (5, 2)
    assert (s.overloads_total, s.overloads_covered) == (7, 2)
    assert s.by_dispatch_key["CPU"] == Ratio(3, 2, round(2 / 3, 4))
    assert s.by_dispatch_key["CompositeImplicitAutograd"].covered == 0
    assert s.by_area["aten/src/ATen/native"] == Ratio(2, 1, 0.5)
    assert s.unlinked_benchmarks == ("module_test",) and s.benchmarks == 4
    assert s.stale_benchmarks == (
        StaleBenchmark("old_test", "benchmarks/operator_benchmark/pt/old_test.py", ("gone_op.default",)),
    )


def test_dispatch_filter_top_and_uncovered(facts):
    report = build_report(facts, None, dispatch=["CUDA"])
    assert {r.op for r in report.rows} == {"add", "softmax", "lerp"}
    # only overloads with the key are kept
    assert next(r for r in report.rows if r.op == "lerp").overloads == ("lerp.Scalar",)
    assert report.summary.ops_total == 3
    top = build_report(facts, None, top=2)
    assert len(top.rows) == 2 and top.summary.ops_total == 5 and len(top.ranked) == 5
    unc = build_report(facts, None, uncovered_only=True)
    assert [r.op for r in unc.rows] == ["lerp", "relu", "addcmul"]


def test_functions_touched_maps_ranges_to_extents_including_nested():
    extents = {"a.cpp": [(1, 50, 1), (10, 20, 2), (30, 40, 3), (60, 70, 4)]}
    changes = [
        ("c1", "a.cpp", [(15, 15)]),
        ("c2", "a.cpp", [(45, 62)]),
        ("c3", "b.cpp", [(1, 9)]),
        ("c4", "a.cpp", [(51, 55)]),
    ]
    assert functions_touched(changes, extents) == {"c1": {1, 2}, "c2": {1, 4}}


def test_ops_reached_walks_upward_through_cycles(tmp_path):
    edges = [(1, 2), (2, 3), (3, 2), (3, 10), (4, 11), (10, 12)]
    op_of_node = {10: "a", 11: "b", 12: "c"}
    got = ops_reached(edges, op_of_node, {"x": [1], "y": [4], "z": [99], "w": [12]})
    assert got.ops == {"x": {"a", "c"}, "y": {"b"}, "z": set(), "w": {"c"}}
    assert got.infrastructure == {}
    shallow = ops_reached(edges, op_of_node, {"x": [1]}, max_depth=3)
    assert shallow.ops == {"x": {"a"}}  # 1 -> 2 -> 3 -> 10 (a); c is 4 edges away


def test_ops_reached_marks_shared_infrastructure():
    # node 1 reaches ops a, b, c; node 5 reaches only d
    edges = [(1, 10), (1, 11), (1, 12), (5, 13)]
    op_of_node = {10: "a", 11: "b", 12: "c", 13: "d"}
    got = ops_reached(edges, op_of_node, {"k": [1, 5]}, reach_bound=2)
    assert got.ops == {"k": {"d"}} and got.infrastructure == {"k": {1}}


def test_ops_reached_on_fixture_graph(tmp_path):
    con = duckdb.connect(str(build_index(tmp_path / "i.duckdb")), read_only=True)
    edges, op_nodes, fn_nodes = IndexStore(con).reach_graph()
    con.close()
    assert fn_nodes[2] == 2
    got = ops_reached(edges, op_nodes, {"c": [fn_nodes[2]]})
    assert got.ops["c"] == {"add.Tensor", "add.Scalar", "lerp.Scalar"}


def test_empty_index_gives_empty_report():
    report = build_report(CoverageFacts(), None)
    assert report.rows == () and report.summary.ops_total == 0 and report.summary.ops_ratio == 0.0


def test_op_without_kernels_or_keys_counts_under_none_key():
    facts = CoverageFacts(ops={"x": Overload("x", "x")})
    s = build_report(facts, None).summary
    assert s.by_dispatch_key == {"(none)": Ratio(1, 0, 0.0)}


def _naive_reach(edges, op_of_node, start, max_depth, bound):
    adj = {}
    for d, s in edges:
        adj.setdefault(d, []).append(s)
    depth_of = {start: 0}
    frontier = [start]
    while frontier:
        nxt = []
        for n in frontier:
            if depth_of[n] >= max_depth:
                continue
            for m in adj.get(n, ()):
                if m not in depth_of:
                    depth_of[m] = depth_of[n] + 1
                    nxt.append(m)
        frontier = nxt
    ops = {op_of_node[n] for n in depth_of if n in op_of_node}
    return None if len(ops) > bound else ops


@pytest.mark.parametrize("seed", range(5))
def test_ops_reached_infrastructure_shortcut_is_exact(seed):
    import random

    rng = random.Random(seed)
    nodes = list(range(300))
    edges = [(rng.choice(nodes), rng.choice(nodes)) for _ in range(700)]
    op_of_node = {n: f"op{n}" for n in rng.sample(nodes, 120)}
    starts = {f"c{i}": rng.sample(nodes, 3) for i in range(60)}
    got = ops_reached(edges, op_of_node, starts, max_depth=6, reach_bound=15)
    for key, nodes_ in starts.items():
        expected_ops, expected_infra = set(), set()
        for n in nodes_:
            r = _naive_reach(edges, op_of_node, n, 6, 15)
            if r is None:
                expected_infra.add(n)
            else:
                expected_ops |= r
        assert got.ops[key] == expected_ops
        assert got.infrastructure.get(key, set()) == expected_infra


def test_the_churn_period_reads_as_words():
    from perfq.coverage.render import period

    assert period("180.days") == "in the last 180 days"
    assert period("1.week") == "in the last week"
    assert period("3.years.ago") == "in the last 3 years"
    assert period("2024-01-01") == "since 2024-01-01"
