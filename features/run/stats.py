"""Vectorised statistics over many tests at once: medians, bootstrap CIs of the ratio of medians, rank tests.

Pure numpy/scipy, no I/O. Samples come as one value array sorted by (test, side, value); a test's
side is a segment ``values[start:start + n]``.

* Medians: the middle element(s) of each sorted segment, exactly what ``np.median`` returns.
* Bootstrap CI of ``median(head) / median(base) - 1``: the percentile bootstrap, with each
  resample's median drawn directly from its exact distribution instead of drawing ``n`` values
  and sorting them. The median of a size-``n`` resample of sorted data ``x`` is
  ``(x[K1] + x[K2]) / 2`` where ``K1``/``K2`` are the lower/upper middle order statistics of ``n``
  uniform indices: ``P(K1 <= i) = P(Binomial(n, (i+1)/n) >= k)`` with ``k = (n+1) // 2``; for odd
  ``n`` ``K2 = K1``; for even ``n`` ``K2 > K1`` exactly when ``k`` indices are ``<= K1``, and then
  ``K2 - K1`` is the minimum of ``n - k`` uniform offsets over the ``n-1-K1`` slots above. Both
  are drawn by inversion, so one resample costs O(log n) instead of O(n): the same bootstrap
  distribution (checked against full enumeration in the tests), seeded per test.
* Mann-Whitney U: scipy's own test, run once per group of tests of equal sizes (its ``axis``).
* Kolmogorov-Smirnov: the statistic from cumulative counts; scipy's p-value (a function of the
  two sizes and the statistic, for sizes up to 10,000) computed once per distinct triple.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import special, stats

KS_EXACT_MAX = 10_000  # scipy's ks_2samp 'auto' is exact (p depends on sizes and statistic only) up to this size
CHUNK = 512  # tests per bootstrap batch (bounds memory: CHUNK x resamples matrices)
BUCKETS = 1 << 14  # inverse-CDF lookup table size


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


# ---- bootstrap of the median ------------------------------------------------------------------

@dataclass(frozen=True)
class MedianLaw:
    """For a resample of size n, per index ``i``: ``cdf`` = P(K1 <= i) and ``split`` = P(K2 > K1 | K1 = i)."""

    n: int
    cdf: np.ndarray
    split: np.ndarray
    buckets: np.ndarray | None = None  # per bucket of [0, 1): the first index whose CDF reaches the bucket


@lru_cache(maxsize=256)
def median_law(n: int) -> MedianLaw:
    """The exact law of a size-``n`` bootstrap resample's middle order statistics (it depends on n only)."""
    i = np.arange(n, dtype=float)
    k = (n + 1) // 2
    cdf = special.bdtrc(k - 1, n, (i + 1) / n)  # P(Binomial(n, (i+1)/n) > k-1) = P(K1 <= i)
    cdf[-1] = 1.0
    buckets = np.minimum(np.searchsorted(cdf, np.arange(BUCKETS) / BUCKETS, side="left"), n - 1) if n > 16 else None
    p_k1 = np.diff(cdf, prepend=0.0)
    if n % 2:
        return MedianLaw(n, cdf, np.zeros(n), buckets)
    with np.errstate(divide="ignore", invalid="ignore"):
        only_k = stats.binom.pmf(k, n, (i + 1) / n) - stats.binom.pmf(k, n, i / n) * ((n - 1 - i) / (n - i)) ** (n - k)
        split = np.where(p_k1 > 0, np.clip(only_k / p_k1, 0.0, 1.0), 0.0)
    return MedianLaw(n, cdf, split, buckets)


def _inverse(law: MedianLaw, u: np.ndarray) -> np.ndarray:
    """``searchsorted(law.cdf, u, side="left")`` via a bucket table: start at the bucket's first index, then step."""
    if law.buckets is None:
        return np.minimum(np.searchsorted(law.cdf, u, side="left"), law.n - 1)
    flat = u.ravel()
    k = law.buckets[(flat * BUCKETS).astype(np.int64)]
    short = np.flatnonzero(law.cdf[k] < flat)
    while short.size:  # a few steps at most: a bucket spans few CDF steps
        k[short] += 1
        short = short[law.cdf[k[short]] < flat[short]]
    return k.reshape(u.shape)


