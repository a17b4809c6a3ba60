"""The upward walk over the packed graph, on graphs a real index can hold but the fixtures
do not: edge kinds are codes of the index's own vocabulary, which may lack any of them."""

from __future__ import annotations

import duckdb

from query.reach import walk_up
from schema.index_store import IndexStore
from schema.model import EdgeKind, NodeKind
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
    nodes = [(0, NodeKind.FUNCTION, "0", "leaf"), (1, NodeKind.FUNCTION, "1", "mid"),
             (2, NodeKind.PYFUNCTION, "2", "top"), (3, NodeKind.BENCHMARK, "bench_top", "bench_top")]
    edges = [(0, 1, EdgeKind.CALL, "mid.cpp:3"), (1, 2, EdgeKind.CALL, "top.py:7"), (2, 3, EdgeKind.BENCH_CALL, "top")]
    r = walk_up(_store(nodes, edges), {0: ""}, max_depth=10, hub_fanout=1, backends={})
    assert r.depth == {0: 0, 1: 1, 2: 2, 3: 3}
    assert r.edges == [(0, 1), (1, 2), (2, 3)]
    assert r.into_benchmark == {3: {"top"}} and r.key[3] == "bench_top" and r.kind[2] == "pyfunction"
    assert r.chain(3) == [(0, None, ""), (1, EdgeKind.CALL, "mid.cpp:3"), (2, EdgeKind.CALL, "top.py:7"),
                          (3, EdgeKind.BENCH_CALL, "top")]


def test_an_upstream_composite_edge_is_a_composite_step_not_taken_where_the_op_has_its_own_kernel():
    """``item`` seen running ``_local_scalar_dense`` (an installed torch's composite): a change to
    the latter reaches ``item`` in one composite step (none allowed: not at all), and a walk on a
    device where ``item`` has a kernel of its own does not take the edge."""
    nodes = [(0, NodeKind.FUNCTION, "0", "_local_scalar_dense_xpu"), (1, NodeKind.OP, "_local_scalar_dense", "lsd"),
             (2, NodeKind.OP, "item", "item")]
    edges = [(0, 1, EdgeKind.KERNEL, "XPU"), (1, 2, EdgeKind.UPSTREAM_COMPOSITE, "inside aten::item")]
    store = _store(nodes, edges)
    one = walk_up(store, {0: "xpu"}, max_depth=10, composite_hops=1, backends={})
    assert set(one.key.values()) == {"0", "_local_scalar_dense", "item"}
    assert one.chain(2)[-1] == (2, EdgeKind.UPSTREAM_COMPOSITE, "inside aten::item")
    assert "item" not in walk_up(store, {0: "xpu"}, max_depth=10, composite_hops=0, backends={}).key.values()
    own = walk_up(store, {0: "xpu"}, max_depth=10, composite_hops=1, backends={"item": {"xpu"}})
    assert "item" not in own.key.values()
