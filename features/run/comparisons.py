"""A label's stored runs compared: the comparison document of `perfq compare` (and of `perfq run --ab`)."""

from __future__ import annotations

from pathlib import Path

from perfq.errors import PerfqError
from perfq.run.compare import Settings, compare_samples
from perfq.run.execute import samples_as_pairs
from perfq.run.report import ComparisonDocument, comparison_document
from perfq.schema.results_store import runs_for_label


def comparison_for_label(history: Path, label: str, settings: Settings) -> ComparisonDocument:
    """Load a label's runs and build the comparison document."""

    runs = runs_for_label(history, label)
    if not runs:
        raise PerfqError(f"no runs labelled {label!r} in {history}")
    base = [r for r in runs if r.side == "base"]
    head = [r for r in runs if r.side == "head"]
    if not base or not head:
        missing = "base" if not base else "head"
        raise PerfqError(f"label {label!r} has no {missing} run yet (perfq run --label {label} --side {missing})")
    result = compare_samples(
        [p for r in base for p in samples_as_pairs(r)],
        [p for r in head for p in samples_as_pairs(r)],
        settings,
    )
    return comparison_document(label, base, head, result)
