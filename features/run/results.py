"""The portable result file (``perfq run --out``) and ``perfq import``.

A run's id travels with the export, so merging the result files of many CI jobs into one
history is idempotent (see :mod:`perfq.schema.results_store`).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from perfq.errors import PerfqError
from perfq.schema.results_store import Run, load_duckdb, run_from_dict, save_runs

EXPORT_FORMAT = "perfq-results"
EXPORT_VERSION = 1


def export_runs(runs: list[Run], path: Path) -> None:
    """Write the portable JSON result file (``perfq run --out``)."""
    doc = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "runs": [asdict(run) for run in runs],
    }
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str), encoding="utf-8")
    tmp.replace(path)


def load_export(path: Path) -> list[Run]:
    """Runs from a JSON result file; a malformed file is a PerfqError."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PerfqError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise PerfqError(f"{path}: not a perfq result file (bad JSON: {exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != EXPORT_FORMAT or not isinstance(doc.get("runs"), list):
        raise PerfqError(f"{path}: not a perfq result file (expected format {EXPORT_FORMAT!r})")
    try:
        return [run_from_dict(r) for r in doc["runs"]]
    except (TypeError, AttributeError) as exc:
        raise PerfqError(f"{path}: malformed run record ({exc})") from None


def load_file(path: Path) -> list[Run]:
    """Runs from a result file: JSON export or a DuckDB history."""
    if not path.is_file():
        raise PerfqError(f"no such result file: {path}")
    with path.open("rb") as fh:
        head = fh.read(16)
    if head[8:12] == b"DUCK":
        return load_duckdb(path)
    return load_export(path)


def import_files(history: Path, files: list[Path]) -> dict[str, int]:
    """Merge result files into the history; re-importing the same file adds nothing."""
    runs: list[Run] = []
    for path in files:
        runs.extend(load_file(path))
    new_runs, new_samples, new_failures = save_runs(history, runs)
    return {
        "files": len(files),
        "runs_seen": len(runs),
        "runs_added": new_runs,
        "samples_added": new_samples,
        "failures_added": new_failures,
    }
