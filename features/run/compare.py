"""Compare the base and head samples of a label: medians, change, CI, p-values, verdicts.

Pure statistics, no I/O. Per test (benchmark, test, mode, device, metric):

* ``change`` = head median / base median - 1 (for a time, positive = slower);
* ``ci``: percentile bootstrap (2000 resamples, seeded per test, so reproducible) of that ratio
  of medians, each resample's median drawn from its exact distribution (:mod:`perfq.run.stats`);
* ``p_value``: like Chromium's Pinpoint, both Mann-Whitney U and Kolmogorov-Smirnov are
  computed and the smaller p is kept, doubled (a Bonferroni step for taking a minimum);
  then Benjamini-Hochberg across all tests of the comparison (``p_value`` is that q);
* verdict: ``regression``/``improvement`` when q < alpha, the change is at least the
  minimum effect and the CI excludes 0; ``same`` when the whole CI lies within
  ± the minimum effect; ``failed`` when one side has no sample because its benchmark failed
  there or the side never ran; otherwise ``unknown`` (more repeats may resolve it).

Thresholds per benchmark and an ignore list come from ``[tool.perfq.compare]``.
All tests of a comparison are computed together on sample columns (:class:`SampleColumns`, as
the history store returns them), vectorised: a million samples take seconds, not minutes.
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np
from scipy import stats

from perfq.run.stats import (
    Segments,
    bootstrap_ratio_ci,
    ks_pvalues,
    ks_statistics,
    medians,
    mwu_pvalues,
    pinpoint_combine,
)


class Verdict(str, Enum):
    """What a test's statistics say about the head side."""

    regression = "regression"
    improvement = "improvement"
    same = "same"
    unknown = "unknown"
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
    bootstrap: int = 2000
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

    ``[tool.perfq.compare]`` keys: ``alpha``, ``min_effect``, ``min_samples``, ``ignore`` (list),
    ``[tool.perfq.compare.thresholds]`` (glob = min effect, e.g. ``softmax_test = 0.10``).
    An unknown key (``min_efect``) or a value out of range (NaN, ``alpha = -1``) is a ValueError.
    """
    section = extra.get("compare") or {}
    if not isinstance(section, dict):
        raise ValueError("[tool.perfq.compare] must be a table")
    section = {str(k).replace("-", "_"): v for k, v in section.items()}
    _reject_unknown(section)
    values: dict[str, Any] = {}
    for key in ("alpha", "min_effect", "confidence"):
        if key in section:
            values[key] = check_threshold(key, _number(key, section[key], float))
    for key in ("min_samples", "bootstrap"):
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
    unit_interval = name in ("alpha", "confidence")
    ok = 0 < value < 1 if unit_interval else math.isfinite(value) and value >= 0
    if not ok:  # NaN fails both comparisons
        raise ValueError(f"{name} must be {'in (0, 1)' if unit_interval else 'a finite number >= 0'}, not {value}")
    return value


_KEYS = ("alpha", "min_effect", "min_samples", "confidence", "bootstrap", "thresholds", "ignore")


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


@dataclass
class Comparison:
    tests: list[TestResult] = field(default_factory=list)
    ignored: list[TestKey] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(VERDICTS, 0)
        for t in self.tests:
            out[t.verdict] += 1
        return out

    def unknown_keys(self) -> list[TestKey]:
        return [t.key for t in self.tests if t.verdict == Verdict.unknown]


def higher_is_better(metric: str, unit: str) -> bool:
    """Throughput-like metrics improve upwards; times (the default) improve downwards."""
    text = f"{metric} {unit}".lower()
    return any(tag in text for tag in HIGHER_IS_BETTER_UNITS)


def _seed(key: TestKey) -> int:
    digest = hashlib.sha256(repr(key).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def pinpoint_p(base: np.ndarray, head: np.ndarray) -> float:
    """min(Mann-Whitney U p, Kolmogorov-Smirnov p), doubled and capped at 1 (one test; the definition
    the vectorised :func:`compare_columns` reproduces exactly)."""
    if np.all(base == base[0]) and np.all(head == head[0]) and base[0] == head[0]:
        return 1.0
    p_mwu = stats.mannwhitneyu(base, head, alternative="two-sided").pvalue
    p_ks = stats.ks_2samp(base, head).pvalue
    p = min(float(p_mwu), float(p_ks))
    return 1.0 if math.isnan(p) else min(1.0, 2.0 * p)


def benjamini_hochberg(pvalues: list[float]) -> list[float]:
    """BH-adjusted q-values, in the input order."""
    n = len(pvalues)
    if n == 0:
        return []
    order = sorted(range(n), key=lambda i: pvalues[i])
    adjusted = [0.0] * n
    running = 1.0
    for rank in range(n, 0, -1):
        i = order[rank - 1]
        running = min(running, pvalues[i] * n / rank)
        adjusted[i] = min(1.0, running)
    return adjusted


def _decide(t: TestResult, settings: Settings, up_is_good: bool) -> None:
    if t.n_base < settings.min_samples or t.n_head < settings.min_samples:
        t.verdict, t.reason = Verdict.unknown, f"fewer than {settings.min_samples} samples on a side"
        return
    if t.change is None or t.ci is None or any(math.isnan(x) for x in t.ci):
        t.verdict, t.reason = Verdict.unknown, "no usable median"
        return
    effect = t.min_effect
    low, high = t.ci
    significant = t.p_value is not None and t.p_value < settings.alpha
    if significant and abs(t.change) >= effect and (low > 0 or high < 0):
        worse = (t.change > 0) != up_is_good
        t.verdict = Verdict.regression if worse else Verdict.improvement
        t.reason = f"q={t.p_value:.3g} < {settings.alpha}, |change| >= {effect:.1%}"
    elif -effect < low and high < effect:
        t.verdict, t.reason = Verdict.same, f"CI within ±{effect:.1%}"
    else:
        t.verdict, t.reason = Verdict.unknown, "not significant and CI wider than the minimum effect"


@dataclass(frozen=True)
class SampleColumns:
    """Samples of both sides as columns: ``keys[key[i]]`` is sample i's test, ``head[i]`` its side."""

    keys: Sequence[TestKey]
    key: np.ndarray
    head: np.ndarray
    value: np.ndarray


