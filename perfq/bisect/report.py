"""The ``perfq bisect`` report: a typed document (the JSON of ``--format json``) and its text and
markdown renderings (pure)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from common.documents import to_json
from common.render import fixed, md_code, md_text
from perfq.bisect.hints import Hint
from perfq.bisect.search import Outcome, estimated_steps, relative_change


class BisectStatus(str, Enum):
    """Whether ``first_bad`` can be trusted, or why there is none."""

    found = "found"
    ambiguous = "ambiguous"
    noise = "noise"
    swapped = "swapped"
    failures = "failures"
    baseline_failed = "baseline_failed"
    pruned_culprit = "pruned_culprit"


class StepVerdict(str, Enum):
    good = "good"
    bad = "bad"
    skip = "skip"
    ambiguous = "ambiguous"


class Phase(str, Enum):
    baseline = "baseline"
    search = "search"
    extra = "extra"
    verify = "verify"
    resolve = "resolve"


@dataclass(frozen=True)
class FirstBad:
    commit: str
    subject: str
    value: float | None
    author: str
    date: str
    change: float | None = field(default=None, metadata={"omit_if_none": True})  # against the last good commit


@dataclass(frozen=True)
class LastGood:
    commit: str
    value: float | None
    subject: str


@dataclass(frozen=True)
class StepRecord:
    """One measurement of one commit and the verdict it led to."""

    commit: str
    values: tuple[float, ...]
    verdict: StepVerdict
    phase: Phase
    note: str


@dataclass(frozen=True)
class RangeInfo:
    good: str
    bad: str
    commits: int


@dataclass(frozen=True)
class Baseline:
    good: float | None
    bad: float | None
    threshold: float | None
    change: float | None


@dataclass(frozen=True)
class MetricInfo:
    unit: str | None
    lower_is_better: bool
    polarity: str | None


@dataclass(frozen=True)
class Pruned:
    commits: int
    candidates: int
    runs_saved_estimate: int


@dataclass(frozen=True)
class FileStat:
    """A file the first bad commit changed (``None``: binary)."""

    path: str
    added: int | None
    removed: int | None


@dataclass(frozen=True)
class BisectReport:
    """The `perfq bisect --format json` document."""

    status: BisectStatus
    message: str
    first_bad: FirstBad | None
    last_good: LastGood | None
    steps: tuple[StepRecord, ...]
    skipped: tuple[str, ...]
    ambiguous: tuple[str, ...]
    suspects: tuple[str, ...]
    runs: int
    range: RangeInfo
    baseline: Baseline
    metric: MetricInfo
    pruned: Pruned
    via_merge: str | None
    session: str
    last_error: str | None
    files: tuple[FileStat, ...] = ()
    hints: tuple[Hint, ...] = ()

    @property
    def found(self) -> bool:
        """Whether a first bad commit is reported (``found`` or ``ambiguous``)."""
        return self.status in (BisectStatus.found, BisectStatus.ambiguous)

    def to_json(self) -> dict[str, Any]:
        return to_json(self)


def finite(x: float) -> float | None:
    """``x``, or None when it is infinite/NaN (JSON has no Infinity)."""
    return x if math.isfinite(x) else None


def runs_saved(out: Outcome, runs_per_step: int) -> int:
    """About how many benchmark runs pruning saved: bisection steps it removed x runs per step."""
    if not out.pruned:
        return 0
    saved = estimated_steps(out.candidates + out.pruned) - estimated_steps(out.candidates)
    return max(0, saved) * runs_per_step


def steps_of(*outcomes: Outcome | None) -> tuple[StepRecord, ...]:
    return tuple(StepRecord(s.commit, tuple(s.values), StepVerdict(s.verdict), Phase(s.phase), s.note)
                 for o in outcomes if o is not None for s in o.steps)


def baseline_of(out: Outcome) -> Baseline:
    change = None
    if out.good_value is not None and out.bad_value is not None:
        change = finite(relative_change(out.good_value, out.bad_value))
    return Baseline(out.good_value, out.bad_value, out.threshold_value, change)


# --- rendering ---------------------------------------------------------------------------


def _v(x: float | None) -> str:
    return "-" if x is None else fixed(x)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:+.1f}%"


def _headline(doc: BisectReport) -> list[str]:
    fb, lg, unit = doc.first_bad, doc.last_good, doc.metric.unit or ""
    lines = []
    if fb and doc.found:
        lines.append(f"first bad commit: {fb.commit}")
        lines.append(f"  {fb.subject}")
        if fb.author:
            lines.append(f"  author {fb.author}, {fb.date}")
        if lg:
            lines.append(f"last good commit: {lg.commit[:12]}  {lg.subject}")
            lines.append(f"value: {_v(lg.value)} -> {_v(fb.value)} {unit} ({_pct(fb.change)})")
    if doc.via_merge:
        lines.append(f"(brought in by merge {doc.via_merge[:12]})")
    return lines


def render_text(doc: BisectReport) -> str:
    """A plain-text report for a terminal."""
    base, unit = doc.baseline, doc.metric.unit or ""
    out = [f"status: {doc.status.value}: {doc.message}"]
    if doc.last_error and doc.status in (BisectStatus.failures, BisectStatus.baseline_failed):
        out.append(f"last failure: {doc.last_error}")
    out += _headline(doc)
    if len(doc.suspects) > 1:
        out.append("the first bad commit is one of: " + ", ".join(c[:12] for c in doc.suspects))
    out.append(f"baselines: good {_v(base.good)} {unit}, bad {_v(base.bad)} {unit} "
               f"({_pct(base.change)}); threshold {_v(base.threshold)}; "
               f"{doc.metric.polarity or ''}")
    if doc.pruned.commits:
        out.append(f"pruned {doc.pruned.commits} commit(s) that cannot reach the benchmark "
                   f"({doc.pruned.candidates} candidates); about {doc.pruned.runs_saved_estimate} run(s) saved")
    out.append(f"benchmark runs: {doc.runs}; skipped: {len(doc.skipped)}; ambiguous: {len(doc.ambiguous)}")
    out.append("steps:")
    for s in doc.steps:
        vals = " ".join(_v(v) for v in s.values[-8:])
        more = f" (+{len(s.values) - 8} more)" if len(s.values) > 8 else ""
        note = f"  [{s.note}]" if s.note else ""
        out.append(f"  {s.phase.value:<8} {s.commit[:12]}  {s.verdict.value:<9} {vals}{more}{note}")
    if doc.files:
        out.append("files changed:")
        for f in doc.files[:30]:
            out.append(f"  +{f.added if f.added is not None else '-'} "
                       f"-{f.removed if f.removed is not None else '-'}  {f.path}")
    if doc.hints:
        out.append("root-cause hints (leads, not a diagnosis):")
        for h in doc.hints:
            out.append(f"  {h.kind}: {h.message}\n    {h.file}:{h.line}: {h.text}")
    return "\n".join(out)


def render_markdown(doc: BisectReport) -> str:
    """A markdown report (for an issue or a PR comment)."""
    base, unit = doc.baseline, doc.metric.unit or ""
    out = ["## perfq bisect", "", f"**{doc.status.value}**: {md_text(doc.message)}", ""]
    fb, lg = doc.first_bad, doc.last_good
    if fb and doc.found:
        out += [f"- first bad: {md_code(fb.commit)} {md_text(fb.subject)} ({md_text(fb.author)}, {md_text(fb.date)})"]
        if lg:
            out += [f"- last good: {md_code(lg.commit[:12])} {md_text(lg.subject)}",
                    f"- value: {_v(lg.value)} -> {_v(fb.value)} {md_text(unit)} ({_pct(fb.change)})"]
    if len(doc.suspects) > 1:
        out.append("- could be any of: " + ", ".join(md_code(c[:12]) for c in doc.suspects))
    out += [f"- baselines: good {_v(base.good)}, bad {_v(base.bad)} "
            f"({_pct(base.change)}), threshold {_v(base.threshold)}",
            f"- benchmark runs: {doc.runs}", "",
            "| phase | commit | verdict | values |", "|---|---|---|---|"]
    for s in doc.steps:
        out.append(f"| {s.phase.value} | {md_code(s.commit[:12])} | {s.verdict.value} | "
                   f"{' '.join(_v(v) for v in s.values)} |")
    if doc.files:
        out += ["", "| file | + | - |", "|---|---|---|"]
        out += [f"| {md_code(f.path)} | {f.added} | {f.removed} |" for f in doc.files[:30]]
    if doc.hints:
        out += ["", "Root-cause hints (leads, not a diagnosis):"]
        out += [f"- **{md_text(h.kind)}** {md_code(f'{h.file}:{h.line}')}: {md_text(h.message)} ({md_code(h.text)})"
                for h in doc.hints]
    return "\n".join(out)
