"""Store IR collections in the results history: normalize, then write through :class:`IrStore`."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.errors import PerfqError
from perfq.ir.normalize import NORMALIZER_VERSION, normalize_ir
from schema.engine import duckdb
from schema.history import connect_history
from schema.ir_store import IrRecordRow, IrStore, LabelSummary


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
    rows = [_row(label, collection_id, commit, r) for r in records]
    try:
        IrStore(con).add_collection(collection_id, label, source, ",".join(versions), commit,
                                    json.dumps(details or {}, default=str), rows)
    except (duckdb.Error, KeyboardInterrupt) as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise PerfqError("interrupted; nothing stored", exit_code=130) from None
        raise PerfqError(f"cannot store IR collection: {str(exc).splitlines()[0]}") from None
    finally:
        con.close()
    return collection_id


def _row(label: str, collection_id: str, commit: str, r: IRRecord) -> IrRecordRow:
    normalized = normalize_ir(r.raw, r.stage)
    return IrRecordRow(
        label, r.kernel, r.specialization, r.target, r.stage, collection_id, r.source_file, r.function,
        r.source_hash, r.triton_version, commit, json.dumps(r.spec, sort_keys=True, default=str), r.raw,
        normalized, NORMALIZER_VERSION, _sha(r.raw), _sha(normalized),
    )


def open_for_reading(history: Path) -> duckdb.DuckDBPyConnection:
    """The history DB, migrated (so ``ir_records`` exists); a missing file is an error."""
    if not history.exists():
        raise PerfqError(f"no history database at {history}; run `perfq ir collect` first")
    return connect_history(history)


def labels(con: duckdb.DuckDBPyConnection) -> list[LabelSummary]:
    """Every stored label with its number of IRs and Triton versions."""
    return IrStore(con).labels()