def _report_order(key: TestKey) -> tuple[str, str, str, str, str]:
    return (key.benchmark, key.test, key.mode, key.device, key.metric)


def columns_from_pairs(base: Iterable[tuple[TestKey, float]], head: Iterable[tuple[TestKey, float]]
                       ) -> SampleColumns:
    """``(key, value)`` pairs of both sides as columns (non-finite values dropped)."""
    index: dict[TestKey, int] = {}
    keys, sides, values = [], [], []
    for side, pairs in ((False, base), (True, head)):
        for key, value in pairs:
            if value is None or not math.isfinite(value):
                continue
            keys.append(index.setdefault(key, len(index)))
            sides.append(side)
            values.append(float(value))
    order = sorted(index, key=_report_order)
    rank = np.empty(len(order), dtype=np.int64)
    rank[[index[k] for k in order]] = np.arange(len(order))
    return SampleColumns(order, rank[np.asarray(keys, dtype=np.int64)], np.asarray(sides, dtype=bool),
                         np.asarray(values, dtype=float))


def compare_samples(
    base: Iterable[tuple[TestKey, float]],
    head: Iterable[tuple[TestKey, float]],
    settings: Settings | None = None,
) -> Comparison:
    """Compare per-test samples of two sides (``(key, value)`` pairs)."""
    return compare_columns(columns_from_pairs(base, head), settings)


def _narrow(ids: np.ndarray) -> np.ndarray:
    """Non-negative ids in the smallest integer type (numpy's stable sort is a radix sort up to 16 bits)."""
    top = int(ids.max()) if ids.size else 0
    return ids.astype(np.uint16 if top < 1 << 16 else np.uint32 if top < 1 << 32 else np.int64)


