"""Stored runs compared: the comparison document of `perfq compare` (and of `perfq run --ab`),
a label's two sides or a label against a stored baseline."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from common.config import load_config
from common.errors import PerfqError
from perfq.run.compare import SampleColumns, Settings, SideFailures, TestKey, compare_columns, settings_from_config
from perfq.run.report import ComparisonDocument, comparison_document
from perfq.run.runs import Run
from perfq.run.store import runs_for_label
from schema.db import damage_is_an_error
from schema.results_rows import Side
from schema.results_store import side_samples


def settings(repo: Path, alpha: float | None = None, min_effect: float | None = None,
             max_samples: int | None = None) -> Settings:
    """The comparison's settings: ``[tool.perfq.compare]`` of ``repo``, overridden by the options given."""
    try:
        return settings_from_config(load_config(repo).extra, alpha=alpha, min_effect=min_effect,
                                    max_samples=max_samples)
    except (ValueError, TypeError) as exc:
        raise PerfqError(f"bad [tool.perfq.compare] config: {exc}") from None


def side_failures(base: list[Run], head: list[Run]) -> SideFailures:
    """The benchmarks that failed on each side, and the sides without a run."""
    return SideFailures(frozenset(f.benchmark for r in base for f in r.failures),
                        frozenset(f.benchmark for r in head for f in r.failures), not base, not head)


def _runs(history: Path, label: str, role: str = "") -> list[Run]:
    """A label's runs without their samples; a PerfqError when there is none."""
    with damage_is_an_error(history):
        runs = runs_for_label(history, label, with_samples=False)
    if not runs:
        raise PerfqError(f"no runs labelled {label!r}{role} in {history}")
    return runs


def sampled_settings(settings: Settings, runs: list[Run]) -> Settings:
    """``settings`` with where the runs' sampling stopped, as they stored it (their ``max_samples``, their
    ceiling: ``--max-repeat``, or the extension within a budget), so that compare gives the reasons run gave;
    runs stored before perfq kept it leave ``settings`` as they are."""
    stored = [r.max_samples for r in runs if r.max_samples]
    ceilings = [r.sample_ceiling for r in runs if r.sample_ceiling]
    return replace(settings, max_samples=max(stored, default=settings.max_samples),
                   ceiling=max(ceilings, default=None))


def _document(history: Path, name: str, sides: tuple[tuple[str, str], tuple[str, str]], base: list[Run],
              head: list[Run], settings: Settings, against_baseline: bool = False) -> ComparisonDocument:
    """The comparison of two stored sides, each a (label, side) with its runs, on sample columns."""
    with damage_is_an_error(history):
        stored = side_samples(history, *sides)
    columns = SampleColumns([TestKey(*k) for k in stored.keys], stored.key, stored.head, stored.value, stored.group)
    result = compare_columns(columns, sampled_settings(settings, base + head), side_failures(base, head))
    return comparison_document(name, base, head, result, against_baseline, renamed_note(stored.renamed))


def renamed_note(renamed: int) -> tuple[str, ...]:
    """The warning for test names stored with an object's address (by a perfq before they were masked)."""
    if not renamed:
        return ()
    return (f"{renamed} stored test name(s) held an object's address (<function<lambda>at0x...>, written before "
            "perfq masked them) and were read in their stable form (<function<lambda>>)",)


def comparison_for_label(history: Path, label: str, settings: Settings) -> ComparisonDocument:
    """Load a label's runs (without their samples) and its samples as columns; build the comparison document.

    A side without a run, or benchmarks that failed, are part of the document (the gate fails on them).
    """
    runs = _runs(history, label)
    base = [r for r in runs if r.side == "base"]
    head = [r for r in runs if r.side == "head"]
    return _document(history, label, ((label, "base"), (label, "head")), base, head, settings)


def _pick_side(runs: list[Run], wanted: str, label: str) -> list[Run]:
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
    runs = _runs(history, label)
    old = _runs(history, other, " (the baseline)")
    head, base = _pick_side(runs, "", label), _pick_side(old, other_side, other)
    head_side, base_side = Side(head[0].side).value, Side(base[0].side).value
    if (other, base_side) == (label, head_side):
        raise PerfqError(f"--baseline {baseline} is the side being compared; name another label or side")
    name = f"{label}:{head_side} vs {other}:{base_side}"
    return _document(history, name, ((other, base_side), (label, head_side)), base, head, settings, True)


def compared_runs(history: Path, doc: ComparisonDocument, labels: tuple[str, ...]) -> list[Run]:
    """The runs of both sides of ``doc`` with their samples, base first; ``labels``: where they are stored."""
    by_id = {r.id: r for label in dict.fromkeys(x for x in labels if x) for r in runs_for_label(history, label)}
    return [by_id[i] for i in (*doc.base.runs, *doc.head.runs) if i in by_id]
