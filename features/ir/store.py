"""Store IR collections in the results history (tables of migration 0002_ir.sql)."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from perfq.errors import PerfqError
from perfq.ir.normalize import NORMALIZER_VERSION, normalize_ir
from perfq.schema.history import connect_history


@dataclass
class IRRecord:
    """One IR text with everything needed to compare it across refs."""

    kernel: str
    specialization: str
    target: str
    stage: str
    raw: str
    source_file: str = ""
    function: str = ""
    source_hash: str = ""
    triton_version: str = ""
    spec: dict[str, Any] = field(default_factory=dict)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def store_collection(
    history: Path,
    label: str,
    source: str,
    records: list[IRRecord],
    commit: str = "",
    details: dict[str, Any] | None = None,
) -> str:
    """Add ``records`` under ``label`` (replacing the same keys), in one transaction.

    Returns the collection id. Records of other keys already under ``label`` are kept.
    """
    if not label.strip():
        raise PerfqError("the label must not be empty")
    con = connect_history(history)
    collection_id = uuid.uuid4().hex
    versions = sorted({r.triton_version for r in records if r.triton_version})
    rows = []
    for r in records:
        normalized = normalize_ir(r.raw, r.stage)
        rows.append([
            label, r.kernel, r.specialization, r.target, r.stage, collection_id, r.source_file,
            r.function, r.source_hash, r.triton_version, commit, json.dumps(r.spec, sort_keys=True,
            default=str), r.raw, normalized, NORMALIZER_VERSION, _sha(r.raw), _sha(normalized),
        ])
    try:
        con.execute("BEGIN TRANSACTION")
        con.execute(
            "INSERT INTO ir_collections (id, label, source, triton_version, commit_sha, details)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [collection_id, label, source, ",".join(versions), commit,
             json.dumps(details or {}, default=str)],
        )
        if rows:
            con.executemany(
                "INSERT OR REPLACE INTO ir_records (label, kernel, specialization, target, stage,"
                " collection_id, source_file, function, source_hash, triton_version, commit_sha,"
                " spec_json, raw_text, normalized_text, normalizer_version, raw_sha, normalized_sha)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        con.execute("COMMIT")
    except (duckdb.Error, KeyboardInterrupt) as exc:
        con.execute("ROLLBACK")
        if isinstance(exc, KeyboardInterrupt):
            raise PerfqError("interrupted; nothing stored", exit_code=130) from None
        raise PerfqError(f"cannot store IR collection: {str(exc).splitlines()[0]}") from None
    finally:
        con.close()
    return collection_id


def open_for_reading(history: Path) -> duckdb.DuckDBPyConnection:
    """The history DB, migrated (so ``ir_records`` exists); a missing file is an error."""
    if not history.exists():
        raise PerfqError(f"no history database at {history}; run `perfq ir collect` first")
    return connect_history(history)


def labels(con: duckdb.DuckDBPyConnection) -> list[tuple[str, int, str]]:
    """(label, number of IRs, triton versions) of every stored label."""
    return con.execute(
        "SELECT label, count(*), string_agg(DISTINCT triton_version, ',') FROM ir_records"
        " GROUP BY label ORDER BY label"
    ).fetchall()


def record_metadata(con: duckdb.DuckDBPyConnection, label: str) -> dict[tuple[str, str, str, str], dict]:
    """Metadata (source file, function, hash, triton version, commit) per key of ``label``."""
    rows = con.execute(
        "SELECT kernel, specialization, target, stage, source_file, function, source_hash,"
        " triton_version, commit_sha FROM ir_records WHERE label = ?",
        [label],
    ).fetchall()
    return {
        (k, s, t, st): {"source_file": f, "function": fn, "source_hash": h, "triton_version": v, "commit": c}
        for k, s, t, st, f, fn, h, v, c in rows
    }
