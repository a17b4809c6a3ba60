"""Read the facts `perfq coverage` needs from an index database (read-only SQL, no side effects)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import duckdb

from perfq.coverage.report import CoverageFacts, OpFact


def load_facts(con: duckdb.DuckDBPyConnection) -> CoverageFacts:
    """Operators with their dispatch keys and kernel functions, kernel sizes and paths, benchmark links."""
    keys: dict[str, set[str]] = defaultdict(set)
    kfuncs: dict[str, set[int]] = defaultdict(set)
    for op, key, fid in con.execute("SELECT op, dispatch_key, function_id FROM kernels").fetchall():
        keys[op].add(key)
        if fid is not None:
            kfuncs[op].add(int(fid))
    facts = CoverageFacts()
    rows = con.execute("SELECT name, base, overload, namespace, schema, composite FROM ops").fetchall()
    for name, base, overload, namespace, schema, composite in rows:
        op_keys = set(keys.get(name, ()))
        if composite:
            op_keys.add(composite)
        facts.ops[name] = OpFact(
            name=name,
            base=base,
            overload=overload or "",
            namespace=namespace,
            schema=schema,
            dispatch_keys=tuple(sorted(op_keys)),
            kernel_functions=tuple(sorted(kfuncs.get(name, ()))),
        )
    for fid, lines, path in con.execute(
        """SELECT f.id, f.end_line - f.start_line + 1, fi.path
           FROM functions f JOIN files fi ON fi.id = f.file_id
           WHERE f.id IN (SELECT function_id FROM kernels WHERE function_id IS NOT NULL)"""
    ).fetchall():
        facts.function_lines[int(fid)] = int(lines)
        facts.function_paths[int(fid)] = path
    for name, file in con.execute("SELECT name, file FROM benchmarks").fetchall():
        facts.bench_files[name] = file
        facts.bench_ops.setdefault(name, set())
    for bench, op, source in con.execute("SELECT DISTINCT bench, op, source FROM bench_ops").fetchall():
        facts.bench_ops.setdefault(bench, set()).add(op)
        facts.link_sources.setdefault((bench, op), set()).add(source)
    return facts


def indexed_paths(con: duckdb.DuckDBPyConnection) -> set[str]:
    """Repo-relative paths of every indexed file that has functions."""
    rows = con.execute(
        "SELECT DISTINCT fi.path FROM files fi JOIN functions f ON f.file_id = fi.id"
    ).fetchall()
    return {r[0] for r in rows}


def function_extents(
    con: duckdb.DuckDBPyConnection, paths: Iterable[str]
) -> dict[str, list[tuple[int, int, int]]]:
    """path -> [(start_line, end_line, function_id)] sorted by start, for the given paths."""
    wanted = sorted(set(paths))
    out: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    if not wanted:
        return {}
    for path, start, end, fid in con.execute(
        """SELECT fi.path, f.start_line, f.end_line, f.id
           FROM functions f JOIN files fi ON fi.id = f.file_id
           WHERE fi.path IN (SELECT unnest(?))
           ORDER BY fi.path, f.start_line, f.end_line""",
        [wanted],
    ).fetchall():
        out[path].append((int(start), int(end), int(fid)))
    return dict(out)


def reach_graph(
    con: duckdb.DuckDBPyConnection,
) -> tuple[list[tuple[int, int]], dict[int, str], dict[int, int]]:
    """(edges as (dst, src), op node id -> op name, function id -> node id)."""
    edges = [(int(d), int(s)) for d, s in con.execute("SELECT dst, src FROM reach_edges").fetchall()]
    op_nodes = {int(i): k for i, k in con.execute("SELECT id, key FROM nodes WHERE kind = 'op'").fetchall()}
    fn_nodes = {
        int(fid): int(nid)
        for nid, fid in con.execute(
            "SELECT id, TRY_CAST(key AS BIGINT) FROM nodes WHERE kind = 'function'"
        ).fetchall()
        if fid is not None
    }
    return edges, op_nodes, fn_nodes
