"""Compare the base and head samples of a label: medians, change, CI, p-values, verdicts.

Pure statistics, no I/O. Per test (benchmark, test, mode, device, metric), on the logarithms of
the values (times are positive and act multiplicatively; docs/run.md "Comparing" says why):

* ``change`` = the ratio of the 20%-trimmed geometric means of head and base, minus 1 (a time: +
  is slower);
* ``ci``: the 95% confidence interval of that ratio, minus 1, from Yuen's trimmed Welch test
  (``trim``; 0 is Welch's test): a slow mode some invocations land in does not read as a change;
* ``p_value``: its two-sided p, then Benjamini-Hochberg across all tests of the comparison
  (``scipy.stats.false_discovery_control``; ``p_value`` is that q);
* ``resolution`` R: the smallest margin an equivalence test (TOST, two one-sided trimmed tests at
  alpha) certifies: ``max(|low|, |high|)`` of the 90% interval; "no change beyond ±R";
* sequential sampling (``perfq run``) stops for a test when its untrimmed (Welch) TOST interval's half-width is
  at most the target resolution and its (Yuen) TOST interval's half-width at most the minimum
  effect, or at ``max_samples`` a side, or at the time budget: rules on the spread and the clock
  only, never on the estimate (the fixed-width sequential interval of Chow and Robbins), so the one
  verdict taken on the final samples is not inflated by the looks;
* the sides' shared speed (:func:`perfq.run.stats.shared_shift`): with each sample's round, the speed
  every test of one invocation shares (a contended machine runs whole processes faster or slower) is
  compared between the sides, and each test's own change beside it (``residual_change``, ``residual_q``);
  a significant change that only the shared speed could explain is no direction (docs/run.md
  "Comparing"), nor is one from fewer than ``direction_samples`` a side;
* verdict: ``regression``/``improvement`` when q < alpha and |change| >= the minimum effect (and the
  point above allows a direction);
  else ``same`` (no change beyond ±R) only when R is at most the test's minimum effect and its
  sampling stopped; else ``unknown ±R`` with the reason (the budget or the plain run's repeats
  ended the sampling, the sample ceiling, R wider than the minimum effect, the machine was
  contended); ``failed`` when one side has no sample because its benchmark failed there or the
  side never ran.
* the centers shown beside the change are the ones it compares: each side's 20%-trimmed
  geometric mean (``base_center``, ``head_center``); the medians stay in the document.

Thresholds per benchmark and an ignore list come from ``[tool.perfq.compare]``.
All tests of a comparison are computed together on sample columns (:class:`SampleColumns`, as
the history store returns them), vectorised: a million samples take seconds, not minutes.
"""

from __future__ import annotations

import difflib
import fnmatch
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np
from scipy import stats

from perfq.run.stats import (
    LogWelch,
    Segments,
    SharedShift,
    log_welch,
    medians,
    modes_apart,
    shared_shift,
    trimmed_geomeans,
)


class Verdict(str, Enum):
    """What a test's statistics say about the head side."""

    regression = "regression"
    improvement = "improvement"
    same = "same"  # no change beyond ± the test's resolution
    unknown = "unknown"
    unstable = "unstable"  # a side's samples fall in two modes far apart (processes jumping between them)
    failed = "failed"  # no sample on a side whose benchmark failed (or that never ran): the gate fails


VERDICTS = tuple(v.value for v in Verdict)
HIGHER_IS_BETTER_UNITS = ("/s", "per_s", "ops", "flops", "items", "throughput", "gbps")


