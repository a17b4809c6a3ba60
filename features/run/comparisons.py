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


def _pick_side(runs: list, wanted: str, label: str) -> list:
    """The runs of ``wanted`` side ('' : head when the label has one, else its only side)."""
    sides = {r.side for r in runs}
    side = wanted or ("head" if "head" in sides else next(iter(sorted(sides)), ""))
    if side not in ("base", "head"):
        raise PerfqError(f"side {side!r}: expected base or head")
    picked = [r for r in runs if r.side == side]
    if not picked:
        raise PerfqError(f"label {label!r} has no {side} run (it has: {', '.join(sorted(sides)) or 'none'})")
    return picked


def comparison_against(history: Path, label: str, baseline: str, settings: Settings) -> ComparisonDocument:
    """LABEL's head (or only) side compared with a stored run: ``baseline`` is ``OTHER`` or ``OTHER:side``.

    The baseline's side defaults to its head (its only side when it has one), e.g. last night's
    ``perfq run --label nightly-2024-06-01 --side head`` of main.
    """
    other, _, other_side = baseline.partition(":")
    if not other:
        raise PerfqError("--baseline takes a label: OTHER or OTHER:base|head")
    runs = runs_for_label(history, label)
    if not runs:
        raise PerfqError(f"no runs labelled {label!r} in {history}")
    old = runs_for_label(history, other)
    if not old:
        raise PerfqError(f"no runs labelled {other!r} (the baseline) in {history}")
    head, base = _pick_side(runs, "", label), _pick_side(old, other_side, other)
    result = compare_samples(
        [p for r in base for p in samples_as_pairs(r)],
        [p for r in head for p in samples_as_pairs(r)],
        settings,
    )
    return comparison_document(f"{label}:{head[0].side} vs {other}:{base[0].side}", base, head, result)
