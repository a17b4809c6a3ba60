"""The upward walk over the packed graph, on graphs a real index can hold but the fixtures
do not: edge kinds are codes of the index's own vocabulary, which may lack any of them."""

from __future__ import annotations

import duckdb

from query.reach import walk_up
from schema.index_store import IndexStore
from schema.writer import index_ddl, insert_rows


def _store(nodes: list[tuple], edges: list[tuple]) -> IndexStore:
    """A store over an in-memory index holding only ``nodes`` and ``reach_edges`` (its graph
    packed from them)."""
    con = duckdb.connect()
    con.execute(index_ddl())
    insert_rows(con, "nodes", nodes)
    insert_rows(con, "reach_edges", edges)
    return IndexStore(con)


def test_a_graph_without_kernel_or_operator_edges_is_walked_by_its_calls():
    """A repository of plain functions and a benchmark (no native_functions.yaml: no kernel,
    op_call or registration edges) is walked along its calls up to the benchmark."""
    nodes = [(0, "function", "0", "leaf"), (1, "function", "1", "mid"), (2, "pyfunction", "2", "top"),
             (3, "benchmark", "bench_top", "bench_top")]
    edges = [(0, 1, "call", "mid.cpp:3"), (1, 2, "call", "top.py:7"), (2, 3, "bench_ref", "top")]
    r = walk_up(_store(nodes, edges), {0: ""}, max_depth=10, hub_fanout=1, backends={})
    assert r.depth == {0: 0, 1: 1, 2: 2, 3: 3}
    assert r.edges == [(0, 1), (1, 2), (2, 3)]
    assert r.into_benchmark == {3: {"top"}} and r.key[3] == "bench_top" and r.kind[2] == "pyfunction"
    assert r.chain(3) == [(0, "start", ""), (1, "call", "mid.cpp:3"), (2, "call", "top.py:7"), (3, "bench_ref", "top")]