@dataclass(frozen=True)
class _Sides:
    """Both sides' sorted segments, and every sample pooled and sorted by (test, value)."""

    base: Segments
    head: Segments
    pooled_test: np.ndarray
    pooled_head: np.ndarray
    pooled_value: np.ndarray

    @classmethod
    def of(cls, cols: SampleColumns) -> _Sides:
        keep = np.isfinite(cols.value)
        key, head, value = cols.key[keep], cols.head[keep], cols.value[keep]
        by_value = np.argsort(value, kind="stable")  # then stable sorts by group keep values ordered within
        group = _narrow(key * 2 + head)
        order = by_value[np.argsort(group[by_value], kind="stable")]
        counts = np.bincount(group, minlength=2 * len(cols.keys))
        starts = np.cumsum(counts) - counts
        pooled = by_value[np.argsort(_narrow(key)[by_value], kind="stable")]
        return cls(Segments(value[order], starts[0::2], counts[0::2]),
                   Segments(value[order], starts[1::2], counts[1::2]), key[pooled], head[pooled], value[pooled])

    def tied(self) -> np.ndarray:
        """Per test: does any value occur twice among both sides' samples?"""
        same = (self.pooled_value[1:] == self.pooled_value[:-1]) & (self.pooled_test[1:] == self.pooled_test[:-1])
        out = np.zeros(self.base.count.size, dtype=bool)
        out[self.pooled_test[1:][same]] = True
        return out

    def all_one_value(self) -> np.ndarray:
        """Per test: both sides hold one and the same value throughout."""
        b, h = self.base, self.head
        b_first, b_last = b.values[np.minimum(b.start, b.values.size - 1)], b.values[b.start + b.count - 1]
        h_first, h_last = h.values[np.minimum(h.start, h.values.size - 1)], h.values[h.start + h.count - 1]
        return (b_first == b_last) & (h_first == h_last) & (b_first == h_first)


def _p_values(sides: _Sides, tests: np.ndarray) -> np.ndarray:
    """pinpoint_p of every test in ``tests`` (each has at least 2 samples per side)."""
    if tests.size == 0:
        return np.empty(0)
    p_mwu = mwu_pvalues(sides.base, sides.head, tests, sides.tied())
    d = ks_statistics(sides.pooled_head, sides.pooled_value, sides.pooled_test, sides.base.count,
                      sides.head.count, sides.base.count.size)
    p = pinpoint_combine(p_mwu, ks_pvalues(sides.base, sides.head, tests, d))
    return np.where(sides.all_one_value()[tests], 1.0, p)


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
    tests = []
    for i, key in enumerate(cols.keys):
        if nb[i] + nh[i] == 0:
            continue
        if settings.ignored(key.benchmark, key.test):
            result.ignored.append(key)
            continue
        tests.append(i)
    idx = np.asarray(tests, dtype=np.int64)
    boot = idx[(nb[idx] > 0) & (nh[idx] > 0) & (base_med[idx] != 0)]
    ci = bootstrap_ratio_ci(sides.base, sides.head, boot, [_seed(cols.keys[i]) for i in boot], settings.confidence,
                            settings.bootstrap)
    ci_of = {int(i): (float(lo), float(hi)) for i, (lo, hi) in zip(boot, ci, strict=True)}
    ranked = boot[(nb[boot] >= 2) & (nh[boot] >= 2)]
    p_of = dict(zip(ranked.tolist(), _p_values(sides, ranked).tolist(), strict=True))
    for i in tests:
        key = cols.keys[i]
        t = TestResult(key, int(nb[i]), int(nh[i]), None, None, None, ci_of.get(i), p_of.get(i),
                       min_effect=settings.effect_for(key.benchmark, key.test))
        if nb[i]:
            t.base_median = float(base_med[i])
        if nh[i]:
            t.head_median = float(head_med[i])
        if i in ci_of:
            t.change = t.head_median / t.base_median - 1.0
        result.tests.append(t)
    tested = [t for t in result.tests if t.p_raw is not None]
    for t, q in zip(tested, benjamini_hochberg([t.p_raw for t in tested]), strict=True):
        t.p_value = q
    for t in result.tests:
        _decide(t, settings, higher_is_better(t.key.metric, t.key.unit))
        why = failures.explains(True, t.key.benchmark) if not t.n_head else (
            failures.explains(False, t.key.benchmark) if not t.n_base else "")
        if why:
            t.verdict, t.reason = Verdict.failed, why
    return result


ORDER = {"failed": 0, "regression": 1, "improvement": 2, "unknown": 3, "same": 4}


def sorted_for_report(tests: list[TestResult]) -> list[TestResult]:
    """Failed tests, then regressions (largest change first), improvements, unknown, same."""
    return sorted(tests, key=lambda t: (ORDER[t.verdict], -abs(t.change or 0.0), t.key.benchmark, t.key.test))