@dataclass(frozen=True)
class Settings:
    """Decision thresholds (config ``[tool.perfq.compare]``)."""

    alpha: float = 0.05
    min_effect: float = 0.05
    min_samples: int = 3
    confidence: float = 0.95
    resolution: float = 0.03  # target: sampling of a test stops once its TOST interval is within ± this
    max_samples: int = 20  # ... or once it has this many samples a side
    # the most samples a side the run took of a test (its --max-repeat, or EXTENDED_CEILING x max_samples for an
    # ``unknown`` while the budget lasts): the stored runs' own; None: max_samples (a run that did not sample on)
    ceiling: int | None = None
    trim: float = 0.2  # share of each side's samples trimmed at each end (Yuen); 0: Welch on all of them
    modes_ratio: float = 1.5  # two modes at least this far apart, each beyond the trimmed share: `unstable`
    # the shared speed of an invocation's tests (:func:`stats.shared_shift`): invocations of at least this many
    # samples have one; a direction that only the sides' shared speeds could explain needs their difference at
    # this alpha (a false one would flip every test of the comparison at once, not one)
    shared_min_tests: int = 8
    shared_alpha: float = 0.001
    direction_samples: int = 5  # a regression or improvement needs this many samples a side (3 agree by chance)
    thresholds: tuple[tuple[str, float], ...] = ()  # (benchmark or benchmark/test glob, min effect)
    ignore: tuple[str, ...] = ()  # globs on "benchmark" or "benchmark/test"

    def effect_for(self, benchmark: str, test: str) -> float:
        """The minimum effect size for a test (most specific matching glob wins: the last one)."""
        chosen = self.min_effect
        for pattern, value in self.thresholds:
            if _matches(pattern, benchmark, test):
                chosen = value
        return chosen

    def ignored(self, benchmark: str, test: str) -> bool:
        return any(_matches(p, benchmark, test) for p in self.ignore)


def _matches(pattern: str, benchmark: str, test: str) -> bool:
    return fnmatch.fnmatchcase(benchmark, pattern) or fnmatch.fnmatchcase(f"{benchmark}/{test}", pattern)


def settings_from_config(extra: dict[str, Any], **overrides: Any) -> Settings:
    """Settings from ``Config.extra['compare']`` plus explicit overrides (None ignored).

    ``[tool.perfq.compare]`` keys: ``alpha``, ``min_effect``, ``min_samples``, ``resolution``,
    ``max_samples``, ``confidence``, ``trim``, ``ignore`` (list),
    ``[tool.perfq.compare.thresholds]`` (glob = min effect, e.g. ``softmax_test = 0.10``).
    An unknown key (``min_efect``) or a value out of range (NaN, ``alpha = -1``) is a ValueError.
    """
    section = extra.get("compare") or {}
    if not isinstance(section, dict):
        raise ValueError("[tool.perfq.compare] must be a table")
    section = {str(k).replace("-", "_"): v for k, v in section.items()}
    _reject_unknown(section)
    values: dict[str, Any] = {}
    for key in ("alpha", "min_effect", "confidence", "resolution", "trim", "modes_ratio"):
        if key in section:
            values[key] = check_threshold(key, _number(key, section[key], float))
    for key in ("min_samples", "max_samples"):
        if key in section:
            values[key] = _number(key, section[key], int)
            if values[key] < 1:
                raise ValueError(f"{key} must be a positive integer, not {values[key]}")
    thresholds = section.get("thresholds") or {}
    if not isinstance(thresholds, dict):
        raise ValueError("[tool.perfq.compare.thresholds] must be a table of glob = min effect")
    values["thresholds"] = tuple((str(k), check_threshold(f"thresholds.{k}", _number(f"thresholds.{k}", v, float)))
                                 for k, v in thresholds.items())
    ignore = section.get("ignore") or []
    if isinstance(ignore, str):
        ignore = [ignore]
    values["ignore"] = tuple(str(i) for i in ignore)
    values.update({k: v for k, v in overrides.items() if v is not None})
    return Settings(**values)


def check_threshold(name: str, value: float) -> float:
    """``value`` when it is in range for ``name`` (alpha, confidence: (0, 1); an effect: [0, inf)); else ValueError."""
    if name == "modes_ratio":
        if not (math.isfinite(value) and value > 1):
            raise ValueError(f"modes_ratio must be a finite number > 1, not {value}")
        return value
    if name == "trim":  # scipy trims fewer than half of each side
        if not 0 <= value < 0.5:  # NaN fails too
            raise ValueError(f"trim must be in [0, 0.5), not {value}")
        return value
    unit_interval = name in ("alpha", "confidence")
    ok = 0 < value < 1 if unit_interval else math.isfinite(value) and value >= 0
    if not ok:  # NaN fails both comparisons
        raise ValueError(f"{name} must be {'in (0, 1)' if unit_interval else 'a finite number >= 0'}, not {value}")
    return value


