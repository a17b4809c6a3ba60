"""IR collections in the results history (tables of migration 0002_ir.sql): the one place that
reads or writes ``ir_collections`` and ``ir_records``."""

from __future__ import annotations

from typing import NamedTuple

from schema.db import transaction
from schema.engine import duckdb

IR_RECORD_COLUMNS = (
    "label", "kernel", "specialization", "target", "stage", "collection_id", "source_file", "function",
    "source_hash", "triton_version", "commit_sha", "spec_json", "raw_text", "normalized_text",
    "normalizer_version", "raw_sha", "normalized_sha",
)


class IrRecordRow(NamedTuple):
    """One row of ``ir_records``."""

    label: str
    kernel: str
    specialization: str
    target: str
    stage: str
    collection_id: str
    source_file: str
    function: str
    source_hash: str
    triton_version: str
    commit_sha: str
    spec_json: str
    raw_text: str
    normalized_text: str
    normalizer_version: int | None
    raw_sha: str
    normalized_sha: str


class IrText(NamedTuple):
    """The texts of one stored IR, keyed by (kernel, specialization, target, stage)."""

    kernel: str
    specialization: str
    target: str
    stage: str
    raw_text: str
    normalized_text: str
    normalizer_version: int | None


class LabelSummary(NamedTuple):
    label: str
    irs: int
    triton_version: str


class IrStore:
    """Named queries on the IR tables of an open history connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def add_collection(self, collection_id: str, label: str, source: str, triton_version: str, commit: str,
                       details_json: str, rows: list[IrRecordRow]) -> None:
        """One collection and its records (replacing records of the same key), in one transaction."""
        with transaction(self.con):
            self.con.execute(
                "INSERT INTO ir_collections (id, label, source, triton_version, commit_sha, details)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [collection_id, label, source, triton_version, commit, details_json],
            )
            if rows:
                self.con.executemany(
                    f"INSERT OR REPLACE INTO ir_records ({', '.join(IR_RECORD_COLUMNS)})"
                    f" VALUES ({', '.join('?' for _ in IR_RECORD_COLUMNS)})",
                    [list(r) for r in rows],
                )

    def labels(self) -> list[LabelSummary]:
        """Every stored label with its number of IRs and Triton versions."""
        return [LabelSummary(*r) for r in self.con.execute(
            "SELECT label, count(*), string_agg(DISTINCT triton_version, ',') FROM ir_records"
            " GROUP BY label ORDER BY label"
        ).fetchall()]

    def texts(self, label: str) -> list[IrText]:
        """Every IR text stored under ``label``."""
        return [IrText(*r) for r in self.con.execute(
            "SELECT kernel, specialization, target, stage, raw_text, normalized_text, normalizer_version"
            " FROM ir_records WHERE label = ?",
            [label],
        ).fetchall()]
