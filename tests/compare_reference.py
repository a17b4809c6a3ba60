"""perfq compare's statistics as they were before the vectorised engine: test by test, with a
2000-resample Monte Carlo bootstrap (``rng.choice`` of whole resamples). Not used by perfq: the
reference tests/test_run_compare_engine.py holds the vectorised engine (perfq.run.compare) to."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

# what the statistics read and decide with is the engine's own (only the statistics are the old ones)
from perfq.run.compare import Settings, TestKey, Verdict, higher_is_better  # noqa: E402


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
        """Tests per verdict (the four verdicts this implementation had: no ``failed``)."""
        out = dict.fromkeys(("regression", "improvement", "same", "unknown"), 0)
        for t in self.tests:
            out[t.verdict] += 1
        return out


def _seed(key: TestKey) -> int:
    digest = hashlib.sha256(repr(key).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def bootstrap_ci(
    base: np.ndarray, head: np.ndarray, confidence: float, resamples: int, seed: int
) -> tuple[float, float]:
    """Percentile bootstrap CI of median(head)/median(base) - 1."""
    rng = np.random.default_rng(seed)
    b = rng.choice(base, size=(resamples, base.size), replace=True)
    h = rng.choice(head, size=(resamples, head.size), replace=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.median(h, axis=1) / np.median(b, axis=1) - 1.0
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0:
        return (math.nan, math.nan)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(ratios, [tail, 1.0 - tail])
    return (float(low), float(high))


def pinpoint_p(base: np.ndarray, head: np.ndarray) -> float:
    """min(Mann-Whitney U p, Kolmogorov-Smirnov p), doubled and capped at 1."""
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


def compare_samples(
    base: Iterable[tuple[TestKey, float]],
    head: Iterable[tuple[TestKey, float]],
    settings: Settings | None = None,
) -> Comparison:
    """Compare per-test samples of two sides (``(key, value)`` pairs)."""
    settings = settings or Settings()
    groups: dict[TestKey, tuple[list[float], list[float]]] = {}
    for side, pairs in ((0, base), (1, head)):
        for key, value in pairs:
            if value is None or not math.isfinite(value):
                continue
            groups.setdefault(key, ([], []))[side].append(float(value))
    result = Comparison()
    for key in sorted(groups, key=lambda k: (k.benchmark, k.test, k.mode, k.device, k.metric)):
        if settings.ignored(key.benchmark, key.test):
            result.ignored.append(key)
            continue
        b = np.asarray(groups[key][0], dtype=float)
        h = np.asarray(groups[key][1], dtype=float)
        t = TestResult(
            key,
            b.size,
            h.size,
            None,
            None,
            None,
            None,
            None,
            min_effect=settings.effect_for(key.benchmark, key.test),
        )
        if b.size:
            t.base_median = float(np.median(b))
        if h.size:
            t.head_median = float(np.median(h))
        if b.size and h.size and t.base_median:
            t.change = t.head_median / t.base_median - 1.0
            t.ci = bootstrap_ci(b, h, settings.confidence, settings.bootstrap, _seed(key))
            if b.size >= 2 and h.size >= 2:
                t.p_raw = pinpoint_p(b, h)
        result.tests.append(t)
    tested = [t for t in result.tests if t.p_raw is not None]
    for t, q in zip(tested, benjamini_hochberg([t.p_raw for t in tested]), strict=True):
        t.p_value = q
    for t in result.tests:
        _decide(t, settings, higher_is_better(t.key.metric, t.key.unit))
    return result