_KEYS = ("alpha", "min_effect", "min_samples", "max_samples", "confidence", "resolution", "trim", "modes_ratio",
         "thresholds",
         "ignore")


def _reject_unknown(section: dict[str, Any]) -> None:
    for key in section:
        if key not in _KEYS:
            close = difflib.get_close_matches(key, _KEYS, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else f" (known: {', '.join(_KEYS)})"
            raise ValueError(f"unknown key {key!r}{hint}")


def _number(name: str, value: Any, kind: type) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float) or (kind is int and not isinstance(value, int)):
        raise ValueError(f"{name} must be a{'n integer' if kind is int else ' number'}, not {value!r}")
    return kind(value)


@dataclass(frozen=True)
class SideFailures:
    """What failed on each side: the benchmarks with a failed invocation, and whether a side never ran."""

    base: frozenset[str] = frozenset()
    head: frozenset[str] = frozenset()
    base_missing: bool = False
    head_missing: bool = False

    def explains(self, head: bool, benchmark: str) -> str:
        """Why ``benchmark`` has no sample on a side ('' when nothing failed there)."""
        side = "head" if head else "base"
        if self.head_missing if head else self.base_missing:
            return f"the {side} side has no run"
        return f"{benchmark} failed on the {side} side" if benchmark in (self.head if head else self.base) else ""


@dataclass(frozen=True)
class TestKey:
    __test__ = False  # not a pytest class

    benchmark: str
    test: str
    mode: str
    device: str
    metric: str
    unit: str


@dataclass
class TestResult:
    __test__ = False

    key: TestKey
    n_base: int
    n_head: int
    base_median: float | None
    head_median: float | None
    change: float | None
    ci: tuple[float, float] | None
    p_raw: float | None
    p_value: float | None = None
    verdict: Verdict = Verdict.unknown
    min_effect: float = 0.0
    reason: str = ""
    resolution: float | None = None  # R: the TOST at alpha certifies "no change beyond ±R"
    tost_ci: tuple[float, float] | None = None  # the TOST interval of the change (90% for alpha 0.05)
    stop_ci: tuple[float, float] | None = None  # Welch's (untrimmed) TOST interval: what sampling stops on
    base_center: float | None = None  # the side's 20%-trimmed geometric mean: what the change compares
    head_center: float | None = None
    unstable_sides: tuple[str, ...] = ()  # sides whose samples fall in two modes (:func:`stats.modes_apart`)
    residual_change: float | None = None  # the change less the sides' shared speed (:class:`stats.SharedShift`)
    residual_q: float | None = None  # its q (Benjamini-Hochberg over the tests that have one)

    def at_ceiling(self, settings: Settings) -> bool:
        return min(self.n_base, self.n_head) >= settings.max_samples

    def narrow(self, settings: Settings) -> bool:
        """Both TOST intervals are narrow: Welch's within the target resolution, Yuen's within the minimum effect."""
        if self.stop_ci is None or self.tost_ci is None:
            return False
        return (_half_width(self.stop_ci) <= settings.resolution
                and _half_width(self.tost_ci) <= max(self.min_effect, settings.resolution))

    def stopped(self, settings: Settings) -> bool:
        """Sampling of this test is over: its intervals are narrow (:meth:`narrow`), or it has the most samples."""
        return self.stop_ci is not None and (self.narrow(settings) or self.at_ceiling(settings))


def _half_width(interval: tuple[float, float]) -> float:
    return (interval[1] - interval[0]) / 2


