"""Vectorised statistics over many tests at once: medians, and Welch's test of the log-times.

Pure numpy/scipy, no I/O. Samples come as one value array sorted by (test, side, value); a test's
side is a segment ``values[start:start + n]``.

* Medians: the middle element(s) of each sorted segment, exactly what ``np.median`` returns.
* Yuen's trimmed Welch test on the logarithms of the values (:func:`log_welch`): its estimate is
  the difference of the ``trim``-trimmed means of the log-values (the log of the ratio of the
  trimmed geometric means of head and base), its confidence intervals are those of that
  difference; ``trim=0`` is Welch's test itself. scipy's ``ttest_ind`` (``equal_var=False``,
  ``trim``) runs once per group of tests with equal sample sizes (its ``axis``), so each result
  equals a call on that test alone.
* The sides' shared speed (:func:`shared_shift`): per invocation group (one round of one side), the median
  over its tests of log(value) less the test's pooled median; Welch's test of the head's groups against
  the base's, and every sample's residual (its log-value less both) for each test's own change.
* The untrimmed (Welch) TOST interval is returned too (``stop_ci``): sequential sampling stops on
  its width. The winsorized variance of a few samples is too unstable to stop on (simulated
  sequential A/As from 5 samples: 6.2-7.5% false positives when the stop looks at the trimmed
  interval, 5.1-5.4% when it looks at Welch's and the verdict at the trimmed one).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class Segments:
    """Sorted value segments: ``values[start[j]:start[j] + count[j]]`` for test ``j`` of one side."""

    values: np.ndarray
    start: np.ndarray
    count: np.ndarray

    def rows(self, tests: np.ndarray, n: int) -> np.ndarray:
        """The segments of ``tests`` (all of length ``n``) as a (len(tests), n) matrix."""
        return self.values[self.start[tests, None] + np.arange(n)]

    def one(self, test: int) -> np.ndarray:
        return self.values[self.start[test]:self.start[test] + self.count[test]]


def medians(seg: Segments) -> np.ndarray:
    """The median of every segment (NaN for an empty one), bit-identical to ``np.median``."""
    out = np.full(seg.count.shape, np.nan)
    has = seg.count > 0
    lo = seg.values[seg.start[has] + (seg.count[has] - 1) // 2]
    hi = seg.values[seg.start[has] + seg.count[has] // 2]
    out[has] = (lo + hi) / 2
    return out


def trimmed_geomeans(seg: Segments, trim: float) -> np.ndarray:
    """The ``trim``-trimmed geometric mean of every segment of positive values (NaN for an empty one or one
    with a value <= 0): ``exp(scipy.stats.trim_mean(log(values), trim))``, the center the change compares."""
    out = np.full(seg.count.shape, np.nan)
    positive = seg.values > 0
    logs = np.log(np.where(positive, seg.values, 1.0))
    sums = np.concatenate([[0.0], np.cumsum(logs)])
    cut = np.floor(trim * seg.count).astype(np.int64)  # scipy's trim_mean cuts int(trim * n) at each end
    kept = seg.count - 2 * cut
    has = kept > 0
    has[has] = positive[seg.start[has]]  # a segment is sorted: its first value is its smallest
    low, high = seg.start[has] + cut[has], seg.start[has] + seg.count[has] - cut[has]
    out[has] = np.exp((sums[high] - sums[low]) / kept[has])
    return out


def modes_apart(seg: Segments, trim: float, ratio: float) -> np.ndarray:
    """Per segment (sorted positive values): its values fall in two modes at least ``ratio`` apart (the
    widest gap between neighbours), each holding more values than trimming cuts at one end, so the
    trimmed mean cannot set the minority aside: a side whose processes jump between modes."""
    out = np.zeros(seg.count.shape, dtype=bool)
    for j in np.flatnonzero(seg.count >= 4):
        values = seg.one(j)
        if values[0] <= 0:
            continue
        gaps = np.diff(np.log(values))
        k = int(np.argmax(gaps)) + 1  # the slow mode starts at k
        fewest = int(trim * values.size) + 1
        out[j] = gaps[k - 1] >= np.log(ratio) and min(k, values.size - k) >= max(fewest, 2)
    return out


@dataclass(frozen=True)
class LogWelch:
    """Per test: the log-ratio estimate, its two-sided p-value and CIs (rows: low, high) at two levels."""

    estimate: np.ndarray
    pvalue: np.ndarray
    ci: np.ndarray  # at ``confidence`` (the regression test's interval)
    tost_ci: np.ndarray  # at ``1 - 2 * (1 - confidence) / 2``: TOST's interval (90% for a 95% test)
    stop_ci: np.ndarray  # the TOST interval of the untrimmed test (Welch's): the one sampling stops on


def _groups(sizes: list[tuple[int, int]]) -> dict[tuple[int, int], np.ndarray]:
    """Positions of each distinct (base size, head size)."""
    groups: dict[tuple[int, int], list[int]] = {}
    for pos, key in enumerate(sizes):
        groups.setdefault(key, []).append(pos)
    return {k: np.asarray(v) for k, v in groups.items()}


def _welch_rows(lb: np.ndarray, lh: np.ndarray, confidence: float, tost: float, trim: float
                ) -> tuple[np.ndarray, ...]:
    """(Trimmed) Welch on rows of log-values, and Welch's TOST interval; rows whose sides are both
    constant get an exact answer."""
    d = stats.trim_mean(lh, trim, axis=1) - stats.trim_mean(lb, trim, axis=1)
    constant = (np.ptp(lb, axis=1) == 0) & (np.ptp(lh, axis=1) == 0)
    p = np.where(d == 0, 1.0, 0.0)
    ci = np.stack([d, d], axis=1)
    tci, sci = ci.copy(), ci.copy()
    varied = ~constant
    if varied.any():
        with warnings.catch_warnings():  # nearly equal values: scipy warns of precision loss; the p is still right
            warnings.simplefilter("ignore", RuntimeWarning)
            res = stats.ttest_ind(lh[varied], lb[varied], axis=1, equal_var=False, trim=trim)
            plain = res if trim == 0 else stats.ttest_ind(lh[varied], lb[varied], axis=1, equal_var=False)
        p[varied] = res.pvalue
        for out, result, level in ((ci, res, confidence), (tci, res, tost), (sci, plain, tost)):
            low, high = result.confidence_interval(level)
            out[varied] = np.stack([low, high], axis=1)
    return d, p, ci, tci, sci


def log_welch(base: Segments, head: Segments, tests: np.ndarray, confidence: float, trim: float = 0.0) -> LogWelch:
    """Yuen's (``trim`` > 0) or Welch's t-test of log(head) against log(base) for ``tests`` (each with
    >= 2 positive values a side)."""
    est, p = np.empty(tests.size), np.empty(tests.size)
    ci, tci, sci = np.empty((tests.size, 2)), np.empty((tests.size, 2)), np.empty((tests.size, 2))
    tost = 1.0 - 2.0 * (1.0 - confidence)
    sizes = [(int(b), int(h)) for b, h in zip(base.count[tests], head.count[tests], strict=True)]
    for (nb, nh), pos in _groups(sizes).items():
        rows = tests[pos]
        est[pos], p[pos], ci[pos], tci[pos], sci[pos] = _welch_rows(
            np.log(base.rows(rows, nb)), np.log(head.rows(rows, nh)), confidence, tost, trim)
    return LogWelch(est, p, ci, tci, sci)


@dataclass(frozen=True)
class SharedShift:
    """The speed all tests of one invocation share, compared between the sides.

    Under contention a whole benchmark process runs faster or slower (±10-30% from one process to the
    next, every test of it alike: docs/run.md "Contention"), so the tests of a comparison are not
    independent: when the processes of one side happened to be faster, every test reads that side
    faster together. ``estimate``/``ci``/``pvalue``: Welch's test of the head's per-invocation
    shared speeds (log) against the base's, the interval at the strict confidence asked for;
    ``residual``: per sample, its log-value less its test's pooled median and its invocation's shared
    speed (NaN where its invocation measured too few tests to have one)."""

    estimate: float
    ci: tuple[float, float]
    pvalue: float
    invocations: tuple[int, int]  # (base, head) invocations with a shared speed
    spread: float  # standard deviation of the per-invocation shared speeds (log), both sides pooled
    residual: np.ndarray


def _segment_medians(ids: np.ndarray, values: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(median, count) of ``values`` per id in ``range(size)`` (NaN for an empty id)."""
    order = np.lexsort((values, ids))
    counts = np.bincount(ids, minlength=size)
    return medians(Segments(values[order], np.cumsum(counts) - counts, counts)), counts


