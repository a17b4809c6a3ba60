"""The packed graph patched from a delta equals the graph packed from the patched tables."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from schema.packed_graph import GraphDelta, PackedGraph, StaleGraph, pack_graph, patch_packed

NODE_KINDS = ("benchmark", "function", "op", "stub")
EDGE_KINDS = ("call", "kernel", "op_call", "registered")


def _packed(nodes: list[tuple], edges: list[tuple]) -> PackedGraph:
    return PackedGraph(dict(pack_graph(nodes, edges)))


def _delta(old_nodes, old_edges, new_nodes, new_edges, removed, added, dropped, fresh) -> GraphDelta:
    return GraphDelta(
        removed,
        added,
        dropped,
        [(n[0], n[1], n[2]) for n in fresh],
        max((n[0] for n in new_nodes), default=-1) + 1,
        sorted({n[1] for n in new_nodes}),
        sorted({e[2] for e in new_edges}),
        sorted({e[3] for e in new_edges}),
    )


@st.composite
def patches(draw):
    """An old graph (nodes, unique (dst, src) edges) and a patch: functions dropped with every
    edge touching them, other edges removed, nodes and edges added (fresh ids may reuse the
    dropped ones at the end)."""
    n = draw(st.integers(1, 30))
    kinds = [draw(st.sampled_from(NODE_KINDS)) for _ in range(n)]
    nodes = [(i, k, f"{k}{i}", f"label{i}") for i, k in enumerate(kinds)]
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), unique=True, max_size=80))
    edge = st.tuples(st.sampled_from(EDGE_KINDS), st.sampled_from([f"line {i}" for i in range(12)]))
    edges = [(d, s, *draw(edge)) for d, s in pairs if d != s]
    dropped = sorted(draw(st.sets(st.sampled_from([i for i, k in enumerate(kinds) if k == "function"] or [0]))))
    dropped = [i for i in dropped if kinds[i] == "function"]
    gone = set(dropped)
    kept_nodes = [row for row in nodes if row[0] not in gone]
    top = max((row[0] for row in kept_nodes), default=-1) + 1
    fresh = [(top + i, k, f"{k}{top + i}", "new") for i, k in enumerate(draw(st.lists(st.sampled_from(NODE_KINDS),
                                                                                       max_size=5)))]
    new_nodes = kept_nodes + fresh
    removed = [e for e in edges if e[0] in gone or e[1] in gone or draw(st.booleans())]
    removed_set = set(removed)
    kept_edges = [e for e in edges if e not in removed_set]
    ids = [row[0] for row in new_nodes]
    taken = {(e[0], e[1]) for e in kept_edges}
    added = []
    if ids:
        for d, s in draw(st.lists(st.tuples(st.sampled_from(ids), st.sampled_from(ids)), unique=True, max_size=20)):
            if d != s and (d, s) not in taken:
                added.append((d, s, *draw(edge)))
    new_edges = kept_edges + added
    return nodes, edges, new_nodes, new_edges, removed, added, dropped, fresh


_F = [(i, "function", str(i), "f") for i in range(3)]


@settings(max_examples=300, deadline=None)
@given(patches())
@example(  # the last two nodes dropped, one with an edge into it: the graph ends sooner
    (_F, [(2, 0, "call", "line 1")], _F[:1], [], [(2, 0, "call", "line 1")], [], [1, 2], [])
)
def test_patched_graph_is_the_graph_of_the_patched_tables(patch):
    nodes, edges, new_nodes, new_edges, removed, added, dropped, fresh = patch
    delta = _delta(nodes, edges, new_nodes, new_edges, removed, added, dropped, fresh)
    assert patch_packed(_packed(nodes, edges), delta) == pack_graph(new_nodes, new_edges)


def test_an_edge_the_packed_graph_lacks_is_a_stale_graph():
    nodes = [(0, "function", "0", "f"), (1, "function", "1", "g")]
    old = _packed(nodes, [(0, 1, "call", "line 1")])
    delta = GraphDelta([(0, 1, "call", "line 2")], [], [], [], 2, ["function"], [], [])
    with pytest.raises(StaleGraph, match="no edge 0 <- 1"):
        patch_packed(old, delta)