@dataclass
class Comparison:
    tests: list[TestResult] = field(default_factory=list)
    ignored: list[TestKey] = field(default_factory=list)
    only_base: list[TestKey] = field(default_factory=list)  # samples on the base side only, no failure explains it
    only_head: list[TestKey] = field(default_factory=list)  # ... on the head side only (a test the other run lacks)
    shared: SharedShift | None = None  # the sides' shared speeds, when invocations measured enough tests

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(VERDICTS, 0)
        for t in self.tests:
            out[t.verdict] += 1
        return out

    def undecided_keys(self, settings: Settings) -> list[TestKey]:
        """Tests whose sampling goes on: not failed and not yet stopped (:meth:`TestResult.stopped`)."""
        return [t.key for t in self.tests if t.verdict != Verdict.failed and not t.stopped(settings)]

    def sampling_keys(self, settings: Settings, ceiling: int) -> list[TestKey]:
        """Tests whose sampling goes on: those not yet stopped, and the ``unknown`` ones (R wider than their
        minimum effect) with fewer than ``ceiling`` samples a side: an undecided test keeps sampling while the
        run allows (its budget sets ``ceiling``, :func:`perfq.run.execute.sample_ceiling`)."""
        return [t.key for t in self.tests if t.verdict != Verdict.failed and (
            not t.stopped(settings) or (t.verdict == Verdict.unknown and min(t.n_base, t.n_head) < ceiling))]


def higher_is_better(metric: str, unit: str) -> bool:
    """Throughput-like metrics improve upwards; times (the default) improve downwards."""
    text = f"{metric} {unit}".lower()
    return any(tag in text for tag in HIGHER_IS_BETTER_UNITS)


def _decide(t: TestResult, settings: Settings, up_is_good: bool, shared: SharedShift | None = None) -> None:
    if t.n_base < settings.min_samples or t.n_head < settings.min_samples:
        t.verdict, t.reason = Verdict.unknown, f"fewer than {settings.min_samples} samples on a side"
        return
    if t.change is None or t.ci is None or t.resolution is None:
        t.verdict, t.reason = Verdict.unknown, "no usable values (a non-positive value or a missing side)"
        return
    if t.p_value is not None and t.p_value < settings.alpha and abs(t.change) >= t.min_effect:
        doubt = _direction_doubt(t, settings, shared)
        if doubt:
            t.verdict, t.reason = Verdict.unknown, doubt
            return
        worse = (t.change > 0) != up_is_good
        t.verdict = Verdict.regression if worse else Verdict.improvement
        t.reason = f"q={t.p_value:.3g} < {settings.alpha}, |change| >= {t.min_effect:.1%}"
    elif t.stopped(settings) and t.resolution <= t.min_effect:
        t.verdict, t.reason = Verdict.same, f"no change beyond ±{t.resolution:.1%} (TOST at {settings.alpha})"
    else:
        t.verdict, t.reason = Verdict.unknown, _why_unknown(t, settings)


def _direction_doubt(t: TestResult, settings: Settings, shared: SharedShift | None) -> str:
    """Why a significant change is no direction ('' when it is one): too few samples a side, or a change the
    sides' shared speeds explain (every test of their processes moved alike; :class:`stats.SharedShift`)."""
    n, r = min(t.n_base, t.n_head), t.resolution or 0.0
    if n < settings.direction_samples:
        return (f"{t.change:+.1%} at {n} samples a side: a direction needs {settings.direction_samples} "
                f"(a few processes agree by chance), ±{r:.1%}")
    if shared is None or t.change is None or t.ci is None or _beyond_shared(t, settings, shared):
        return ""
    return (f"{t.change:+.1%}, but one side's processes ran {np.expm1(shared.estimate):+.1%} as a whole (every test "
            f"alike, {np.expm1(shared.spread):.1%} from one process to the next): this test's own change is "
            f"{_percent(t.residual_change)}, q={_q_text(t.residual_q)}; not told from the machine, ±{r:.1%}")


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.1%}"


def _q_text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _beyond_shared(t: TestResult, settings: Settings, shared: SharedShift) -> bool:
    """The change of ``t`` holds whatever the shared speeds did: its own change (less the shared speed) is
    significant the same way, or the shared speeds differ the same way at ``shared_alpha``, or its interval
    lies beyond the shared speeds' whole interval."""
    assert t.change is not None and t.ci is not None
    up = t.change > 0
    own = (t.residual_q is not None and t.residual_change is not None and t.residual_q < settings.alpha
           and (t.residual_change > 0) == up)
    machine = shared.pvalue < settings.shared_alpha and (shared.estimate > 0) == up
    low, high = np.log1p(t.ci[0]), np.log1p(t.ci[1])
    beyond = low > shared.ci[1] if up else high < shared.ci[0]
    return bool(own or machine or beyond)


