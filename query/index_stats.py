"""``perfq stats``: table counts, resolution rates and timings of an index."""

from __future__ import annotations

import duckdb

TABLES = (
    "files",
    "functions",
    "calls",
    "call_edges",
    "ops",
    "kernels",
    "stubs",
    "stub_impls",
    "library_impls",
    "op_calls",
    "op_edges",
    "benchmarks",
    "bench_ops",
    "bench_calls",
    "traces",
    "bench_tests",
    "trace_ops",
    "nodes",
    "reach_edges",
    "warnings",
)


def _rate(con: duckdb.DuckDBPyConnection, sql: str) -> str:
    resolved, total = con.execute(sql).fetchone()
    return f"{resolved}/{total} ({100.0 * resolved / total:.1f}%)" if total else "0/0"


def index_stats(con: duckdb.DuckDBPyConnection) -> dict:
    """Counts per table, resolution rates, unresolved examples and timings."""
    counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
    resolution = {
        "stub impls resolved": _rate(con, "SELECT count(function_id), count(*) FROM stub_impls"),
        "CPU/CUDA kernels resolved": _rate(
            con, "SELECT count(function_id), count(*) FROM kernels WHERE dispatch_key IN ('CPU', 'CUDA')"
        ),
        "all dispatch kernels resolved": _rate(con, "SELECT count(function_id), count(*) FROM kernels"),
        "library impls resolved": _rate(con, "SELECT count(function_id), count(*) FROM library_impls"),
    }
    unresolved = {
        "kernels": [
            r[0]
            for r in con.execute(
                "SELECT DISTINCT kernel_name FROM kernels WHERE function_id IS NULL AND dispatch_key IN ('CPU','CUDA')"
                " ORDER BY 1 LIMIT 20"
            ).fetchall()
        ],
        "stubs without registration": [
            r[0]
            for r in con.execute(
                "SELECT DISTINCT stub FROM stubs WHERE role = 'declare' AND stub NOT IN (SELECT stub FROM stub_impls)"
                " ORDER BY 1 LIMIT 20"
            ).fetchall()
        ],
    }
    traces = {
        "files": con.execute("SELECT count(*) FROM traces").fetchone()[0],
        "ok": con.execute("SELECT count(*) FROM traces WHERE status = 'ok'").fetchone()[0],
        "tests": con.execute("SELECT count(*) FROM bench_tests").fetchone()[0],
        "by_mode": dict(con.execute("SELECT mode, count(*) FROM bench_tests GROUP BY 1 ORDER BY 1").fetchall()),
        "failed": [
            {"file": f, "status": s, "reason": r}
            for f, s, r in con.execute(
                "SELECT file, status, reason FROM traces WHERE status <> 'ok' ORDER BY file"
            ).fetchall()
        ],
    }
    meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
    timings = {k[5:]: v for k, v in meta.items() if k.startswith("time_")}
    return {
        "counts": counts,
        "resolution": resolution,
        "unresolved": unresolved,
        "traces": traces,
        "timings": timings,
        "indexed_commit": meta.get("indexed_commit", ""),
        "built_at": meta.get("built_at", ""),
    }
