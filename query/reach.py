"""Walking the reachability graph upward from changed nodes (reads the index only)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import duckdb


@dataclass
class Reach:
    """What a set of start nodes reaches: parents for explanations, kinds and keys."""

    parent: dict[int, tuple[int, str, str]] = field(default_factory=dict)  # node -> (parent, edge kind, detail)
    depth: dict[int, int] = field(default_factory=dict)
    kind: dict[int, str] = field(default_factory=dict)
    key: dict[int, str] = field(default_factory=dict)
    label: dict[int, str] = field(default_factory=dict)
    edges: list[tuple[int, int]] = field(default_factory=list)  # (dst, src) explored
    truncated: bool = False

    def nodes_of(self, kind: str) -> list[int]:
        return [n for n, k in self.kind.items() if k == kind]

    def chain(self, node: int) -> list[tuple[int, str, str]]:
        """(node, edge kind that led to it, detail) from the start node to ``node``."""
        out = []
        seen = set()
        while node in self.parent and node not in seen:
            seen.add(node)
            parent, kind, detail = self.parent[node]
            out.append((node, kind, detail))
            node = parent
        out.append((node, "start", ""))
        return list(reversed(out))


def walk_up(con: duckdb.DuckDBPyConnection, starts: list[int], max_depth: int) -> Reach:
    """Breadth-first walk from ``starts`` along reach_edges (dst -> src), one SQL query
    per level; benchmark nodes are reached but not expanded."""
    r = Reach()
    frontier = sorted(set(starts))
    for node, kind, key, label in _describe(con, frontier):
        r.kind[node], r.key[node], r.label[node] = kind, key, label
        r.depth[node] = 0
    depth = 0
    while frontier:
        if depth >= max_depth:
            r.truncated = True
            break
        depth += 1
        rows = con.execute(
            "SELECT e.dst, e.src, e.kind, e.detail, n.kind, n.key, n.label FROM reach_edges e"
            " JOIN nodes n ON n.id = e.src WHERE e.dst IN (SELECT unnest(?::INTEGER[]))"
            " ORDER BY e.dst, e.src",
            [frontier],
        ).fetchall()
        nxt = []
        for dst, src, ekind, detail, nkind, nkey, nlabel in rows:
            r.edges.append((dst, src))
            if src in r.depth:
                continue
            r.depth[src] = depth
            r.parent[src] = (dst, ekind, detail)
            r.kind[src], r.key[src], r.label[src] = nkind, nkey, nlabel
            if nkind != "benchmark":
                nxt.append(src)
        frontier = nxt
    return r


def _describe(con: duckdb.DuckDBPyConnection, nodes: list[int]) -> list[tuple]:
    if not nodes:
        return []
    return con.execute(
        "SELECT id, kind, key, label FROM nodes WHERE id IN (SELECT unnest(?::INTEGER[]))", [nodes]
    ).fetchall()


def reaching_benchmarks(r: Reach) -> set[int]:
    """Nodes of the explored graph from which some benchmark is reachable."""
    up: dict[int, list[int]] = {}
    for dst, src in r.edges:
        up.setdefault(src, []).append(dst)
    covered = set(r.nodes_of("benchmark"))
    queue = deque(covered)
    while queue:
        node = queue.popleft()
        for below in up.get(node, ()):
            if below not in covered:
                covered.add(below)
                queue.append(below)
    return covered
