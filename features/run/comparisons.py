"""A label's stored runs compared: the comparison document of `perfq compare` (and of `perfq run --ab`)."""

from __future__ import annotations

from pathlib import Path

from perfq.errors import PerfqError
from perfq.run.compare import SampleColumns, Settings, SideFailures, TestKey, compare_columns
from perfq.run.report import ComparisonDocument, comparison_document
from perfq.schema.results_store import Run, label_samples, runs_for_label


def side_failures(base: list[Run], head: list[Run]) -> SideFailures:
    """The benchmarks that failed on each side, and the sides without a run."""
    return SideFailures(frozenset(f.benchmark for r in base for f in r.failures),
                        frozenset(f.benchmark for r in head for f in r.failures), not base, not head)


def comparison_for_label(history: Path, label: str, settings: Settings) -> ComparisonDocument:
    """Load a label's runs (without their samples) and its samples as columns; build the comparison document.

    A side without a run, or benchmarks that failed, are part of the document (the gate fails on them).
    """
    runs = runs_for_label(history, label, with_samples=False)
    if not runs:
        raise PerfqError(f"no runs labelled {label!r} in {history}")
    base = [r for r in runs if r.side == "base"]
    head = [r for r in runs if r.side == "head"]
    stored = label_samples(history, label)
    columns = SampleColumns([TestKey(*k) for k in stored.keys], stored.key, stored.head, stored.value)
    return comparison_document(label, base, head, compare_columns(columns, settings, side_failures(base, head)))
