"""``perfq stats``: table counts, resolution rates and timings of an index."""

from __future__ import annotations

from schema.engine import duckdb
from schema.index_store import IndexStore
from schema.version import INDEX_TABLES

# every table of rows (in index.sql order, a rule's own included): not the build's meta or the packed graph
STATS_TABLES = tuple(t for t in INDEX_TABLES if t not in ("meta", "graph"))


def _rate(resolved: int, total: int) -> str:
    return f"{resolved}/{total} ({100.0 * resolved / total:.1f}%)" if total else "0/0"


_NATIVE_KEYS = ("tests", "failed", "samples", "samples_mapped", "frames", "frames_mapped")


def _native(meta: dict[str, str]) -> dict[str, int]:
    """Native sampling's counts (``perfq index --native``): all 0 without it."""
    return {k: int(meta.get(f"native_{k}", "0") or 0) for k in _NATIVE_KEYS}


def index_stats(con: duckdb.DuckDBPyConnection) -> dict:
    """Counts per table, resolution rates, unresolved examples, benchmark traces and timings."""
    store = IndexStore(con)
    meta = store.meta()
    return {
        "counts": store.table_counts(STATS_TABLES),
        "resolution": {name: _rate(*pair) for name, pair in store.resolution().items()},
        "unresolved": {
            "kernels": store.unresolved_kernels(),
            "stubs without registration": store.unregistered_stubs(),
        },
        "skipped_files": [{"file": path, "reason": why} for path, why in store.skipped_files()],
        "traces": store.trace_summary(),
        "native": _native(meta),
        "timings": {k[5:]: v for k, v in meta.items() if k.startswith("time_")},
        "indexed_commit": meta.get("indexed_commit", ""),
        "built_at": meta.get("built_at", ""),
    }