def _why_unknown(t: TestResult, settings: Settings) -> str:
    """Why a test with samples on both sides is neither a change nor ``same``: the run's sample ceiling
    (``settings.ceiling``, stored with its runs) only when the test reached it."""
    n, r = min(t.n_base, t.n_head), t.resolution or 0.0
    ceiling = settings.ceiling or settings.max_samples
    if t.narrow(settings):
        return (f"no change beyond ±{r:.1%} is wider than the minimum effect {t.min_effect:.1%}: "
                "a change below the minimum effect, or too near it to tell")
    if n >= ceiling > settings.max_samples:
        return f"sampling went past the ceiling ({settings.max_samples} a side) to the most the run allows " \
               f"({ceiling} a side), and ended at ±{r:.1%}"
    if n > settings.max_samples:  # sampled on past the ceiling while the run's budget lasted
        return f"sampling went past the ceiling ({settings.max_samples} a side) to {n} while the budget lasted, " \
               f"and ended at ±{r:.1%}"
    if n >= ceiling:
        return f"the sample ceiling ({ceiling} a side) was reached at ±{r:.1%}"
    if n == settings.max_samples:  # at the ceiling, which the run extends for an `unknown` while the budget lasts
        return f"the budget (or the run's repeats) ended the sampling at {n} samples a side, ±{r:.1%}, " \
               f"before it could go past the ceiling (up to {ceiling} a side)"
    return f"the budget (or the run's repeats) ended the sampling at {n} samples a side, ±{r:.1%}"


@dataclass(frozen=True)
class SampleColumns:
    """Samples of both sides as columns: ``keys[key[i]]`` is sample i's test, ``head[i]`` its side, ``group[i]``
    the invocation it came from (one round of one side's run: ids unique across both sides; -1 or no column:
    not known), which :func:`stats.shared_shift` needs."""

    keys: Sequence[TestKey]
    key: np.ndarray
    head: np.ndarray
    value: np.ndarray
    group: np.ndarray | None = None


def _report_order(key: TestKey) -> tuple[str, str, str, str, str]:
    return (key.benchmark, key.test, key.mode, key.device, key.metric)


Pair = tuple[TestKey, float] | tuple[TestKey, float, int]  # (key, value) or (key, value, round)


def columns_from_pairs(base: Iterable[Pair], head: Iterable[Pair]) -> SampleColumns:
    """``(key, value)`` or ``(key, value, round)`` tuples of both sides as columns (non-finite values dropped);
    with rounds, a side's samples of one round are one invocation group."""
    index: dict[TestKey, int] = {}
    keys, sides, values, groups = [], [], [], []
    for side, pairs in ((False, base), (True, head)):
        for pair in pairs:
            key, value = pair[0], pair[1]
            if value is None or not math.isfinite(value):
                continue
            keys.append(index.setdefault(key, len(index)))
            sides.append(side)
            values.append(float(value))
            groups.append(2 * pair[2] + side if len(pair) > 2 else -1)
    order = sorted(index, key=_report_order)
    rank = np.empty(len(order), dtype=np.int64)
    rank[[index[k] for k in order]] = np.arange(len(order))
    group = np.asarray(groups, dtype=np.int64)
    return SampleColumns(order, rank[np.asarray(keys, dtype=np.int64)], np.asarray(sides, dtype=bool),
                         np.asarray(values, dtype=float), group if (group >= 0).any() else None)


def compare_samples(
    base: Iterable[Pair],
    head: Iterable[Pair],
    settings: Settings | None = None,
) -> Comparison:
    """Compare per-test samples of two sides (``(key, value)`` pairs, or ``(key, value, round)``)."""
    return compare_columns(columns_from_pairs(base, head), settings)


