"""The vectorised compare engine against the previous test-by-test implementation (tests/compare_reference.py),
and its bootstrap of the median against full enumeration."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import numpy as np
import pytest

from perfq.run import compare
from perfq.run.stats import Segments, draw_medians, median_law
from tests import compare_reference as reference

EXACT_FIELDS = ("n_base", "n_head", "base_median", "head_median", "change", "p_raw", "p_value")


def _fixture(seed: int, tests: int) -> tuple[list, list]:
    """Tests of many shapes: 1-30 samples a side (exact and asymptotic rank tests), ties from rounding,
    equal sides, clear regressions and improvements, tiny effects, a zero base median."""
    rng = random.Random(seed)
    base, head = [], []
    for i in range(tests):
        key = compare.TestKey(f"b{i % 7}_test", f"t{i}", "eager", "cpu", "forward_time", "us")
        n1, n2 = rng.choice([1, 2, 3, 5, 7, 8, 9, 12, 30]), rng.choice([1, 2, 3, 5, 7, 8, 9, 12, 30])
        scale, effect = rng.uniform(1, 100), rng.choice([1.0, 1.0, 1.02, 1.3, 0.7])
        digits = rng.choice([None, 0, 1])

        def noisy(factor: float, digits=digits, scale=scale) -> float:
            value = scale * factor * (1 + rng.gauss(0, 0.04))
            return value if digits is None else round(value, digits)

        base += [(key, noisy(1.0)) for _ in range(n1)]
        head += [(key, noisy(effect)) for _ in range(n2)]
    zero = compare.TestKey("z_test", "zero", "eager", "cpu", "forward_time", "us")
    base += [(zero, v) for v in (0.0, 0.0, 0.0, 1.0)]
    head += [(zero, v) for v in (1.0, 2.0, 1.0, 1.0)]
    return base, head


def _reference(base, head, settings=None):
    def as_ref(pairs):
        return [(reference.TestKey(*vars(k).values()), v) for k, v in pairs]

    return reference.compare_samples(as_ref(base), as_ref(head), reference.Settings(**vars(settings or
                                                                                         compare.Settings())))


def test_engine_equals_the_previous_results_on_a_fixture():
    """Medians, changes, sample counts, p-values and BH q-values are bit-identical to the previous
    implementation; CIs are the same bootstrap (Monte Carlo draws differ), so they agree within the
    Monte Carlo error and so do the verdicts of every test not on a decision boundary."""
    base, head = _fixture(3, 400)
    old, new = _reference(base, head), compare.compare_samples(base, head)
    assert [t.key.test for t in old.tests] == [t.key.test for t in new.tests]
    for a, b in zip(old.tests, new.tests, strict=True):
        assert tuple(getattr(a, f) for f in EXACT_FIELDS) == tuple(getattr(b, f) for f in EXACT_FIELDS), a.key
        assert (a.ci is None) == (b.ci is None)
    flips = [(a, b) for a, b in zip(old.tests, new.tests, strict=True) if a.verdict != b.verdict]
    for a, b in flips:  # only where one CI bound sits on 0 or on the minimum effect
        bounds = [x for ci in (a.ci, b.ci) for x in ci]
        edges = (0.0, a.min_effect, -a.min_effect)
        assert min(abs(x - e) for x in bounds for e in edges) < 0.02, (a.key, a.ci, b.ci)
    assert len(flips) <= 2
    counts = new.counts()
    assert counts.pop("failed") == 0 and old.counts() == pytest.approx(counts, abs=2)


def test_ci_agrees_with_the_previous_bootstrap_within_monte_carlo_error():
    rng = np.random.default_rng(11)
    key = compare.TestKey("b", "t", "eager", "cpu", "forward_time", "us")
    widths = []
    for n in (6, 9, 20, 40):
        b, h = rng.lognormal(3, 0.1, n), rng.lognormal(3.05, 0.1, n)
        new = compare.compare_samples([(key, v) for v in b], [(key, v) for v in h]).tests[0].ci
        olds = [reference.bootstrap_ci(b, h, 0.95, 2000, seed) for seed in range(20)]
        spread = np.std([o[0] for o in olds]) + np.std([o[1] for o in olds])
        mean = np.mean(olds, axis=0)
        assert abs(new[0] - mean[0]) < 4 * spread + 1e-9 and abs(new[1] - mean[1]) < 4 * spread + 1e-9, n
        widths.append(mean[1] - mean[0])
    assert widths[0] > widths[-1]  # more samples, narrower interval


def test_settings_and_identical_sides_as_before():
    base, head = _fixture(5, 60)
    settings = compare.Settings(alpha=0.1, min_effect=0.02, min_samples=5, ignore=("b3_test",),
                                thresholds=(("b1_test", 0.5),))
    old, new = _reference(base, head, settings), compare.compare_samples(base, head, settings)
    assert [k.test for k in old.ignored] == [k.test for k in new.ignored] and new.ignored
    assert [(t.key.test, t.p_value, t.min_effect) for t in old.tests] == [
        (t.key.test, t.p_value, t.min_effect) for t in new.tests]
    flat = compare.TestKey("b", "flat", "eager", "cpu", "forward_time", "us")
    t = compare.compare_samples([(flat, 5.0)] * 6, [(flat, 5.0)] * 6).tests[0]
    assert t.ci == (0.0, 0.0) and t.p_raw == 1.0 and t.verdict == compare.Verdict.same


@pytest.mark.parametrize("n", range(1, 8))
def test_bootstrap_median_law_is_exact(n):
    """The law of a resample's middle order statistics equals full enumeration of all n**n resamples."""
    counts = Counter()
    for draw in itertools.product(range(n), repeat=n):
        s = sorted(draw)
        counts[(s[(n - 1) // 2], s[n // 2])] += 1
    law = median_law(n)
    r = n - (n + 1) // 2
    implied, previous = Counter(), 0.0
    for i in range(n):
        p_k1, previous = law.cdf[i] - previous, law.cdf[i]
        implied[(i, i)] += p_k1 * (1 - law.split[i])
        m = n - 1 - i
        for gap in range(1, m + 1):
            implied[(i, i + gap)] += p_k1 * law.split[i] * (((m - gap + 1) / m) ** r - ((m - gap) / m) ** r)
    for pair in set(counts) | set(implied):
        assert implied[pair] == pytest.approx(counts[pair] / n**n, abs=1e-12), pair


@pytest.mark.parametrize("n", [4, 7, 30, 64])
def test_bootstrap_medians_follow_the_resampling_distribution(n):
    """Medians drawn by inversion have the distribution of medians of real resamples (np.median of rng.choice)."""
    x = np.sort(np.random.default_rng(n).lognormal(0, 1, n))
    rng = np.random.default_rng(100 + n)
    resamples = 200_000
    direct = np.median(rng.choice(x, size=(resamples, n)), axis=1)
    seg = Segments(x, np.array([0]), np.array([n]))
    drawn = draw_medians(seg, np.array([0]), rng.random((1, resamples)), rng.random((1, resamples)))[0]
    for q in (0.025, 0.1, 0.25, 0.5, 0.75, 0.9, 0.975):
        lo, hi = np.quantile(direct, [max(q - 0.004, 0), min(q + 0.004, 1)])
        assert lo <= np.quantile(drawn, q) <= hi, q
