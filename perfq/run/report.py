"""A comparison as a typed document (`perfq compare --format json`) and its PR markdown."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from common.documents import to_json
from common.render import details, fence, fixed, md_code, md_table, md_text, plain
from perfq.run.compare import Comparison, TestResult, Verdict, sorted_for_report
from perfq.run.trend import Trend
from schema.results_rows import RunStatus
from schema.results_store import HistoryRow

DETAILS_AFTER = 10  # tables longer than this are folded into a <details> block


class SideStatus(str, Enum):
    complete = "complete"
    incomplete = "incomplete"
    missing = "missing"  # no run stored for the side


@dataclass(frozen=True)
class FailureInfo:
    """A benchmark invocation that failed on a side."""

    benchmark: str
    returncode: int | None
    stderr_tail: str


@dataclass(frozen=True)
class SideInfo:
    """What a side ran on: refs, commits, torch versions, hosts, its runs and failures."""

    ref: str
    commit: str
    torch_version: str
    python: str
    host: str
    cpu: str
    runs: tuple[str, ...]
    status: SideStatus
    samples: int
    failures: tuple[FailureInfo, ...]
    env: dict[str, str] = field(default_factory=dict)  # machine, interpreter, torch build (perfq.run.machine)
    contended: str = ""  # "3 of 40 invocations (8%)": invocations that ran under contention (docs/run.md)
    contended_share: float | None = None  # their share (None: not measured)


@dataclass(frozen=True)
class TestRow:
    """One test's comparison."""

    __test__ = False  # not a pytest class

    benchmark: str
    test: str
    mode: str
    device: str
    base_median: float | None
    head_median: float | None
    change: float | None
    ci: tuple[float, float] | None
    p_value: float | None
    verdict: Verdict
    metric: str
    unit: str
    n_base: int
    n_head: int
    min_effect: float
    resolution: float | None = None  # R: "no change beyond ±R" certified by TOST at alpha (None: no CI)
    base_center: float | None = None  # 20%-trimmed geometric mean of the side: the change is head_center/base_center
    head_center: float | None = None
    reason: str = ""  # why the verdict (an ``unknown``'s: the budget, the ceiling, R wider than the min effect)

    def verdict_text(self) -> str:
        """The verdict with its resolution: ``same ±2.1%``, ``unknown ±7.3%``, ``regression``."""
        if self.resolution is not None and self.verdict in (Verdict.same, Verdict.unknown):
            return f"{self.verdict.value} ±{self.resolution:.1%}"
        return self.verdict.value


@dataclass(frozen=True)
class Summary:
    """Number of tests per verdict."""

    regression: int
    improvement: int
    same: int
    unknown: int
    failed: int = 0  # tests without samples on a side whose benchmark failed (or that never ran)
    unstable: int = 0  # tests with a side whose samples fall in two modes: undecided, never a change


@dataclass(frozen=True)
class ComparisonDocument:
    """The `perfq compare --format json` document."""

    label: str
    base: SideInfo
    head: SideInfo
    summary: Summary
    tests: tuple[TestRow, ...]
    ignored: tuple[str, ...]
    problems: tuple[str, ...] = ()  # why the comparison is not clean: a missing side, failed benchmarks
    warnings: tuple[str, ...] = ()  # what the reader should know but does not fail the gate
    only_base: tuple[str, ...] = ()  # tests measured on the base side (the baseline) only: not compared
    only_head: tuple[str, ...] = ()  # tests measured on the head side (this run) only: not compared
    against_baseline: bool = False  # `compare --baseline`: the base side is another stored run

    def to_json(self) -> dict[str, Any]:
        return to_json(self)

    def gate_fails(self) -> bool:
        """A regression, a failed benchmark or a missing side: `--fail-on-regression` exits non-zero."""
        return bool(self.summary.regression or self.problems)