def shared_shift(key: np.ndarray, group: np.ndarray, head: np.ndarray, value: np.ndarray, min_tests: int,
                 confidence: float) -> SharedShift | None:
    """The sides' shared-speed comparison (:class:`SharedShift`) of samples whose ``group`` (>= 0) says the
    invocation they came from (one round of one side's run); None unless each side has >= 3 invocations of
    at least ``min_tests`` samples (fewer tests a process: no shared speed to tell from a test's own)."""
    ok = (group >= 0) & (value > 0)
    residual = np.full(value.shape, np.nan)
    if not ok.any():
        return None
    logs = np.log(np.where(ok, value, 1.0))
    idx = np.flatnonzero(ok)
    center, _ = _segment_medians(key[idx], logs[idx], int(key.max()) + 1)
    deviation = logs[idx] - center[key[idx]]
    groups, local = np.unique(group[idx], return_inverse=True)
    common, counts = _segment_medians(local, deviation, groups.size)
    group_head = np.zeros(groups.size, dtype=bool)
    group_head[local] = head[idx]
    eligible = counts >= min_tests
    base, later = common[eligible & ~group_head], common[eligible & group_head]
    if base.size < 3 or later.size < 3:
        return None
    kept = eligible[local]
    residual[idx[kept]] = deviation[kept] - common[local[kept]]
    with warnings.catch_warnings():  # identical shared speeds: scipy warns; the p is still right
        warnings.simplefilter("ignore", RuntimeWarning)
        res = stats.ttest_ind(later, base, equal_var=False)
        low, high = res.confidence_interval(confidence)
    estimate = float(np.mean(later) - np.mean(base))
    if not np.isfinite(res.pvalue):  # both sides constant
        low = high = estimate
    spread = float(np.std(np.concatenate([base - np.mean(base), later - np.mean(later)]), ddof=2))
    return SharedShift(estimate, (float(low), float(high)), float(res.pvalue) if np.isfinite(res.pvalue) else
                       float(estimate == 0), (int(base.size), int(later.size)), spread, residual)