def _narrow(ids: np.ndarray) -> np.ndarray:
    """Non-negative ids in the smallest integer type (numpy's stable sort is a radix sort up to 16 bits)."""
    top = int(ids.max()) if ids.size else 0
    return ids.astype(np.uint16 if top < 1 << 16 else np.uint32 if top < 1 << 32 else np.int64)


@dataclass(frozen=True)
class _Sides:
    """Both sides' values as segments sorted by (test, value)."""

    base: Segments
    head: Segments

    @classmethod
    def of(cls, cols: SampleColumns) -> _Sides:
        keep = np.isfinite(cols.value)
        key, head, value = cols.key[keep], cols.head[keep], cols.value[keep]
        by_value = np.argsort(value, kind="stable")  # then a stable sort by group keeps values ordered within
        group = _narrow(key * 2 + head)
        order = by_value[np.argsort(group[by_value], kind="stable")]
        counts = np.bincount(group, minlength=2 * len(cols.keys))
        starts = np.cumsum(counts) - counts
        return cls(Segments(value[order], starts[0::2], counts[0::2]), Segments(value[order], starts[1::2],
                                                                                  counts[1::2]))

    def all_positive(self) -> np.ndarray:
        """Per test: every value of both sides is > 0 (their logarithms exist)."""
        def smallest(seg: Segments) -> np.ndarray:
            return np.where(seg.count > 0, seg.values[np.minimum(seg.start, max(seg.values.size - 1, 0))], 1.0)

        if self.base.values.size == 0:
            return np.ones(self.base.count.size, dtype=bool)
        return (smallest(self.base) > 0) & (smallest(self.head) > 0)


def _relative(log_interval: np.ndarray) -> tuple[float, float]:
    return float(np.expm1(log_interval[0])), float(np.expm1(log_interval[1]))


def _fill(t: TestResult, welch: LogWelch, pos: int) -> None:
    """The Welch results of ``t`` (row ``pos``): change, CIs, raw p and resolution."""
    t.change = float(np.expm1(welch.estimate[pos]))
    t.ci, t.tost_ci, t.stop_ci = _relative(welch.ci[pos]), _relative(welch.tost_ci[pos]), _relative(welch.stop_ci[pos])
    t.p_raw = float(welch.pvalue[pos])
    t.resolution = max(abs(t.tost_ci[0]), abs(t.tost_ci[1]))


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def compare_columns(cols: SampleColumns, settings: Settings | None = None,
                    failures: SideFailures | None = None) -> Comparison:
    """Compare both sides of every test in ``cols`` at once (the same numbers as test-by-test).

    A test with no sample on a side that ``failures`` explains gets the ``failed`` verdict.
    """
    settings = settings or Settings()
    failures = failures or SideFailures()
    result = Comparison()
    sides = _Sides.of(cols)
    nb, nh = sides.base.count, sides.head.count
    base_med, head_med = medians(sides.base), medians(sides.head)
    base_center, head_center = trimmed_geomeans(sides.base, settings.trim), trimmed_geomeans(sides.head, settings.trim)
    bimodal = {False: modes_apart(sides.base, settings.trim, settings.modes_ratio),
               True: modes_apart(sides.head, settings.trim, settings.modes_ratio)}
    tests, rows = [], []  # the tests to compare; the column row of each one compared
    for i, key in enumerate(cols.keys):
        if nb[i] + nh[i] == 0:
            continue
        if settings.ignored(key.benchmark, key.test):
            result.ignored.append(key)
            continue
        tests.append(i)
    idx = np.asarray(tests, dtype=np.int64)
    tested = idx[(nb[idx] >= 2) & (nh[idx] >= 2) & sides.all_positive()[idx]]
    welch = log_welch(sides.base, sides.head, tested, settings.confidence, settings.trim)
    row_of = {int(i): pos for pos, i in enumerate(tested)}
    for i in tests:
        key = cols.keys[i]
        if not (nb[i] and nh[i]) and not failures.explains(bool(nb[i]), key.benchmark):
            (result.only_base if nb[i] else result.only_head).append(key)  # in one of the two runs only
            continue
        t = TestResult(key, int(nb[i]), int(nh[i]), None, None, None, None, None,
                       min_effect=settings.effect_for(key.benchmark, key.test))
        if nb[i]:
            t.base_median, t.base_center = float(base_med[i]), _finite(base_center[i])
        if nh[i]:
            t.head_median, t.head_center = float(head_med[i]), _finite(head_center[i])
        if i in row_of:
            _fill(t, welch, row_of[i])
        t.unstable_sides = tuple(name for name, head in (("base", False), ("head", True)) if bimodal[head][i])
        result.tests.append(t)
        rows.append(i)
    with_p = [t for t in result.tests if t.p_raw is not None]
    if with_p:
        q = stats.false_discovery_control(np.asarray([t.p_raw for t in with_p]), method="bh")
        for t, q_value in zip(with_p, q.tolist(), strict=True):
            t.p_value = q_value
    result.shared = _shared_and_residuals(cols, settings, result.tests, rows)
    apart = _ranges_apart(sides, rows)
    for t, disjoint in zip(result.tests, apart, strict=True):
        _decide(t, settings, higher_is_better(t.key.metric, t.key.unit), result.shared)
        decided = t.verdict in (Verdict.regression, Verdict.improvement)
        if t.unstable_sides and t.verdict != Verdict.failed and not (decided and disjoint):
            t.verdict, t.reason = Verdict.unstable, (
                f"the {' and '.join(t.unstable_sides)} side's samples fall in two modes at least "
                f"{settings.modes_ratio:g}x apart, more of each than trimming sets aside: not a verdict")
        why = failures.explains(True, t.key.benchmark) if not t.n_head else (
            failures.explains(False, t.key.benchmark) if not t.n_base else "")
        if why:
            t.verdict, t.reason = Verdict.failed, why
    return result


