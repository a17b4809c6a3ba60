"""Named queries over an index (schema/index.sql): the only place query, coverage and ``perfq stats``
read it with SQL. One :class:`IndexStore` per open connection (``schema.reader.open_index``)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import NamedTuple

from schema.engine import duckdb
from schema.graph_file import read_graph_file
from schema.kinds import BenchOpSource, CallKind, EdgeKind, FileStatus, NodeKind, Origin, TraceStatus
from schema.packed_graph import PackedGraph, pack_graph


class Node(NamedTuple):
    """A node of the reachability graph as a query reads it (the ``nodes`` table's columns: the
    reader builds no row type of the writer's model)."""

    id: int
    kind: NodeKind
    key: str
    label: str


class CallSite(NamedTuple):
    """A call site of the index naming a function: its caller, what stood before the name, the caller's file."""

    caller_id: int
    qualifier: str
    path: str
    n_args: int | None = None  # the arguments it passes (None: not certain)


class CallerExtent(NamedTuple):
    """What enters an indexed function: the reach edge's kind and, for a function caller, its
    file and lines (the callee's name is how a call writes it)."""

    callee: int
    name: str
    kind: str
    path: str  # '' when the caller is no function (an operator, a stub, a benchmark)
    first: int
    last: int


class FunctionInFile(NamedTuple):
    """A function of the index with its file's path."""

    id: int
    path: str
    qualname: str
    name: str
    kind: str
    start_line: int
    end_line: int
    internal: bool
    least_args: int = 0  # the argument counts a C++ definition accepts (indexer/cpp_arity.py)
    most_args: int | None = None


class TracedHit(NamedTuple):
    """Traced tests of one benchmark that execute an operator, and what they share (module,
    device, mode, why inferred): the overloads of it that were asked about."""

    ops: tuple[str, ...]  # name.overload, sorted
    bench: str
    tests: tuple[str, ...]  # in the order of their names
    module: str
    device: str
    mode: str
    kernels_seen: bool
    inferred: str  # '' when the trace saw the tests run the operator, else why they are taken to run


class TracedDtype(NamedTuple):
    """One traced test's dtype of an operator (one of its tensor arguments), on one layout."""

    op: str  # the operator asked about (name.overload)
    bench: str
    test: str
    layout: str  # dense | quantized
    dtype: str  # torch's name: int32, bfloat16, quint8


@dataclass(frozen=True)
class BenchmarkInfo:
    name: str
    file: str
    framework: str
    devices: tuple[str, ...]
    trace_status: str  # ok | partial | failed | '' (not traced)


@dataclass(frozen=True)
class CanarySet:
    name: str
    description: str
    paths: tuple[str, ...]
    functions: tuple[str, ...]
    benchmarks: tuple[str, ...]


class OpInfo(NamedTuple):
    name: str
    base: str
    overload: str | None
    namespace: str
    schema: str
    composite: str | None


class KernelTarget(NamedTuple):
    op: str
    dispatch_key: str
    function_id: int | None


class KernelSizeRow(NamedTuple):
    function_id: int
    lines: int
    path: str
    start_line: int = 0


class BenchmarkFile(NamedTuple):
    name: str
    file: str


class BenchOpLink(NamedTuple):
    bench: str
    op: str
    source: BenchOpSource


class NativeHit(NamedTuple):
    bench: str
    test: str
    function_id: int
    share: float
    module: str  # the test's --operators name ('' when the index has no bench_tests row for it)


class LayerHit(NamedTuple):
    """A changed function the generated operator wrappers run (a row of generated_layer)."""

    function_id: int
    qualname: str
    source: str  # the template or generator naming it
    line: int
    named: str  # the name written there
    depth: int  # 0: named; 1: called by one named


class TracedTestOps(NamedTuple):
    """A traced test and the asked-about operators (by name, any overload) its timed region executes."""

    bench: str
    test: str
    module: str
    tag: str
    backward: bool
    device: str
    ops: tuple[str, ...]


class Extent(NamedTuple):
    start_line: int
    end_line: int
    function_id: int


class ReachGraph(NamedTuple):
    edges: list[tuple[int, int]]  # (dst, src): src is affected when dst changes
    op_nodes: dict[int, str]  # node id -> op name
    function_nodes: dict[int, int]  # function id -> node id


class _Overloads(dict):
    """(key index, layout) -> the overloads asked about that a test on that layout runs, of
    the operator ``keys[index]`` (namespace, base name), computed on first use."""

    def __init__(
        self, keys: list[tuple[str, str]], overloads: dict[tuple[str, str], list[str]], layouts: dict[str, set[str]]
    ) -> None:
        super().__init__()
        self.keys, self.overloads, self.layouts = keys, overloads, layouts

    def __missing__(self, key: tuple[int, str]) -> tuple[str, ...]:
        index, layout = key
        value = self[key] = tuple(
            op
            for op in self.overloads.get(self.keys[index], ())
            if "any" in self.layouts.get(op, ("any",)) or layout in self.layouts[op]
        )
        return value


class IndexStore:
    """Read queries of ``perfq affected`` and friends over one open index connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection, db: Path | None = None) -> None:
        """``db``: the file ``con`` opened, whose graph file a query may read (graph_file.py)."""
        self.con = con
        self.db = db
        self._meta: dict[str, str] | None = None
        self._graph: PackedGraph | None = None
        self._nodes: dict[int, Node | None] = {}  # describe's cache (None: no such node)
        self._functions: dict[str, list[FunctionInFile]] = {}  # functions_in's cache, by path
        self._paths: dict[int, str | None] = {}  # function_paths' cache (None: no such function)

    # ---- files and functions
    def functions_in(self, paths: list[str]) -> list[FunctionInFile]:
        """The functions of the indexed ``paths`` (the repository's), by id; each file read once per store."""
        missing = sorted({p for p in paths if p not in self._functions})
        if missing:
            for r in self.con.execute(
                "SELECT f.id, fi.path, f.qualname, f.name, f.kind, f.start_line, f.end_line, f.internal,"
                " f.least_args, f.most_args FROM functions f JOIN files fi ON fi.id = f.file_id"
                f" WHERE fi.path IN (SELECT unnest(?::TEXT[])) AND fi.origin = '{Origin.REPO}' ORDER BY f.id",
                [missing],
            ).fetchall():
                self._functions.setdefault(r[1], []).append(FunctionInFile(*r))
                self._paths[r[0]] = r[1]
            self._functions.update((p, []) for p in missing if p not in self._functions)
        return sorted((row for p in set(paths) for row in self._functions[p]), key=attrgetter("id"))

    def file_digests(self, paths: list[str]) -> dict[str, tuple[str, str, int, str, str]]:
        """path -> (sha256, lang, n_lines, status, message) for the indexed ``paths``."""
        if not paths:
            return {}
        rows = self.con.execute(
            "SELECT path, sha256, lang, n_lines, status, coalesce(message, '') FROM files"
            f" WHERE path IN (SELECT unnest(?::TEXT[])) AND origin = '{Origin.REPO}'",
            [paths],
        ).fetchall()
        return {p: (sha, lang, n, status, message) for p, sha, lang, n, status, message in rows}

    def skipped_files(self) -> list[tuple[str, str]]:
        """(path, why) of the files the index holds without parsing them (binary, too large)."""
        return self.con.execute(
            f"SELECT path, coalesce(message, '') FROM files WHERE status = '{FileStatus.SKIPPED}' ORDER BY path"
        ).fetchall()

    def function_paths(self, ids: list[int]) -> dict[int, str]:
        """function id -> its file's path, for the ``ids`` that are functions; each id read once
        per store (the changed files' functions are known from functions_in)."""
        missing = sorted({i for i in ids if i not in self._paths})
        if missing:
            found = dict(
                self.con.execute(
                    "SELECT f.id, fi.path FROM functions f JOIN files fi ON fi.id = f.file_id"
                    " WHERE f.id IN (SELECT unnest(?::INTEGER[]))",
                    [missing],
                ).fetchall()
            )
            self._paths.update((i, found.get(i)) for i in missing)
        return {i: path for i in ids if (path := self._paths[i]) is not None}

    def callers_with_extents(self, ids: list[int]) -> list[CallerExtent]:
        """Every reach edge into the functions ``ids``, with its caller's file and extent, in one read."""
        if not ids:
            return []
        rows = self.con.execute(
            "SELECT r.dst, callee.name, r.kind, coalesce(fi.path, ''), coalesce(fn.start_line, 0),"
            " coalesce(fn.end_line, 0) FROM reach_edges r JOIN functions callee ON callee.id = r.dst"
            " LEFT JOIN functions fn ON fn.id = r.src LEFT JOIN files fi ON fi.id = fn.file_id"
            " WHERE r.dst IN (SELECT unnest(?::INTEGER[])) ORDER BY 1, 3, 4, 5",
            [sorted(set(ids))],
        ).fetchall()
        return [CallerExtent(*row) for row in rows]

    def callers_named(self, names: list[str], limit: int = 500) -> dict[str, list[int]]:
        """name -> the functions (at most ``limit``, by id) with a call site naming it, for those
        of ``names`` something calls (changed functions the index lacks), in one read."""
        if not names:
            return {}
        out: dict[str, list[int]] = {}
        for name, caller in self.con.execute(
            "SELECT callee_name, caller_id FROM (SELECT DISTINCT callee_name, caller_id FROM calls"
            " WHERE callee_name IN (SELECT unnest(?::TEXT[]))) QUALIFY row_number() OVER"
            " (PARTITION BY callee_name ORDER BY caller_id) <= ? ORDER BY 1, 2",
            [sorted(set(names)), limit],
        ).fetchall():
            out.setdefault(name, []).append(caller)
        return out

    def call_sites_named(self, names: list[str]) -> dict[str, list[CallSite]]:
        """name -> the call sites (caller, qualifier, caller's file, arguments passed) naming it, for those of
        ``names`` something calls, in one read."""
        if not names:
            return {}
        out: dict[str, list[CallSite]] = {}
        for name, caller, qualifier, path, n_args in self.con.execute(
            "SELECT DISTINCT c.callee_name, c.caller_id, c.qualifier, f.path, c.n_args FROM calls c"
            " JOIN functions fn ON fn.id = c.caller_id JOIN files f ON f.id = fn.file_id"
            " WHERE c.callee_name IN (SELECT unnest(?::TEXT[])) ORDER BY ALL",
            [sorted(set(names))],
        ).fetchall():
            out.setdefault(name, []).append(CallSite(caller, qualifier, path, n_args))
        return out

    def registered_names(self, names: list[str]) -> dict[str, set[str]]:
        """Those of ``names`` a registration names (a yaml kernel, a stub, a stub's or a library's
        impl), each with the files that name it ('' for a yaml kernel: the generated code does)."""
        if not names:
            return {}
        out: dict[str, set[str]] = {}
        for name, path in self.con.execute(
            "SELECT r.name, coalesce(f.path, '') FROM (SELECT kernel_name AS name, NULL AS file_id FROM kernels"
            " UNION SELECT stub, file_id FROM stubs UNION SELECT impl_name, file_id FROM stub_impls"
            " UNION SELECT kernel_name, file_id FROM library_impls) r LEFT JOIN files f ON f.id = r.file_id"
            " WHERE r.name IN (SELECT unnest(?::TEXT[]))",
            [sorted(set(names))],
        ).fetchall():
            out.setdefault(name, set()).add(path)
        return out

    def includers(self, paths: list[str]) -> dict[str, list[str]]:
        """path -> the indexed files that include it (resolved includes), for those of ``paths``
        that some file includes."""
        if not paths:
            return {}
        out: dict[str, list[str]] = {}
        for included, path in self.con.execute(
            "SELECT DISTINCT dst.path, src.path FROM includes i JOIN files dst ON dst.id = i.target_file_id"
            " JOIN files src ON src.id = i.file_id WHERE dst.path IN (SELECT unnest(?::TEXT[])) ORDER BY 1, 2",
            [paths],
        ).fetchall():
            out.setdefault(included, []).append(path)
        return out

    # ---- operators
    def op_nodes(self, names_or_bases: list[str]) -> list[tuple[int, str, str]]:
        """(node id, op name, base) of the operators named (``name.overload``) or of that base."""
        if not names_or_bases:
            return []
        return self.con.execute(
            f"SELECT n.id, n.key, o.base FROM nodes n JOIN ops o ON o.name = n.key WHERE n.kind = '{NodeKind.OP}'"
            " AND (o.name IN (SELECT unnest(?::TEXT[])) OR o.base IN (SELECT unnest(?::TEXT[]))) ORDER BY n.id",
            [names_or_bases, names_or_bases],
        ).fetchall()

    def decorator_refs(self, functions: list[int], decorators: list[str]) -> list[tuple[int, str, str]]:
        """(function, decorator, dotted reference) of what the named ``decorators`` of the Python
        ``functions`` are given (``@register_lowering(aten.cat)`` -> ``...aten.cat``): the
        references on a decorator's line, above the ``def``."""
        if not functions:
            return []
        return self.con.execute(
            "SELECT r.caller_id, d.callee_name, r.qualifier || '.' || r.callee_name FROM calls d"
            f" JOIN calls r ON r.caller_id = d.caller_id AND r.line = d.line AND r.kind = '{CallKind.REF}'"
            " JOIN functions f ON f.id = d.caller_id"
            f" WHERE d.caller_id IN (SELECT unnest(?::INTEGER[])) AND d.kind = '{CallKind.PYTHON}'"
            " AND d.line < f.start_line"
            " AND d.callee_name IN (SELECT unnest(?::TEXT[])) ORDER BY 1, 3",
            [functions, decorators],
        ).fetchall()

    def kernel_keys(self, keys: list[str]) -> list[tuple[str, str]]:
        """(op, dispatch key) of the dispatch kernels registered for one of ``keys``."""
        return self.con.execute(
            "SELECT DISTINCT op, dispatch_key FROM kernels WHERE dispatch_key IN (SELECT unnest(?::TEXT[]))", [keys]
        ).fetchall()

    # ---- the reachability graph
    def graph(self) -> PackedGraph:
        """The packed reachability graph (packed_graph.py), read once per store: the file
        beside the index when it holds the indexed graph, else the ``graph`` table, else (a
        patched index whose file is missing) packed from the nodes and edges again."""
        if self._graph is None:
            token = self.meta().get("graph_token") if self.db is not None else None
            mapped = read_graph_file(self.db, token) if token else None
            parts = mapped or dict(self.con.execute("SELECT part, data FROM graph").fetchall())
            self._graph = PackedGraph(parts or self.packed_from_tables())
        return self._graph

    def packed_from_tables(self) -> dict[str, bytes]:
        """The packed graph of the ``nodes`` and ``reach_edges`` tables as they are (part -> bytes)."""
        return dict(pack_graph(
            self.con.execute("SELECT id, kind, key, label FROM nodes").fetchall(),
            self.con.execute("SELECT dst, src, kind, detail FROM reach_edges").fetchall(),
        ))

    def labels(self, nodes: list[int]) -> dict[int, str]:
        """node -> label (qualified names of functions)."""
        described = {row.id: row.label for row in self.describe(nodes)}
        return {n: described.get(n, str(n)) for n in nodes}

    def describe(self, nodes: list[int]) -> list[Node]:
        """The rows of ``nodes`` (those that exist), each read once per store."""
        missing = sorted({n for n in nodes if n not in self._nodes})
        if missing:
            for r in self.con.execute(
                "SELECT id, kind, key, label FROM nodes WHERE id IN (SELECT unnest(?::INTEGER[]))", [missing]
            ).fetchall():
                self._nodes[r[0]] = Node(r[0], NodeKind(r[1]), r[2], r[3])
            self._nodes.update((n, None) for n in missing if n not in self._nodes)
        return [row for n in nodes if (row := self._nodes[n]) is not None]

    # ---- benchmarks and traces
    def benchmarks(self) -> dict[str, BenchmarkInfo]:
        rows = self.con.execute(
            "SELECT b.name, b.file, b.framework, b.devices, coalesce(t.status, '')"
            " FROM benchmarks b LEFT JOIN traces t ON t.bench = b.name ORDER BY b.name"
        ).fetchall()
        return {n: BenchmarkInfo(n, f, fw, tuple(json.loads(d)), s) for n, f, fw, d, s in rows}

    def traced_hits(
        self, requests: list[tuple[list[str], dict[str, set[str]] | None]], graph_level: bool = False
    ) -> list[list[TracedHit]]:
        """Per request (ops, layouts): the traced tests that execute any overload of its ops (by
        namespace and base name), on the tensor layouts ``layouts`` gives per op ('any', 'dense',
        'quantized'; default any); one per test, operator and layout run, by benchmark, test and
        operator. All requests are answered from one read of the traces. ``graph_level``: only
        where the test ran the operator outside other operators' kernels (what torch.compile sees)."""
        wanted_ops = sorted({op for ops, _ in requests for op in ops})
        if not wanted_ops:
            return [[] for _ in requests]
        overloads: dict[tuple[str, str], list[str]] = {}
        for name, namespace, base in self.con.execute(
            "SELECT name, namespace, base FROM ops WHERE name IN (SELECT unnest(?::TEXT[])) ORDER BY name",
            [wanted_ops],
        ).fetchall():
            overloads.setdefault((namespace, base), []).append(name)
        keys = sorted(overloads)
        # tests come back as numbers and grouped (a row of names per test and operator, tens of
        # thousands for a wide change, cost more to hand to Python than the query); tests are
        # numbered by benchmark and name (schema/index.sql) and their names read once
        groups = self.con.execute(
            "WITH w AS (SELECT unnest(?::TEXT[]) AS ns, unnest(?::TEXT[]) AS b, unnest(range(?)) AS k),"
            " hit AS (SELECT DISTINCT bt.id, bt.bench, bt.module, bt.device, bt.mode, bt.kernels_seen, w.k,"
            " t.layout, t.inferred FROM trace_ops t JOIN w ON w.ns = t.namespace AND w.b = t.base"
            " JOIN bench_tests bt ON bt.bench = t.bench AND bt.test = t.test"
            + (" WHERE NOT t.in_kernel)" if graph_level else ")") +
            " SELECT min(id), bench, module, device, mode, kernels_seen, k, layout, inferred, list(id ORDER BY id)"
            " FROM hit GROUP BY ALL",
            [[k[0] for k in keys], [k[1] for k in keys], len(keys)],
        ).fetchall()
        ids = sorted({i for g in groups for i in g[-1]})
        names = dict(
            self.con.execute(
                "SELECT id, test FROM bench_tests WHERE id IN (SELECT unnest(?::INTEGER[]))", [ids]
            ).fetchall()
        )
        return [self._hits(groups, names, keys, overloads, set(ops), layouts or {}) for ops, layouts in requests]

    @staticmethod
    def _hits(
        groups: list[tuple],
        names: dict[int, str],
        keys: list[tuple[str, str]],
        overloads: dict[tuple[str, str], list[str]],
        ops: set[str],
        layouts: dict[str, set[str]],
    ) -> list[TracedHit]:
        """The hits of the trace ``groups`` (first test id, benchmark, module, device, mode,
        kernels seen, index into ``keys``, layout, why inferred, test ids) on ``ops``: each
        group's overloads among ``ops``; by benchmark, first test and first operator."""
        mine = {key: kept for key, names in overloads.items() if (kept := [n for n in names if n in ops])}
        wanted = _Overloads(keys, mine, layouts)
        found = []
        for first, bench, module, device, mode, seen, k, layout, inferred, test_ids in groups:
            ops_on = wanted[k, layout]
            if ops_on:
                tests = tuple(dict.fromkeys(names[i] for i in test_ids))  # a test's copies (class, tag) once
                hit = TracedHit(ops_on, bench, tests, module, device, mode, seen, inferred)
                found.append(((bench, first, ops_on[0], layout, module, device, mode, seen, inferred), hit))
        found.sort(key=itemgetter(0))
        return [hit for _, hit in found]

    def backward_hits(self, ops: list[str], why: str) -> list[TracedHit]:
        """The traced gradient tests that run ``ops``' backward (any overload): the backward tests of
        each benchmark module whose forward tests execute them. A gradient test's timed region is
        its backward pass only, so its trace holds the operators the backward formulas run, never
        the forward operator whose backward node (``AddmmBackward0``) runs them; the forward tests
        of its module (same benchmark class and inputs) show which operator that is. One hit per
        benchmark, module, device, mode and operator; ``why``: their ``inferred``."""
        if not ops:
            return []
        rows = self.con.execute(
            "WITH w AS (SELECT name, namespace, base FROM ops WHERE name IN (SELECT unnest(?::TEXT[]))),"
            " fwd AS (SELECT DISTINCT bt.bench, bt.module, w.name FROM trace_ops t"
            " JOIN w ON w.namespace = t.namespace AND w.base = t.base"
            " JOIN bench_tests bt ON bt.bench = t.bench AND bt.test = t.test WHERE NOT bt.backward)"
            " SELECT bt.bench, bt.module, bt.device, bt.mode, bt.kernels_seen,"
            " list(DISTINCT fwd.name ORDER BY fwd.name), list(DISTINCT bt.test ORDER BY bt.test) FROM bench_tests bt"
            " JOIN fwd ON fwd.bench = bt.bench AND fwd.module = bt.module WHERE bt.backward"
            " GROUP BY bt.bench, bt.module, bt.device, bt.mode, bt.kernels_seen ORDER BY ALL",
            [ops],
        ).fetchall()
        return [
            TracedHit(tuple(names), bench, tuple(tests), module, device, mode, seen, why)
            for bench, module, device, mode, seen, names, tests in rows
        ]

    def traced_gradient_tests(self) -> int:
        """How many traced tests run a backward pass (gradient tests)."""
        return self.con.execute("SELECT count(*) FROM bench_tests WHERE backward").fetchone()[0]

    def executed(self, ops: list[str]) -> set[str]:
        """Those of ``ops`` that some traced test executes (any overload, any layout)."""
        if not ops:
            return set()
        rows = self.con.execute(
            "SELECT DISTINCT o.name FROM ops o SEMI JOIN trace_ops t ON t.base = o.base AND t.namespace = o.namespace"
            " WHERE o.name IN (SELECT unnest(?::TEXT[]))",
            [ops],
        ).fetchall()
        return {r[0] for r in rows}

    def traced_layouts(self, ops: list[str]) -> dict[str, dict[str, set[str]]]:
        """Per op of ``ops`` (any overload: by namespace and base name), the layouts traced tests
        run it on -> the benchmarks running it so ('dense': {'add_test'}, 'quantized': {...})."""
        out: dict[str, dict[str, set[str]]] = {}
        if not ops:
            return out
        for name, layout, bench in self.con.execute(
            "SELECT DISTINCT o.name, t.layout, t.bench FROM ops o JOIN trace_ops t ON t.base = o.base"
            " AND t.namespace = o.namespace WHERE o.name IN (SELECT unnest(?::TEXT[]))",
            [ops],
        ).fetchall():
            out.setdefault(name, {}).setdefault(layout, set()).add(bench)
        return out

    def nested_benchmarks(self, ops: list[str], layouts: dict[str, set[str]] | None = None) -> set[str]:
        """Benchmarks whose traces saw ``ops`` (any overload) run only inside other operators'
        kernels (observed, not inferred), on the tensor layouts ``layouts`` gives per op (as
        ``traced_hits``; default any)."""
        if not ops:
            return set()
        rows = self.con.execute(
            "WITH w AS (SELECT DISTINCT name, namespace, base FROM ops WHERE name IN (SELECT unnest(?::TEXT[])))"
            " SELECT DISTINCT w.name, t.layout, t.bench FROM trace_ops t"
            " JOIN w ON t.base = w.base AND t.namespace = w.namespace WHERE t.in_kernel AND t.inferred = ''",
            [ops],
        ).fetchall()
        wanted = layouts or {}
        return {
            bench for op, layout, bench in rows
            if "any" in wanted.get(op, ("any",)) or layout in wanted[op]
        }

    def traced_dtypes(self, ops: list[str]) -> list[TracedDtype]:
        """Every traced test's (operator, layout, dtype) for ``ops`` (any overload: by namespace
        and base name), where the trace recorded the dtypes of its calls' tensor arguments."""
        if not ops:
            return []
        rows = self.con.execute(  # (rows are distinct as written: one per test, operator, layout and dtype)
            "WITH w AS (SELECT name, namespace, base FROM ops WHERE name IN (SELECT unnest(?::TEXT[])))"
            " SELECT w.name, d.bench, d.test, d.layout, d.dtype FROM trace_dtypes d"
            " JOIN w ON d.base = w.base AND d.namespace = w.namespace",
            [ops],
        ).fetchall()
        return [TracedDtype(*row) for row in rows]

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

    def seen_by_trace(self) -> set[tuple[str, str, str]]:
        """(bench, namespace, base) of every operator a trace saw run (not inferred to run)."""
        return {(b, ns, base) for b, ns, base in self.con.execute(
            "SELECT DISTINCT bench, namespace, base FROM trace_ops WHERE inferred = ''").fetchall()}

    def test_ops(self, benches: list[str], ops: list[str]) -> list[TracedTestOps]:
        """Every traced test of ``benches`` (one row per benchmark and test name), with those of ``ops``
        (operator names) its trace executes (by namespace and base name, any layout)."""
        if not benches:
            return []
        rows = self.con.execute(
            "WITH wanted AS (SELECT name, namespace, base FROM ops WHERE name IN (SELECT unnest(?::TEXT[]))),"
            " tests AS (SELECT bench, test, min(module) AS module, min(tag) AS tag, bool_or(backward) AS backward,"
            " min(device) AS device FROM bench_tests WHERE bench IN (SELECT unnest(?::TEXT[])) GROUP BY bench, test),"
            " hits AS (SELECT DISTINCT t.bench, t.test, w.name FROM trace_ops t"
            " JOIN wanted w ON w.namespace = t.namespace AND w.base = t.base"
            " WHERE t.bench IN (SELECT unnest(?::TEXT[])))"
            " SELECT s.bench, s.test, s.module, s.tag, s.backward, s.device,"
            " list(h.name ORDER BY h.name) FILTER (WHERE h.name IS NOT NULL)"
            " FROM tests s LEFT JOIN hits h ON h.bench = s.bench AND h.test = s.test"
            " GROUP BY ALL ORDER BY s.bench, s.test",
            [ops, benches, benches],
        ).fetchall()
        return [TracedTestOps(b, t, m, tag, bool(bw), d, tuple(names or ())) for b, t, m, tag, bw, d, names in rows]

    def canary_sets(self) -> list[CanarySet]:
        rows = self.con.execute(
            "SELECT name, coalesce(description, ''), paths, functions, benchmarks FROM canary_sets ORDER BY name"
        ).fetchall()
        return [
            CanarySet(n, d, tuple(json.loads(p)), tuple(json.loads(f)), tuple(json.loads(b)))
            for n, d, p, f, b in rows
        ]

    def meta(self) -> dict[str, str]:
        """The ``meta`` table, read once per store."""
        if self._meta is None:
            self._meta = dict(self.con.execute("SELECT key, value FROM meta").fetchall())
        return dict(self._meta)

    # ---- coverage: operators, kernels, benchmarks -------------------------------------------------
    def ops(self) -> list[OpInfo]:
        return [OpInfo(*r) for r in self.con.execute(
            "SELECT name, base, overload, namespace, schema, composite FROM ops").fetchall()]

    def ops_named(self, name: str) -> list[OpInfo]:
        return [OpInfo(*r) for r in self.con.execute(
            "SELECT name, base, overload, namespace, schema, composite FROM ops WHERE name = ?", [name]).fetchall()]

    def ops_of_base(self, base: str, namespace: str) -> list[OpInfo]:
        return [OpInfo(*r) for r in self.con.execute(
            "SELECT name, base, overload, namespace, schema, composite FROM ops WHERE base = ? AND namespace = ?",
            [base, namespace]).fetchall()]

    def kernels(self) -> list[KernelTarget]:
        return [KernelTarget(op, key, None if fid is None else int(fid)) for op, key, fid in self.con.execute(
            "SELECT op, dispatch_key, function_id FROM kernels").fetchall()]

    def kernel_sizes(self) -> list[KernelSizeRow]:
        """Lines and file of every function that is some operator's kernel."""
        return [KernelSizeRow(int(fid), int(lines), path, int(start)) for fid, lines, path, start in self.con.execute(
            """SELECT f.id, f.end_line - f.start_line + 1, fi.path, f.start_line
               FROM functions f JOIN files fi ON fi.id = f.file_id
               WHERE f.id IN (SELECT function_id FROM kernels WHERE function_id IS NOT NULL)""").fetchall()]

    def benchmark_files(self) -> list[BenchmarkFile]:
        return [BenchmarkFile(*r) for r in self.con.execute("SELECT name, file FROM benchmarks").fetchall()]

    def bench_ops(self) -> list[BenchOpLink]:
        rows = self.con.execute("SELECT DISTINCT bench, op, source FROM bench_ops").fetchall()
        return [BenchOpLink(bench, op, BenchOpSource(source)) for bench, op, source in rows]

    def benchmarks_of_ops(self, ops: list[str]) -> list[str]:
        """Benchmarks linked to any of ``ops``, sorted."""
        return [r[0] for r in self.con.execute(
            "SELECT DISTINCT bench FROM bench_ops WHERE op IN (SELECT unnest(?)) ORDER BY 1", [ops]).fetchall()]

    # ---- coverage: files, extents, the reachability graph ------------------------------------------
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
        op_nodes = {int(i): k for i, k in self.con.execute(
            f"SELECT id, key FROM nodes WHERE kind = '{NodeKind.OP}'").fetchall()}
        fn_nodes = {
            int(fid): int(nid)
            for nid, fid in self.con.execute(
                f"SELECT id, TRY_CAST(key AS BIGINT) FROM nodes WHERE kind = '{NodeKind.FUNCTION}'"
            ).fetchall()
            if fid is not None
        }
        return ReachGraph(edges, op_nodes, fn_nodes)

    # ---- perfq stats ------------------------------------------------------------------------
    def table_counts(self, tables: Iterable[str]) -> dict[str, int]:
        """Rows per table of ``tables``."""
        names = list(tables)
        if not names:
            return {}
        sql = " UNION ALL ".join(f"SELECT {i}, count(*) FROM {t}" for i, t in enumerate(names))
        counts = dict(self.con.execute(sql).fetchall())  # one query, not a round trip per table
        return {t: counts[i] for i, t in enumerate(names)}

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

    def native_hits(self, function_ids: list[int]) -> list[NativeHit]:
        """Sampled tests whose stacks hold one of ``function_ids``, largest share first."""
        if not function_ids:
            return []
        return [NativeHit(*r) for r in self.con.execute(
            "SELECT n.bench, n.test, n.function_id, n.share, coalesce(min(t.module), '') FROM native_samples n"
            " LEFT JOIN bench_tests t ON t.bench = n.bench AND t.test = n.test"
            " WHERE n.function_id IN (SELECT unnest(?::BIGINT[])) GROUP BY ALL"
            " ORDER BY n.share DESC, n.bench, n.test", [function_ids]).fetchall()]

    def generated_layer(self, function_ids: list[int]) -> list[LayerHit]:
        """Those of ``function_ids`` every generated operator wrapper runs (an index built before
        the generated_layer table: none)."""
        if not function_ids:
            return []
        try:
            rows = self.con.execute(
                "SELECT g.function_id, f.qualname, g.source, g.line, g.named, g.depth FROM generated_layer g"
                " JOIN functions f ON f.id = g.function_id WHERE g.function_id IN (SELECT unnest(?::BIGINT[]))"
                " ORDER BY g.depth, f.qualname", [function_ids]).fetchall()
        except duckdb.CatalogException:
            return []
        return [LayerHit(*r) for r in rows]

    def structured_ops(self) -> list[str]:
        """The operators with a structured kernel (their own or a delegate's): their generated
        wrappers create, resize or restride the outputs through the backend's helpers."""
        return [r[0] for r in self.con.execute(
            "SELECT name FROM ops WHERE structured OR structured_delegate IS NOT NULL ORDER BY name").fetchall()]

    def line_covered_paths(self, paths: list[str]) -> set[str]:
        """Those of ``paths`` whose Python lines the traces recorded (tests ran some of them)."""
        if not paths:
            return set()
        return {r[0] for r in self.con.execute(
            "SELECT DISTINCT path FROM py_line_sets WHERE path IN (SELECT unnest(?::TEXT[]))", [paths]).fetchall()}

    def tests_running_lines(self, path: str, lines: list[int]) -> dict[str, set[str]]:
        """Per benchmark, its traced tests that ran one of ``lines`` of ``path``."""
        out: dict[str, set[str]] = defaultdict(set)
        for bench, test in self.con.execute(
            "SELECT DISTINCT t.bench, t.test FROM py_test_lines t SEMI JOIN py_line_sets s"
            " ON s.line_set = t.line_set AND s.path = ? AND s.line IN (SELECT unnest(?::INTEGER[]))",
            [path, lines],
        ).fetchall():
            out[bench].add(test)
        return dict(out)

    def python_functions(self, ids: list[int]) -> dict[int, tuple[str, str, str]]:
        """function id -> (its file's path, qualified name, kind), for the ``ids`` that are functions."""
        if not ids:
            return {}
        return {r[0]: r[1:] for r in self.con.execute(
            "SELECT f.id, fi.path, f.qualname, f.kind FROM functions f JOIN files fi ON fi.id = f.file_id"
            " WHERE f.id IN (SELECT unnest(?::INTEGER[]))", [sorted(set(ids))]).fetchall()}

    def python_callers(self, ids: list[int]) -> list[tuple[int, int, str]]:
        """(callee, caller, detail 'line N') of the Python calls of the functions ``ids``."""
        if not ids:
            return []
        return [tuple(r) for r in self.con.execute(
            "SELECT dst, src, detail FROM reach_edges WHERE kind = ? AND dst IN (SELECT unnest(?::INTEGER[]))"
            " ORDER BY ALL", [EdgeKind.PYTHON_CALL.value, sorted(set(ids))]).fetchall()]

    def tests_running_each_line(self, path: str, lines: list[int]) -> dict[int, dict[str, set[str]]]:
        """Per line of ``lines`` of ``path``, per benchmark, its traced tests that ran it (one read)."""
        out: dict[int, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        for line, bench, test in self.con.execute(
            "SELECT DISTINCT s.line, t.bench, t.test FROM py_test_lines t JOIN py_line_sets s"
            " ON s.line_set = t.line_set AND s.path = ? AND s.line IN (SELECT unnest(?::INTEGER[]))",
            [path, sorted(set(lines))],
        ).fetchall():
            out[line][bench].add(test)
        return {line: dict(ran) for line, ran in out.items()}

    def line_digests(self, path: str) -> dict[int, int]:
        """The traced torch's ``path``: line -> digest of its stripped text (empty: not recorded)."""
        return dict(self.con.execute("SELECT line, digest FROM py_line_texts WHERE path = ?", [path]).fetchall())

    def line_traced_tests(self) -> int:
        """How many traced tests have Python lines recorded."""
        return int(self.con.execute("SELECT count(DISTINCT (bench, test)) FROM py_test_lines").fetchone()[0])

    def sampled_tests(self, benches: list[str]) -> dict[str, set[str]]:
        """Per benchmark of ``benches``, its tests sampled (those with samples in the library,
        mapped to index functions or not)."""
        out: dict[str, set[str]] = defaultdict(set)
        if benches:
            for bench, test in self.con.execute(
                "SELECT DISTINCT bench, test FROM native_tests"
                " WHERE samples > 0 AND bench IN (SELECT unnest(?::TEXT[]))"
                " UNION SELECT DISTINCT bench, test FROM native_samples WHERE bench IN (SELECT unnest(?::TEXT[]))",
                [benches, benches],
            ).fetchall():
                out[bench].add(test)
        return dict(out)

    def trace_summary(self) -> dict:
        """Benchmark files traced, how many succeeded, tests per mode, and the failures."""
        return {
            "files": self.con.execute("SELECT count(*) FROM traces").fetchone()[0],
            "ok": self.con.execute(f"SELECT count(*) FROM traces WHERE status = '{TraceStatus.ok}'").fetchone()[0],
            "tests": self.con.execute("SELECT count(*) FROM bench_tests").fetchone()[0],
            "by_mode": dict(self.con.execute(
                "SELECT mode, count(*) FROM bench_tests GROUP BY 1 ORDER BY 1").fetchall()),
            "failed": [
                {"file": f, "status": s, "reason": r}
                for f, s, r in self.con.execute(
                    f"SELECT file, status, reason FROM traces WHERE status <> '{TraceStatus.ok}' ORDER BY file"
                ).fetchall()
            ],
        }
