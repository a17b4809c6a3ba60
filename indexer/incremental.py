"""Patching an index in place for body-only C++ edits (the common one-file change).

When every changed file is C++ and still declares the same functions, stubs and
registrations (same structure signature), only its own call sites need resolving
again: the patch copies the index, replaces that file's functions' lines, calls,
call edges, operator calls and graph edges, and swaps the copy in atomically. Any
other change (added or removed files, Python, benchmarks, yaml, config) falls back
to a full link from the facts cache.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import duckdb

from perfq.indexer.extract import file_facts
from perfq.indexer.facts import FileFacts, structure_signature
from perfq.indexer.link_cpp import CppCallLinker
from perfq.schema.version import SCHEMA_VERSION
from perfq.schema.writer import insert_rows, replacing

MAX_PATCHED_FILES = 25


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def patch_index(
    repo: Path, db_path: Path, discovered: dict[str, list[str]], meta: dict[str, str]
) -> tuple[int, dict[str, float]] | None:
    """Patch ``db_path`` for the files changed since it was built, or None when a full
    build is needed. Returns (files re-parsed, phase timings)."""
    timings: dict[str, float] = {}
    started = time.perf_counter()
    try:
        con = duckdb.connect(str(db_path), read_only=True)
    except duckdb.Error:
        return None
    try:
        old_meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        if old_meta.get("schema_version") != str(SCHEMA_VERSION):
            return None
        if any(old_meta.get(k) != v for k, v in meta.items() if k.startswith(("config", "source_sha:", "canaries"))):
            return None
        files = {
            p: (i, sha, sig)
            for i, p, sha, sig in con.execute("SELECT id, path, sha256, signature FROM files").fetchall()
        }
        benches = dict(con.execute("SELECT file, sha256 FROM benchmarks").fetchall())
    except duckdb.Error:
        return None
    finally:
        con.close()
    if set(discovered["cpp"]) | set(discovered["python"]) != set(files) or set(discovered["benchmark"]) != set(benches):
        return None
    if any(_digest(repo / p) != benches[p] for p in discovered["benchmark"]):
        return None
    changed = [p for p in files if _digest(repo / p) != files[p][1]]
    timings["hash"] = time.perf_counter() - started
    if len(changed) > MAX_PATCHED_FILES or any(p.endswith(".py") for p in changed):
        return None
    t0 = time.perf_counter()
    new_facts: dict[str, FileFacts] = {}
    for path in changed:
        facts = file_facts("cpp", path, (repo / path).read_bytes())
        if not isinstance(facts, FileFacts) or facts.status != "ok" or structure_signature(facts) != files[path][2]:
            return None
        new_facts[path] = facts
    timings["extract"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    with replacing(db_path, copy_existing=True) as con:
        _apply(con, {files[p][0]: f for p, f in new_facts.items()}, {**meta, "reparsed_files": str(len(changed))})
    timings["link"] = time.perf_counter() - t1
    timings["total"] = time.perf_counter() - started
    return len(changed), timings


def _apply(con: duckdb.DuckDBPyConnection, changed: dict[int, FileFacts], meta: dict[str, str]) -> None:
    functions = con.execute(
        "SELECT f.id, f.file_id, f.qualname, f.name, f.kind, f.internal, fi.lang <> 'python',"
        " fi.path LIKE '%.h' OR fi.path LIKE '%.hpp' OR fi.path LIKE '%.cuh', f.usr"
        " FROM functions f JOIN files fi ON fi.id = f.file_id"
    ).fetchall()
    ops = con.execute("SELECT name, base, overload, variants FROM ops WHERE namespace = 'aten'").fetchall()
    stub_names = {r[0] for r in con.execute("SELECT stub FROM stubs UNION SELECT stub FROM stub_impls").fetchall()}
    nodes = {
        (k, key): i
        for i, k, key in con.execute("SELECT id, kind, key FROM nodes WHERE kind IN ('op', 'stub')").fetchall()
    }
    next_node = [con.execute("SELECT coalesce(max(id), -1) + 1 FROM nodes").fetchone()[0]]
    new_nodes: list[tuple] = []

    def node_of(kind: str, key: str) -> int:
        nid = nodes.get((kind, key))
        if nid is None:
            nid = nodes[(kind, key)] = next_node[0]
            next_node[0] += 1
            new_nodes.append((nid, kind, key, key))
        return nid

    linker = CppCallLinker(functions, ops, stub_names, node_of)
    for file_id, facts in changed.items():
        ids = [
            r[0] for r in con.execute("SELECT id FROM functions WHERE file_id = ? ORDER BY id", [file_id]).fetchall()
        ]
        base = ids[0] if ids else 0
        con.execute("BEGIN TRANSACTION")
        for table, column in (("calls", "caller_id"), ("call_edges", "caller_id"), ("op_calls", "function_id")):
            con.execute(f"DELETE FROM {table} WHERE {column} IN (SELECT unnest(?::INTEGER[]))", [ids])
        con.execute(
            "DELETE FROM reach_edges WHERE src IN (SELECT unnest(?::INTEGER[]))"
            " AND kind IN ('call', 'stub_call', 'op_call')",
            [ids],
        )
        usings = tuple(i[6:] for i in facts.includes if i.startswith("using:"))
        linked = linker.link_file(file_id, base, facts.calls, usings)
        seen: set[tuple[int, int]] = set()
        reach = []
        for dst, src, kind, detail in linked.reach:
            if dst != src and (dst, src) not in seen:
                seen.add((dst, src))
                reach.append((dst, src, kind, detail))
        insert_rows(con, "nodes", new_nodes)
        new_nodes.clear()
        insert_rows(con, "calls", linked.calls)
        insert_rows(con, "call_edges", linked.call_edges)
        insert_rows(con, "op_calls", linked.op_calls)
        insert_rows(con, "reach_edges", reach)
        con.executemany(
            "UPDATE functions SET start_line = ?, end_line = ? WHERE id = ?",
            [[f.start_line, f.end_line, base + i] for i, f in enumerate(facts.functions)],
        )
        con.execute("UPDATE files SET sha256 = ?, n_lines = ? WHERE id = ?", [facts.sha256, facts.n_lines, file_id])
        con.execute("COMMIT")
    for key, value in meta.items():
        con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", [key, value])
    con.execute("INSERT OR REPLACE INTO meta VALUES ('patched', ?)", [json.dumps(sorted(changed))])
