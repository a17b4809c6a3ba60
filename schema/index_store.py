"""Read queries on the index (tables of ``index.sql``) that coverage and ``perfq stats`` use.

One :class:`IndexStore` per open connection (``schema.reader.open_index``); every query is a
named method returning named rows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import NamedTuple

import duckdb

STATS_TABLES = (
    "files", "functions", "calls", "call_edges", "ops", "kernels", "stubs", "stub_impls", "library_impls",
    "op_calls", "op_edges", "benchmarks", "bench_ops", "bench_calls", "nodes", "reach_edges", "warnings",
)


class OpRow(NamedTuple):
    name: str
    base: str
    overload: str | None
    namespace: str
    schema: str
    composite: str | None


class KernelRow(NamedTuple):
    op: str
    dispatch_key: str
    function_id: int | None


class KernelSizeRow(NamedTuple):
    function_id: int
    lines: int
    path: str


class BenchmarkRow(NamedTuple):
    name: str
    file: str


class BenchOpRow(NamedTuple):
    bench: str
    op: str
    source: str


class Extent(NamedTuple):
    start_line: int
    end_line: int
    function_id: int


class ReachGraph(NamedTuple):
    edges: list[tuple[int, int]]  # (dst, src): src is affected when dst changes
    op_nodes: dict[int, str]  # node id -> op name
    function_nodes: dict[int, int]  # function id -> node id


class IndexStore:
    """Named read queries over an open index connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    # --- operators, kernels, benchmarks -------------------------------------------------
    def ops(self) -> list[OpRow]:
        return [OpRow(*r) for r in self.con.execute(
            "SELECT name, base, overload, namespace, schema, composite FROM ops").fetchall()]

    def ops_named(self, name: str) -> list[OpRow]:
        return [OpRow(*r) for r in self.con.execute(
            "SELECT name, base, overload, namespace, schema, composite FROM ops WHERE name = ?", [name]).fetchall()]

    def ops_of_base(self, base: str, namespace: str) -> list[OpRow]:
        return [OpRow(*r) for r in self.con.execute(
            "SELECT name, base, overload, namespace, schema, composite FROM ops WHERE base = ? AND namespace = ?",
            [base, namespace]).fetchall()]

    def kernels(self) -> list[KernelRow]:
        return [KernelRow(op, key, None if fid is None else int(fid)) for op, key, fid in self.con.execute(
            "SELECT op, dispatch_key, function_id FROM kernels").fetchall()]

    def kernel_sizes(self) -> list[KernelSizeRow]:
        """Lines and file of every function that is some operator's kernel."""
        return [KernelSizeRow(int(fid), int(lines), path) for fid, lines, path in self.con.execute(
            """SELECT f.id, f.end_line - f.start_line + 1, fi.path
               FROM functions f JOIN files fi ON fi.id = f.file_id
               WHERE f.id IN (SELECT function_id FROM kernels WHERE function_id IS NOT NULL)""").fetchall()]

    def benchmarks(self) -> list[BenchmarkRow]:
        return [BenchmarkRow(*r) for r in self.con.execute("SELECT name, file FROM benchmarks").fetchall()]

    def bench_ops(self) -> list[BenchOpRow]:
        return [BenchOpRow(*r) for r in self.con.execute("SELECT DISTINCT bench, op, source FROM bench_ops").fetchall()]

    def benchmarks_of_ops(self, ops: list[str]) -> list[str]:
        """Benchmarks linked to any of ``ops``, sorted."""
        return [r[0] for r in self.con.execute(
            "SELECT DISTINCT bench FROM bench_ops WHERE op IN (SELECT unnest(?)) ORDER BY 1", [ops]).fetchall()]

    # --- files, extents, the reachability graph ------------------------------------------
    def indexed_paths(self) -> set[str]:
        """Repo-relative paths of every indexed file that has functions."""
        return {r[0] for r in self.con.execute(
            "SELECT DISTINCT fi.path FROM files fi JOIN functions f ON f.file_id = fi.id").fetchall()}

    def function_extents(self, paths: Iterable[str]) -> dict[str, list[Extent]]:
        """path -> extents of its functions sorted by start, for the given paths."""
        wanted = sorted(set(paths))
        if not wanted:
            return {}
        out: dict[str, list[Extent]] = defaultdict(list)
        for path, start, end, fid in self.con.execute(
            """SELECT fi.path, f.start_line, f.end_line, f.id
               FROM functions f JOIN files fi ON fi.id = f.file_id
               WHERE fi.path IN (SELECT unnest(?))
               ORDER BY fi.path, f.start_line, f.end_line""",
            [wanted],
        ).fetchall():
            out[path].append(Extent(int(start), int(end), int(fid)))
        return dict(out)

    def reach_graph(self) -> ReachGraph:
        edges = [(int(d), int(s)) for d, s in self.con.execute("SELECT dst, src FROM reach_edges").fetchall()]
        op_nodes = {int(i): k for i, k in self.con.execute("SELECT id, key FROM nodes WHERE kind = 'op'").fetchall()}
        fn_nodes = {
            int(fid): int(nid)
            for nid, fid in self.con.execute(
                "SELECT id, TRY_CAST(key AS BIGINT) FROM nodes WHERE kind = 'function'"
            ).fetchall()
            if fid is not None
        }
        return ReachGraph(edges, op_nodes, fn_nodes)

    # --- perfq stats ------------------------------------------------------------------------
    def table_counts(self) -> dict[str, int]:
        return {t: self.con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in STATS_TABLES}

    def resolution(self) -> dict[str, tuple[int, int]]:
        """(resolved, total) per kind of registration."""
        queries = {
            "stub impls resolved": "SELECT count(function_id), count(*) FROM stub_impls",
            "CPU/CUDA kernels resolved":
                "SELECT count(function_id), count(*) FROM kernels WHERE dispatch_key IN ('CPU', 'CUDA')",
            "all dispatch kernels resolved": "SELECT count(function_id), count(*) FROM kernels",
            "library impls resolved": "SELECT count(function_id), count(*) FROM library_impls",
        }
        return {name: tuple(self.con.execute(sql).fetchone()) for name, sql in queries.items()}

    def unresolved_kernels(self, limit: int = 20) -> list[str]:
        return [r[0] for r in self.con.execute(
            "SELECT DISTINCT kernel_name FROM kernels WHERE function_id IS NULL AND dispatch_key IN ('CPU','CUDA')"
            " ORDER BY 1 LIMIT ?", [limit]).fetchall()]

    def unregistered_stubs(self, limit: int = 20) -> list[str]:
        return [r[0] for r in self.con.execute(
            "SELECT DISTINCT stub FROM stubs WHERE role = 'declare' AND stub NOT IN (SELECT stub FROM stub_impls)"
            " ORDER BY 1 LIMIT ?", [limit]).fetchall()]

    def meta(self) -> dict[str, str]:
        return dict(self.con.execute("SELECT key, value FROM meta").fetchall())