def _shared_and_residuals(cols: SampleColumns, settings: Settings, tests: list[TestResult],
                          rows: list[int]) -> SharedShift | None:
    """The sides' shared speeds (None without invocation groups or enough tests an invocation), and each
    test's own change beside them (``residual_change``, ``residual_q``: the trimmed Welch test of its
    residuals, Benjamini-Hochberg over the tests that have one)."""
    if cols.group is None or cols.value.size == 0:
        return None
    keep = np.isfinite(cols.value)
    key, group, head, value = cols.key[keep], cols.group[keep], cols.head[keep], cols.value[keep]
    shared = shared_shift(key, group, head, value, settings.shared_min_tests, 1.0 - settings.shared_alpha)
    if shared is None:
        return None
    own = _Sides.of(SampleColumns(cols.keys, key, head, np.exp(shared.residual)))  # NaN residuals dropped
    row = np.asarray(rows, dtype=np.int64)
    tested = row[(own.base.count[row] >= 2) & (own.head.count[row] >= 2)]
    if tested.size == 0:
        return shared
    welch = log_welch(own.base, own.head, tested, settings.confidence, settings.trim)
    q = stats.false_discovery_control(welch.pvalue, method="bh")
    by_row = {int(i): pos for pos, i in enumerate(tested)}
    for t, i in zip(tests, rows, strict=True):
        if i in by_row:
            t.residual_change = float(np.expm1(welch.estimate[by_row[i]]))
            t.residual_q = float(q[by_row[i]])
    return shared


def _ranges_apart(sides: _Sides, rows: list[int]) -> list[bool]:
    """Per test row: every sample of one side lies beyond every sample of the other. Then the direction
    holds whichever mode each process landed in, and two modes on a side do not make it undecided."""
    out = []
    for i in rows:
        base, head = sides.base.one(i), sides.head.one(i)
        out.append(bool(base.size and head.size and (head[0] > base[-1] or base[0] > head[-1])))
    return out


ORDER = {"failed": 0, "regression": 1, "improvement": 2, "unstable": 3, "unknown": 4, "same": 5}


def sorted_for_report(tests: list[TestResult]) -> list[TestResult]:
    """Failed tests, then regressions (largest change first), improvements, unknown, same."""
    return sorted(tests, key=lambda t: (ORDER[t.verdict], -round(abs(t.change or 0.0), 9), t.key.benchmark,
                                        t.key.test))