def draw_medians(seg: Segments, rows: np.ndarray, u1: np.ndarray, u2: np.ndarray) -> np.ndarray:
    """Bootstrap medians of segments ``rows`` (all of one size n) from uniforms ``u1``/``u2`` (rows x R)."""
    law = median_law(int(seg.count[rows[0]]))
    n = law.n
    k1 = _inverse(law, u1)
    k2 = k1
    if n % 2 == 0:  # K2 > K1 with probability split; the gap is the least of n-k uniform offsets over n-1-K1 slots
        split = law.split[k1]
        apart = np.flatnonzero(u2 < split)
        k1a, w = k1.ravel()[apart], u2.ravel()[apart] / split.ravel()[apart]
        m = n - 1 - k1a
        gap = np.ceil(m * -np.expm1(np.log1p(-np.minimum(w, 1.0)) / (n - (n + 1) // 2)))
        k2 = k1.copy()
        k2.ravel()[apart] = k1a + np.clip(gap, 1, np.maximum(m, 1)).astype(np.int64)
    first = seg.start[rows][:, None]
    return (seg.values[first + k1] + seg.values[first + k2]) / 2


def _side_medians(seg: Segments, tests: np.ndarray, u1: np.ndarray, u2: np.ndarray) -> np.ndarray:
    out = np.empty(u1.shape)
    sizes = seg.count[tests]
    for n in np.unique(sizes):
        pos = np.flatnonzero(sizes == n)
        out[pos] = draw_medians(seg, tests[pos], u1[pos], u2[pos])
    return out


def bootstrap_ratio_ci(base: Segments, head: Segments, tests: np.ndarray, seeds: list[int], confidence: float,
                       resamples: int) -> np.ndarray:
    """Percentile bootstrap CIs (rows: low, high) of median(head)/median(base) - 1 for ``tests``."""
    out = np.full((tests.size, 2), np.nan)
    tail = (1.0 - confidence) / 2.0
    for lo in range(0, tests.size, CHUNK):
        chunk = tests[lo:lo + CHUNK]
        u = np.empty((chunk.size, 4, resamples))
        for row, seed in enumerate(seeds[lo:lo + chunk.size]):
            np.random.default_rng(seed).random(out=u[row])
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = _side_medians(head, chunk, u[:, 2], u[:, 3]) / _side_medians(base, chunk, u[:, 0], u[:, 1]) - 1.0
        finite = np.isfinite(ratios)
        clean = finite.all(axis=1)
        if clean.any():
            out[lo:lo + chunk.size][clean] = np.quantile(ratios[clean], [tail, 1.0 - tail], axis=1).T
        for row in np.flatnonzero(~clean):  # a zero base median: keep the finite ratios, as a 1-D quantile
            kept = ratios[row][finite[row]]
            if kept.size:
                out[lo + row] = np.quantile(kept, [tail, 1.0 - tail])
    return out


# ---- rank tests --------------------------------------------------------------------------------

def _groups(keys: list[tuple[int, ...]]) -> dict[tuple[int, ...], np.ndarray]:
    """Positions of each distinct key."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for pos, key in enumerate(keys):
        groups.setdefault(key, []).append(pos)
    return {k: np.asarray(v) for k, v in groups.items()}


def mwu_pvalues(base: Segments, head: Segments, tests: np.ndarray, tied: np.ndarray) -> np.ndarray:
    """Two-sided Mann-Whitney U p-values, scipy's ``mannwhitneyu`` once per group of equal sizes.

    scipy picks the exact test for a batch only when no row has ties (and a side has <= 8
    values), so rows with ties go to their own batch: each p equals a call on that test alone.
    """
    out = np.empty(tests.size)
    nb, nh = base.count[tests], head.count[tests]
    small = (nb <= 8) | (nh <= 8)
    keys = [(int(b), int(h), int(t and s)) for b, h, t, s in zip(nb, nh, tied[tests], small, strict=True)]
    for (b, h, _), pos in _groups(keys).items():
        rows = tests[pos]
        out[pos] = stats.mannwhitneyu(base.rows(rows, b), head.rows(rows, h), alternative="two-sided",
                                      axis=1).pvalue
    return out


def ks_statistics(pooled_head: np.ndarray, pooled_value: np.ndarray, pooled_test: np.ndarray, nb: np.ndarray,
                  nh: np.ndarray, n_tests: int) -> np.ndarray:
    """Per test ``max |cb*nh - ch*nb|`` over the pooled sorted values (the KS statistic times nb*nh).

    ``pooled_*``: every sample sorted by (test, value); cb/ch count the base/head values <= x.
    """
    is_head = pooled_head.astype(np.int64)
    start = np.searchsorted(pooled_test, np.arange(n_tests))
    ch = np.cumsum(is_head)
    cb = np.cumsum(1 - is_head)
    first = start[pooled_test]
    ch = ch - np.where(first > 0, ch[first - 1], 0)
    cb = cb - np.where(first > 0, cb[first - 1], 0)
    last_of_value = np.ones(pooled_value.size, dtype=bool)  # evaluate after every run of equal values
    last_of_value[:-1] = (pooled_value[1:] != pooled_value[:-1]) | (pooled_test[1:] != pooled_test[:-1])
    diff = np.abs(cb * nh[pooled_test] - ch * nb[pooled_test]) * last_of_value
    out = np.zeros(n_tests, dtype=np.int64)
    np.maximum.at(out, pooled_test, diff)
    return out


def ks_2samp_p(base: np.ndarray, head: np.ndarray) -> float:
    """scipy's two-sided ``ks_2samp`` p-value, without its RuntimeWarning: when the exact computation
    fails (e.g. 1000 samples a side and the smallest statistic, where it rounds to just above 1) scipy
    falls back to the asymptotic p-value and warns on stderr; the fallback is kept, the warning is not."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="ks_2samp: Exact calculation unsuccessful", category=RuntimeWarning)
        return float(stats.ks_2samp(base, head).pvalue)


def ks_pvalues(base: Segments, head: Segments, tests: np.ndarray, d_scaled: np.ndarray) -> np.ndarray:
    """Two-sided KS p-values as scipy's ``ks_2samp`` gives them, one call per distinct (nb, nh, statistic)."""
    out = np.empty(tests.size)
    cache: dict[tuple[int, int, int], float] = {}
    for pos, t in enumerate(tests):
        nb, nh = int(base.count[t]), int(head.count[t])
        key = (nb, nh, int(d_scaled[t]))
        if max(nb, nh) > KS_EXACT_MAX:  # asymptotic: scipy uses the float statistic itself
            out[pos] = ks_2samp_p(base.one(t), head.one(t))
            continue
        if key not in cache:
            cache[key] = ks_2samp_p(base.one(t), head.one(t))
        out[pos] = cache[key]
    return out


def pinpoint_combine(p_mwu: np.ndarray, p_ks: np.ndarray) -> np.ndarray:
    """min(MWU p, KS p), doubled, capped at 1; NaN -> 1 (as the per-test function computes it)."""
    p = np.where(p_ks < p_mwu, p_ks, p_mwu)
    return np.where(np.isnan(p), 1.0, np.minimum(1.0, 2.0 * p))