@dataclass(frozen=True)
class HistoryDocument:
    """The `perfq history --format json` document: a benchmark's per-run summaries and each test's trend."""

    benchmark: str
    rows: tuple[HistoryRow, ...]
    trends: tuple[Trend, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return to_json(self)


def side_info(runs: Iterable[Any]) -> SideInfo:
    """What a side ran on (runs are schema.results_store.Run)."""
    runs = list(runs)

    def uniq(attr: str) -> str:
        return ", ".join(sorted({str(getattr(r, attr)) for r in runs if getattr(r, attr)}))

    complete = bool(runs) and all(r.status == RunStatus.complete for r in runs)
    status = SideStatus.complete if complete else SideStatus.incomplete if runs else SideStatus.missing
    env = merged_env(getattr(r, "env", "") for r in runs)
    return SideInfo(
        ref=uniq("ref"), commit=env.get("git_commit") or uniq("commit_sha"), torch_version=uniq("torch_version"),
        python=uniq("python"),
        host=uniq("host"), cpu=uniq("cpu"), runs=tuple(r.id for r in runs),
        status=status,
        samples=sum(r.sample_count for r in runs),
        failures=tuple(FailureInfo(f.benchmark, f.returncode, f.stderr_tail) for r in runs for f in r.failures),
        env=env,
        contended=env.get("contended", ""),
        contended_share=_share(env.get("contended", "")),
    )


def _share(contended: str) -> float | None:
    """The share of ``"3 of 40 invocations (8%) | 1 of 20 invocations (5%)"`` (several runs: summed)."""
    counts = [part.split()[:3] for part in contended.split(" | ") if part.strip()]
    pairs = [(int(c[0]), int(c[2])) for c in counts if len(c) == 3 and c[0].isdigit() and c[2].isdigit()]
    total = sum(n for _, n in pairs)
    return sum(k for k, _ in pairs) / total if total else None


CONTENDED_VERDICT_SHARE = 0.25  # a side with more of its invocations contended: an `unknown` says the machine was


def commit_warnings(name: str, runs: Iterable[Any], info: SideInfo) -> list[str]:
    """A side whose ref names another commit than the checkout its benchmarks ran from: said, never hidden."""
    named = sorted({r.commit_sha for r in runs if r.commit_sha})
    ran = {c.removesuffix("-dirty") for c in info.commit.split(" | ") if c}
    return [f"the {name} side's ref {info.ref} is commit {sha[:12]}, but its benchmarks ran from the checkout "
            f"at {info.commit}" for sha in named if ran and sha not in ran]


def merged_env(texts: Iterable[str]) -> dict[str, str]:
    """The stored environments (JSON texts) of a side's runs as one dict; differing values joined by ' | '."""
    values: dict[str, list[str]] = {}
    for text in texts:
        try:
            env = json.loads(text) if text else {}
        except ValueError:
            env = {}
        for key, value in (env.items() if isinstance(env, dict) else ()):
            seen = values.setdefault(str(key), [])
            if str(value) not in seen:
                seen.append(str(value))
    return {k: " | ".join(v) for k, v in sorted(values.items())}


VOLATILE_ENV = ("load_average", "memory_available", "contended")  # change from minute to minute: shown, never alarming


def env_differences(doc: ComparisonDocument) -> list[tuple[str, str, str]]:
    """(key, base value, head value) of every environment key whose values differ between the sides."""
    base, head = doc.base.env, doc.head.env
    return [(k, base.get(k, "-"), head.get(k, "-")) for k in sorted(set(base) | set(head))
            if base.get(k, "-") != head.get(k, "-")]


def contention_reason(base: SideInfo, head: SideInfo) -> str:
    """'the machine was contended (...)' when a side's contended share is above CONTENDED_VERDICT_SHARE; else ''."""
    busy = [f"{name}: {info.contended}" for name, info in (("base", base), ("head", head))
            if info.contended_share is not None and info.contended_share > CONTENDED_VERDICT_SHARE]
    return f"the machine was contended ({'; '.join(busy)})" if busy else ""


def _test_row(t: TestResult, busy: str = "") -> TestRow:
    reason = f"{busy}; {t.reason}" if busy and t.verdict == Verdict.unknown else t.reason
    return TestRow(t.key.benchmark, t.key.test, t.key.mode, t.key.device, t.base_median, t.head_median, t.change,
                   t.ci, t.p_value, Verdict(t.verdict), t.key.metric, t.key.unit, t.n_base, t.n_head, t.min_effect,
                   t.resolution, t.base_center, t.head_center, reason)


def problems(base: SideInfo, head: SideInfo, failed_tests: int) -> tuple[str, ...]:
    """What makes a comparison fail its gate besides regressions, one sentence each."""
    found = []
    for name, side in (("base", base), ("head", head)):
        if side.status == SideStatus.missing:
            found.append(f"the {name} side has no run (perfq run --side {name})")
        failed = sorted({f.benchmark for f in side.failures})
        if failed:
            found.append(f"{len(failed)} benchmark(s) failed on the {name} side: {', '.join(failed)}")
    if failed_tests:
        found.append(f"{failed_tests} test(s) have samples on one side only because the other side failed")
    return tuple(found)


def _names(keys: Iterable[Any]) -> tuple[str, ...]:
    return tuple(f"{k.benchmark}/{k.test}" + (f" [{k.mode}]" if k.mode and k.mode != "eager" else "") for k in keys)


def only_in_one(doc: ComparisonDocument) -> list[tuple[str, tuple[str, ...]]]:
    """(heading, tests) of the tests measured on one side only: "only in the baseline / only in this run"."""
    names = (("only in the baseline", "only in this run") if doc.against_baseline
             else ("only on the base side", "only on the head side"))
    return [(name, tests) for name, tests in zip(names, (doc.only_base, doc.only_head), strict=True) if tests]


def comparison_document(label: str, base_runs: list[Any], head_runs: list[Any], result: Comparison,
                        against_baseline: bool = False, notes: tuple[str, ...] = ()) -> ComparisonDocument:
    """The `perfq compare --format json` document (``notes``: more warnings, about the stored samples)."""
    base, head = side_info(base_runs), side_info(head_runs)
    summary = Summary(**result.counts())
    busy = contention_reason(base, head)
    warnings = commit_warnings("base", base_runs, base) + commit_warnings("head", head_runs, head) + list(notes)
    return ComparisonDocument(
        label=label,
        base=base,
        head=head,
        summary=summary,
        tests=tuple(_test_row(t, busy) for t in sorted_for_report(result.tests)),
        ignored=tuple(f"{k.benchmark}/{k.test}" for k in result.ignored),
        problems=problems(base, head, summary.failed),
        warnings=tuple(warnings),
        only_base=_names(result.only_base),
        only_head=_names(result.only_head),
        against_baseline=against_baseline,
    )


def fmt_change(change: float | None) -> str:
    return "n/a" if change is None else f"{change:+.1%}"


def fmt_ci(ci: list[float] | None) -> str:
    return "n/a" if not ci else f"[{ci[0]:+.1%}, {ci[1]:+.1%}]"


def fmt_value(value: float | None, unit: str = "") -> str:
    return fixed(value, unit)


def fmt_p(p: float | None) -> str:
    return "n/a" if p is None else f"{p:.2g}"


def summary_line(doc: ComparisonDocument) -> str:
    c = doc.summary
    n = c.regression + c.improvement + c.same + c.unknown + c.failed + c.unstable
    icon = ":red_circle:" if doc.gate_fails() else ":green_circle:" if not c.unknown + c.unstable else ":white_circle:"
    failed = f", {c.failed} failed" if c.failed else ""
    unstable = f" ({c.unstable} unstable)" if c.unstable else ""
    return (
        f"{icon} **perfq {md_code(doc.label)}**: {c.regression} regression(s), "
        f"{c.improvement} improvement(s), {c.same} same, {c.unknown + c.unstable} undecided{unstable}{failed} "
        f"across {n} test(s)"
    )


def problem_lines(doc: ComparisonDocument) -> list[str]:
    """The problems of a comparison as markdown lines (none when it is clean)."""
    return [f"- **{md_text(p)}**" for p in doc.problems] + [f"- :warning: {md_text(w)}" for w in doc.warnings]


CENTER_NOTE = "base and head: each side's 20%-trimmed geometric mean, the centers the change compares"


def _table(rows: list[TestRow]) -> list[str]:
    return md_table(
        ("verdict", "benchmark", "test", "mode", "device", "base", "head", "change", "CI", "q"),
        "lllllrrrlr",
        ((t.verdict_text(), md_code(t.benchmark), md_code(t.test), md_text(t.mode), md_text(t.device),
          md_text(fmt_value(t.base_center, t.unit)), md_text(fmt_value(t.head_center, t.unit)),
          fmt_change(t.change), fmt_ci(t.ci), fmt_p(t.p_value)) for t in rows),
    )


def _section(title: str, rows: list[TestRow], fold: bool) -> list[str]:
    if not rows:
        return []
    if fold and len(rows) > DETAILS_AFTER:
        return ["", *details(f"{title} ({len(rows)})", _table(rows))]
    return ["", f"**{title}** ({len(rows)})", "", *_table(rows)]


def _environment(doc: ComparisonDocument) -> list[str]:
    """The sides' refs and what differs in their environments; the full environments folded."""
    rows = [(key, _cell(getattr(doc.base, key)), _cell(getattr(doc.head, key)))
            for key in ("ref", "commit", "torch_version", "python", "host", "cpu", "status", "samples", "contended")]
    differ = env_differences(doc)
    rows += [(k, "(see below)", "(see below)") if k == "torch_config" else (k, b, h) for k, b, h in differ]
    lines = ["**Environment**" + (" (what differs between the sides)" if differ else ""), ""]
    lines += md_table(("", "base", "head"), "lll", ((md_text(k), md_text(b or "-"), md_text(h or "-"))
                                                    for k, b, h in rows))
    if any(k == "torch_config" for k, _, _ in differ):
        diff = difflib.unified_diff(doc.base.env.get("torch_config", "").splitlines(),
                                    doc.head.env.get("torch_config", "").splitlines(), "base", "head", lineterm="")
        lines += ["", *details("torch build config differs", [fence("\n".join(diff), "diff", limit=80)])]
    keys = sorted(set(doc.base.env) | set(doc.head.env))
    if keys:
        same = [(md_text(k), _lines(doc.base.env.get(k, "-")), _lines(doc.head.env.get(k, "-")))
                for k in keys if k != "torch_config"]
        lines += ["", *details("Full environment", md_table(("", "base", "head"), "lll", same))]
    return lines


def _cell(value: object) -> str:
    """A side's fact as text: an Enum by its value (``complete``, not ``SideStatus.complete``)."""
    return str(value.value if isinstance(value, Enum) else value)


def _lines(text: str) -> str:
    """A multi-line untrusted value in one markdown table cell: each line escaped, joined by ``<br>``."""
    return "<br>".join(md_text(line) for line in plain(text, one_line=False).splitlines()) or "-"


def render_markdown(doc: ComparisonDocument) -> str:
    """PR comment: summary first, regressions first, environment and commits at the end."""
    by = {v: [t for t in doc.tests if t.verdict == v] for v in Verdict}
    lines = [summary_line(doc)]
    if doc.problems or doc.warnings:
        lines += ["", *problem_lines(doc)]
    lines += _section("Failed (no samples on one side)", by[Verdict.failed], fold=True)
    lines += _section("Regressions", by[Verdict.regression], fold=False)
    lines += _section("Improvements", by[Verdict.improvement], fold=True)
    lines += _section("Unstable (a side's samples fall in two modes: no verdict)", by[Verdict.unstable], fold=True)
    lines += _section("Undecided (unknown ±R: no change beyond ±R, wider than the minimum effect)",
                      by[Verdict.unknown], fold=True)
    lines += _section("Same (no change beyond ±R, within the minimum effect)", by[Verdict.same], fold=True)
    failures = doc.base.failures + doc.head.failures
    if failures:
        body = [line for f in failures
                for line in (f"- **{md_text(f.benchmark)}** (exit {f.returncode})", "",
                             fence(plain(f.stderr_tail, one_line=False)))]
        lines += ["", *details(f"Failed benchmarks ({len(failures)})", body)]
    for heading, tests in only_in_one(doc):
        lines += ["", *details(f"Not compared, {heading} ({len(tests)})", [", ".join(md_code(t) for t in tests)])]
    if doc.ignored:
        lines += ["", f"Ignored by config: {len(doc.ignored)} test(s)."]
    lines += ["", *_environment(doc)]
    lines += [
        "",
        "<sub>Verdicts: Yuen's trimmed Welch test on log-times (change = ratio of the 20%-trimmed geometric "
        f"means; {CENTER_NOTE}), Benjamini-Hochberg q across all tests; each test is sampled until its 90% "
        "interval is narrow enough; regression/improvement needs q < alpha and |change| >= min effect; "
        "same ±R: an equivalence test (TOST) certifies no change beyond ±R, and R is within the minimum effect; "
        "unknown ±R: undecided (the budget or the sample ceiling ended the sampling, or R is wider than the "
        "minimum effect); unstable: a side's samples fall in two modes at least 1.5x apart, each beyond the "
        "trimmed share.</sub>",
    ]
    return "\n".join(lines) + "\n"
