"""Named queries over an index (schema/index.sql): the only place query code reads it with SQL."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import NamedTuple

import duckdb


class FunctionRow(NamedTuple):
    id: int
    path: str
    qualname: str
    name: str
    kind: str
    start_line: int
    end_line: int
    internal: bool


class EdgeRow(NamedTuple):
    dst: int
    src: int
    kind: str
    detail: str
    src_kind: str
    src_key: str
    src_label: str


class NodeRow(NamedTuple):
    id: int
    kind: str
    key: str
    label: str


class TracedHit(NamedTuple):
    """A traced test that executes an operator (any overload of it)."""

    op: str
    bench: str
    test: str
    module: str
    device: str
    mode: str
    kernels_seen: bool


@dataclass(frozen=True)
class BenchmarkRow:
    name: str
    file: str
    framework: str
    devices: tuple[str, ...]
    trace_status: str  # ok | partial | failed | '' (not traced)


@dataclass(frozen=True)
class CanarySetRow:
    name: str
    description: str
    paths: tuple[str, ...]
    functions: tuple[str, ...]
    benchmarks: tuple[str, ...]


class IndexStore:
    """Read queries of ``perfq affected`` and friends over one open index connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self._edges: dict[int, list[EdgeRow]] = {}  # graph edges read so far (walks share them)

    # ---- files and functions
    def functions_in(self, paths: list[str]) -> list[FunctionRow]:
        if not paths:
            return []
        return [
            FunctionRow(*r)
            for r in self.con.execute(
                "SELECT f.id, fi.path, f.qualname, f.name, f.kind, f.start_line, f.end_line, f.internal"
                " FROM functions f JOIN files fi ON fi.id = f.file_id"
                " WHERE fi.path IN (SELECT unnest(?::TEXT[])) AND fi.origin = 'repo' ORDER BY f.id",
                [paths],
            ).fetchall()
        ]

    def file_digests(self, paths: list[str]) -> dict[str, tuple[str, str, int]]:
        """path -> (sha256, lang, n_lines) for the indexed ``paths``."""
        if not paths:
            return {}
        rows = self.con.execute(
            "SELECT path, sha256, lang, n_lines FROM files"
            " WHERE path IN (SELECT unnest(?::TEXT[])) AND origin = 'repo'",
            [paths],
        ).fetchall()
        return {p: (sha, lang, n) for p, sha, lang, n in rows}

    def function_paths(self, ids: list[int]) -> dict[int, str]:
        if not ids:
            return {}
        return dict(
            self.con.execute(
                "SELECT f.id, fi.path FROM functions f JOIN files fi ON fi.id = f.file_id"
                " WHERE f.id IN (SELECT unnest(?::INTEGER[]))",
                [ids],
            ).fetchall()
        )

    def callers_named(self, name: str, limit: int = 500) -> list[int]:
        """Functions with a call site naming ``name`` (for a changed function the index lacks)."""
        rows = self.con.execute(
            "SELECT DISTINCT caller_id FROM calls WHERE callee_name = ? ORDER BY 1 LIMIT ?", [name, limit]
        ).fetchall()
        return [r[0] for r in rows]

    def includers(self, paths: list[str]) -> list[str]:
        """Indexed files that include one of ``paths`` (resolved includes)."""
        if not paths:
            return []
        rows = self.con.execute(
            "SELECT DISTINCT src.path FROM includes i JOIN files dst ON dst.id = i.target_file_id"
            " JOIN files src ON src.id = i.file_id WHERE dst.path IN (SELECT unnest(?::TEXT[])) ORDER BY 1",
            [paths],
        ).fetchall()
        return [r[0] for r in rows]

    # ---- operators
    def op_nodes(self, names_or_bases: list[str]) -> list[tuple[int, str, str]]:
        """(node id, op name, base) of the operators named (``name.overload``) or of that base."""
        if not names_or_bases:
            return []
        return self.con.execute(
            "SELECT n.id, n.key, o.base FROM nodes n JOIN ops o ON o.name = n.key WHERE n.kind = 'op'"
            " AND (o.name IN (SELECT unnest(?::TEXT[])) OR o.base IN (SELECT unnest(?::TEXT[]))) ORDER BY n.id",
            [names_or_bases, names_or_bases],
        ).fetchall()

    def kernel_keys(self) -> list[tuple[str, str]]:
        """(op, dispatch key) of every dispatch kernel."""
        return self.con.execute("SELECT op, dispatch_key FROM kernels").fetchall()

    # ---- the reachability graph
    def edges_into(self, nodes: list[int]) -> list[EdgeRow]:
        """Edges into ``nodes`` (by dst, then src); each node's edges are read once per store."""
        missing = [n for n in nodes if n not in self._edges]
        if missing:
            for n in missing:
                self._edges[n] = []
            for r in self.con.execute(
                "SELECT e.dst, e.src, e.kind, e.detail, n.kind, n.key, n.label FROM reach_edges e"
                " JOIN nodes n ON n.id = e.src WHERE e.dst IN (SELECT unnest(?::INTEGER[]))"
                " ORDER BY e.dst, e.src",
                [missing],
            ).fetchall():
                self._edges[r[0]].append(EdgeRow(*r))
        return [e for n in sorted(set(nodes)) for e in self._edges[n]]

    def describe(self, nodes: list[int]) -> list[NodeRow]:
        if not nodes:
            return []
        return [
            NodeRow(*r)
            for r in self.con.execute(
                "SELECT id, kind, key, label FROM nodes WHERE id IN (SELECT unnest(?::INTEGER[]))", [nodes]
            ).fetchall()
        ]

    # ---- benchmarks and traces
    def benchmarks(self) -> dict[str, BenchmarkRow]:
        rows = self.con.execute(
            "SELECT b.name, b.file, b.framework, b.devices, coalesce(t.status, '')"
            " FROM benchmarks b LEFT JOIN traces t ON t.bench = b.name ORDER BY b.name"
        ).fetchall()
        return {n: BenchmarkRow(n, f, fw, tuple(json.loads(d)), s) for n, f, fw, d, s in rows}

    def traced_hits(self, ops: list[str], layouts: dict[str, set[str]] | None = None) -> list[TracedHit]:
        """Traced tests that execute any overload of ``ops`` (by namespace and base name), on
        the tensor layouts ``layouts`` gives per op ('any', 'dense', 'quantized'; default any)."""
        if not ops:
            return []
        rows = self.con.execute(
            "SELECT DISTINCT o.name, t.bench, t.test, bt.module, bt.device, bt.mode, bt.kernels_seen, t.layout"
            " FROM ops o"
            " JOIN trace_ops t ON t.base = o.base AND t.namespace = o.namespace"
            " JOIN bench_tests bt ON bt.bench = t.bench AND bt.test = t.test"
            " WHERE o.name IN (SELECT unnest(?::TEXT[])) ORDER BY t.bench, t.test, o.name",
            [ops],
        ).fetchall()
        out = []
        for *hit, layout in rows:
            wanted = (layouts or {}).get(hit[0], {"any"})
            if "any" in wanted or layout in wanted:
                out.append(TracedHit(*hit))
        return out

    def traced_ops_of(self, benches: list[str]) -> dict[str, set[tuple[str, str]]]:
        """bench -> (namespace, base) of every operator its traces execute."""
        if not benches:
            return {}
        out: dict[str, set[tuple[str, str]]] = {}
        for bench, ns, base in self.con.execute(
            "SELECT DISTINCT bench, namespace, base FROM trace_ops WHERE bench IN (SELECT unnest(?::TEXT[]))",
            [benches],
        ).fetchall():
            out.setdefault(bench, set()).add((ns, base))
        return out

    def canary_sets(self) -> list[CanarySetRow]:
        rows = self.con.execute(
            "SELECT name, coalesce(description, ''), paths, functions, benchmarks FROM canary_sets ORDER BY name"
        ).fetchall()
        return [
            CanarySetRow(n, d, tuple(json.loads(p)), tuple(json.loads(f)), tuple(json.loads(b)))
            for n, d, p, f, b in rows
        ]

    def meta(self) -> dict[str, str]:
        return dict(self.con.execute("SELECT key, value FROM meta").fetchall())
