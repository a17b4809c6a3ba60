"""perfq.run.compare statistics and verdicts (Welch on log-times, TOST resolution, sequential stopping),
and the JSON/markdown report."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from perfq.run.compare import SampleColumns, Settings, TestKey, compare_columns, compare_samples, settings_from_config
from perfq.run.report import comparison_document, render_markdown
from perfq.run.runs import Run


def key(test: str, bench: str = "b_test", unit: str = "us", metric: str = "forward_time") -> TestKey:
    return TestKey(bench, test, "eager", "cpu", metric, unit)


def pairs(k: TestKey, values) -> list[tuple[TestKey, float]]:
    return [(k, v) for v in values]


def lognormal(rng: np.random.Generator, n: int, sigma: float, shift: float = 0.0) -> list[float]:
    return np.exp(3.0 + shift + sigma * rng.standard_normal(n)).tolist()


@pytest.mark.parametrize("trim", [0.2, 0.0])
def test_change_ci_and_p_are_yuen_or_welch_on_log_times(trim):
    """Yuen's trimmed Welch test by default (trim 0.2), Welch's with trim 0."""
    rng = np.random.default_rng(5)
    b, h = lognormal(rng, 8, 0.05), lognormal(rng, 11, 0.05, 0.08)
    t = compare_samples(pairs(key("t"), b), pairs(key("t"), h), Settings(trim=trim)).tests[0]
    res = stats.ttest_ind(np.log(h), np.log(b), equal_var=False, trim=trim)
    assert t.change == pytest.approx(math.exp(stats.trim_mean(np.log(h), trim) - stats.trim_mean(np.log(b), trim)) - 1)
    assert math.log1p(t.change) == pytest.approx(float(np.mean(res.confidence_interval(0.95))))  # the CI's centre
    assert t.p_raw == pytest.approx(res.pvalue) and t.p_value == pytest.approx(res.pvalue)  # one test: q = p
    assert t.ci == pytest.approx(tuple(np.expm1(res.confidence_interval(0.95))))
    assert t.tost_ci == pytest.approx(tuple(np.expm1(res.confidence_interval(0.90))))
    assert t.resolution == pytest.approx(max(abs(x) for x in t.tost_ci))


def test_vectorised_equals_test_by_test():
    rng = np.random.default_rng(2)
    base, head = [], []
    for i in range(40):
        nb, nh = int(rng.integers(2, 12)), int(rng.integers(2, 12))
        base += pairs(key(f"t{i}"), lognormal(rng, nb, 0.04))
        head += pairs(key(f"t{i}"), lognormal(rng, nh, 0.04, float(rng.choice([0.0, 0.1]))))
    together = {t.key: t for t in compare_samples(base, head).tests}
    for k, t in together.items():
        mine_b, mine_h = [v for x, v in base if x == k], [v for x, v in head if x == k]
        assert (t.base_median, t.head_median) == (np.median(mine_b), np.median(mine_h))
        alone = compare_samples(pairs(k, mine_b), pairs(k, mine_h)).tests[0]
        assert (alone.change, *alone.ci, *alone.tost_ci, alone.p_raw) == pytest.approx(
            (t.change, *t.ci, *t.tost_ci, t.p_raw))


def test_bh_is_scipys_false_discovery_control_over_all_tests():
    rng = np.random.default_rng(3)
    base, head = [], []
    for i in range(25):
        base += pairs(key(f"t{i}"), lognormal(rng, 6, 0.05))
        head += pairs(key(f"t{i}"), lognormal(rng, 6, 0.05, 0.1 if i < 5 else 0.0))
    tests = compare_samples(base, head).tests
    q = stats.false_discovery_control([t.p_raw for t in tests], method="bh")
    assert [t.p_value for t in tests] == pytest.approx(list(q))
    edge = [t for t in tests if t.p_raw < 0.05]
    assert edge and all(t.p_value >= t.p_raw for t in edge)


def test_verdicts_regression_improvement_same_unknown():
    slow, fast, flat, few = key("slow"), key("fast"), key("flat"), key("few")
    base = pairs(slow, [10, 10.2, 9.9, 10.1, 10.0, 9.95]) + pairs(fast, [20, 20.5, 19.8, 20.1, 20.2, 19.9])
    head = pairs(slow, [13, 13.1, 12.9, 13.2, 12.8, 13.05]) + pairs(fast, [15, 15.2, 14.9, 15.1, 15.0, 14.8])
    base += pairs(flat, [5.0] * 6) + pairs(few, [1.0, 1.0])
    head += pairs(flat, [5.0] * 6) + pairs(few, [3.0, 3.0])
    result = compare_samples(base, head, Settings(min_samples=3))
    by = {t.key.test: t for t in result.tests}
    assert by["slow"].verdict == "regression" and by["slow"].change == pytest.approx(0.30, abs=0.005)
    assert by["slow"].ci[0] > 0.2 and by["slow"].p_value < 0.05
    assert by["fast"].verdict == "improvement" and by["fast"].change < -0.2
    assert by["flat"].verdict == "same" and by["flat"].ci == (0.0, 0.0) and by["flat"].resolution == 0.0
    assert by["few"].verdict == "unknown"  # 2 samples per side are below min_samples
    assert result.counts() == {"regression": 1, "improvement": 1, "same": 1, "unknown": 1, "failed": 0, "unstable": 0}


def test_small_effect_is_not_a_regression_and_throughput_direction():
    tiny = key("tiny")
    base = pairs(tiny, [100 + i * 0.01 for i in range(10)])
    head = pairs(tiny, [101 + i * 0.01 for i in range(10)])  # +1%: significant but below the 5% minimum
    t = compare_samples(base, head).tests[0]
    assert t.p_value < 0.05 and t.verdict == "same" and 0.01 < t.resolution < 0.011
    bw = key("bw", unit="GB/s", metric="bandwidth")
    t = compare_samples(pairs(bw, [10, 10.1, 9.9, 10.05, 9.95]), pairs(bw, [14, 14.1, 13.9, 14.05, 13.95])).tests[0]
    assert t.change > 0.3 and t.verdict == "improvement"  # more GB/s is better


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), sigma=st.floats(0.002, 0.01), scale=st.floats(1.0, 1e5))
def test_equal_distributions_are_same_within_their_resolution(seed, sigma, scale):
    rng = np.random.default_rng(seed)
    b, h = lognormal(rng, 12, sigma), lognormal(rng, 12, sigma)
    t = compare_samples(pairs(key("t"), [scale * v for v in b]), pairs(key("t"), [scale * v for v in h])).tests[0]
    assert t.verdict == "same"
    assert abs(t.change) <= t.resolution <= 0.03 + abs(t.change)


def test_ten_percent_shift_is_a_regression_with_enough_samples():
    rng = np.random.default_rng(8)
    found = 0
    for i in range(20):
        b, h = lognormal(rng, 20, 0.04), lognormal(rng, 20, 0.04, math.log(1.10))
        t = compare_samples(pairs(key(f"t{i}"), b), pairs(key(f"t{i}"), h)).tests[0]
        found += t.verdict == "regression"
        assert t.verdict in ("regression", "same")  # 20 samples: the ceiling, so always decided
    assert found >= 19


def test_unknown_when_sampling_ends_early_states_the_resolution():
    rng = np.random.default_rng(4)
    b, h = lognormal(rng, 5, 0.08), lognormal(rng, 5, 0.08)
    t = compare_samples(pairs(key("t"), b), pairs(key("t"), h)).tests[0]
    assert t.verdict == "unknown" and not t.stopped(Settings())
    assert t.resolution > 0.03 and f"±{t.resolution:.1%}" in t.reason
    ceiling = compare_samples(pairs(key("t"), b), pairs(key("t"), h), Settings(max_samples=5)).tests[0]
    assert ceiling.stopped(Settings(max_samples=5)) and ceiling.resolution == t.resolution > 0.05
    assert ceiling.verdict == "unknown" and "sample ceiling" in ceiling.reason  # stopped, but wider than 5%
    wide = Settings(max_samples=5, min_effect=0.5)
    decided = compare_samples(pairs(key("t"), b), pairs(key("t"), h), wide).tests[0]
    assert decided.verdict == "same" and decided.resolution == t.resolution  # within its minimum effect: decided


def test_an_unknown_at_the_ceiling_samples_on_up_to_the_extended_ceiling_a_same_does_not():
    rng = np.random.default_rng(4)
    settings = Settings(max_samples=5)
    noisy = (pairs(key("noisy"), lognormal(rng, 5, 0.08)), pairs(key("noisy"), lognormal(rng, 5, 0.08)))
    quiet = (pairs(key("quiet"), lognormal(rng, 5, 0.001)), pairs(key("quiet"), lognormal(rng, 5, 0.001)))
    result = compare_samples(noisy[0] + quiet[0], noisy[1] + quiet[1], settings)
    assert {t.key.test: t.verdict for t in result.tests} == {"noisy": "unknown", "quiet": "same"}
    assert result.undecided_keys(settings) == []  # both stopped at the ceiling of 5
    assert result.sampling_keys(settings, 25) == [key("noisy")]  # the unknown one samples on
    assert result.sampling_keys(settings, 5) == []
    past = compare_samples(pairs(key("t"), lognormal(rng, 8, 0.08)), pairs(key("t"), lognormal(rng, 8, 0.08)),
                           settings).tests[0]
    assert past.verdict == "unknown" and "past the ceiling (5 a side) to 8" in past.reason


def test_same_never_wider_than_the_minimum_effect():
    """A bimodal side (processes landing in a 1.4x slower mode) reaches the ceiling with R above 5%:
    ``unknown ±R``, not ``same ±R``; every ``same`` is within the test's own minimum effect."""
    rng = np.random.default_rng(11)
    modes = np.where(rng.random(40) < 0.4, 1.4, 1.0)
    b, h = (np.exp(3.0 + 0.02 * rng.standard_normal(20)) * modes[:20]).tolist(), (
        np.exp(3.0 + 0.02 * rng.standard_normal(20)) * modes[20:]).tolist()
    result = compare_samples(pairs(key("bi"), b) + pairs(key("calm"), [20.0, 20.1, 19.9] * 7),
                             pairs(key("bi"), h) + pairs(key("calm"), [20.05, 20.0, 19.95] * 7))
    by = {t.key.test: t for t in result.tests}
    assert by["bi"].resolution > 0.05 and by["bi"].verdict == "unknown" and "ceiling" in by["bi"].reason
    assert by["calm"].verdict == "same" and by["calm"].resolution <= 0.05
    wide = compare_samples(pairs(key("bi"), b), pairs(key("bi"), h),
                           Settings(thresholds=(("b_test/bi", 0.5),))).tests[0]
    assert wide.verdict == "same" and wide.resolution <= wide.min_effect == 0.5


def test_shown_centers_are_the_compared_trimmed_geometric_means():
    rng = np.random.default_rng(8)
    b, h = lognormal(rng, 10, 0.1), lognormal(rng, 13, 0.1, 0.2)
    t = compare_samples(pairs(key("t"), b), pairs(key("t"), h)).tests[0]
    assert t.base_center == pytest.approx(math.exp(stats.trim_mean(np.log(b), 0.2)))
    assert t.head_center == pytest.approx(math.exp(stats.trim_mean(np.log(h), 0.2)))
    assert t.head_center / t.base_center - 1 == pytest.approx(t.change)


def test_sampling_stops_on_welchs_interval_the_verdict_is_on_the_trimmed_one():
    rng = np.random.default_rng(6)
    b, h = lognormal(rng, 9, 0.05), lognormal(rng, 12, 0.05, 0.08)
    t = compare_samples(pairs(key("t"), b), pairs(key("t"), h)).tests[0]
    welch = stats.ttest_ind(np.log(h), np.log(b), equal_var=False)
    yuen = stats.ttest_ind(np.log(h), np.log(b), equal_var=False, trim=0.2)
    assert t.stop_ci == pytest.approx(tuple(np.expm1(welch.confidence_interval(0.90))))
    assert t.tost_ci == pytest.approx(tuple(np.expm1(yuen.confidence_interval(0.90))))
    assert t.p_raw == pytest.approx(yuen.pvalue)


def test_trimming_keeps_a_slow_mode_of_some_invocations_from_hiding_a_shift():
    """A test whose invocations land in a slow mode now and then (a quarter of them twice as slow,
    as softmax N4 on 2 cores): 20 samples a side, head 10% slower. Welch's interval takes the modes
    for noise; the trimmed one sees the shift."""
    rng = np.random.default_rng(11)
    found = {0.0: 0, 0.2: 0}
    for _ in range(40):
        b = np.exp(0.02 * rng.standard_normal(20) + np.log(2.1) * (np.arange(20) % 7 == 3))
        h = np.exp(0.02 * rng.standard_normal(20) + np.log(2.1) * (np.arange(20) % 7 == 5)) * 1.10
        for trim in found:
            t = compare_samples(pairs(key("t"), b), pairs(key("t"), h), Settings(trim=trim)).tests[0]
            found[trim] += t.verdict == "regression"
    assert found[0.2] == 40 and found[0.0] < 20, found


def _sequential_aa(settings: Settings, n_tests: int, seed: int) -> list:
    """Simulated A/As sampled as ``perfq run`` does: 5 samples a side, then one more per look while undecided."""
    rng = np.random.default_rng(seed)
    sigma = rng.uniform(0.01, 0.06, n_tests)
    n_max = settings.max_samples
    base = np.exp(sigma[:, None] * rng.standard_normal((n_tests, n_max)))
    head = np.exp(sigma[:, None] * rng.standard_normal((n_tests, n_max)))
    keys = [key(f"t{i}") for i in range(n_tests)]
    running, final = np.ones(n_tests, dtype=bool), []
    for n in range(5, n_max + 1):
        idx = np.flatnonzero(running)
        cols = SampleColumns([keys[i] for i in idx], np.repeat(np.arange(idx.size), 2 * n),
                             np.tile(np.r_[np.zeros(n, dtype=bool), np.ones(n, dtype=bool)], idx.size),
                             np.concatenate([base[idx, :n], head[idx, :n]], axis=1).ravel())
        for pos, t in enumerate(compare_columns(cols, settings).tests):
            if t.stopped(settings):
                final.append(t)
                running[idx[pos]] = False
    return final


def test_sequential_stopping_keeps_the_false_positive_rate_at_alpha():
    """Looking after every sample and stopping once the intervals are narrow does not inflate the error:
    per test (raw p, no BH) the false-positive rate stays at alpha; ``same`` only within the minimum effect."""
    final = _sequential_aa(Settings(), 1500, seed=1)
    assert len(final) == 1500
    rate = sum(t.p_raw < 0.05 for t in final) / len(final)
    assert rate <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / 1500)
    assert sum(t.ci[0] <= 0 <= t.ci[1] for t in final) / len(final) >= 0.95 - 2 * math.sqrt(0.05 * 0.95 / 1500)
    assert {t.verdict for t in final} == {"same", "unknown"}  # with BH across the tests: no false verdict
    assert all(t.resolution <= 0.05 for t in final if t.verdict == "same")
    assert sum(t.verdict == "same" for t in final) >= 0.6 * len(final)  # the rest: noise up to 6% at 20 samples


def test_noisy_aa_simulation_has_no_false_regressions():
    rng = random.Random(7)
    base, head = [], []
    for i in range(60):
        k = key(f"t{i}")
        scale = rng.uniform(5, 500)
        base += pairs(k, [scale * (1 + rng.gauss(0, 0.08)) for _ in range(7)])
        head += pairs(k, [scale * (1 + rng.gauss(0, 0.08)) for _ in range(7)])
    result = compare_samples(base, head, Settings(max_samples=7))
    counts = result.counts()
    assert counts["regression"] == counts["improvement"] == 0 and counts["same"] + counts["unknown"] == 60
    assert all(t.resolution <= 0.05 for t in result.tests if t.verdict == "same")  # 8% noise, 7 samples: mostly unknown
    # a real 30% slowdown in the same noise is found on most tests
    base2, head2 = [], []
    for i in range(20):
        k = key(f"s{i}")
        base2 += pairs(k, [100 * (1 + rng.gauss(0, 0.08)) for _ in range(7)])
        head2 += pairs(k, [130 * (1 + rng.gauss(0, 0.08)) for _ in range(7)])
    assert compare_samples(base2, head2, Settings(max_samples=7)).counts()["regression"] >= 16


def test_bh_correction_spans_all_tests():
    # one borderline test alone is significant; among many null tests BH raises its q
    edge = key("edge")
    b = [10.0, 10.2, 10.1, 9.9, 10.05]
    h = [10.9, 11.2, 11.0, 10.8, 11.1]
    alone = compare_samples(pairs(edge, b), pairs(edge, h), Settings(min_effect=0.05)).tests[0]
    assert alone.p_value == pytest.approx(alone.p_raw)
    base, head = pairs(edge, b), pairs(edge, h)
    for i in range(30):
        k = key(f"null{i}")
        base += pairs(k, [1.0, 1.1, 0.9, 1.05, 0.95])
        head += pairs(k, [1.02, 1.08, 0.92, 1.0, 0.97])
    crowded = {t.key.test: t for t in compare_samples(base, head).tests}["edge"]
    assert crowded.p_value > alone.p_value


def test_settings_from_config_thresholds_and_ignore():
    extra = {
        "compare": {
            "alpha": 0.01,
            "min_effect": 0.02,
            "ignore": ["flaky_test", "b_test/skip*"],
            "thresholds": {"b_test": 0.5},
        }
    }
    s = settings_from_config(extra, min_effect=None)
    assert s.alpha == 0.01 and s.effect_for("other", "x") == 0.02 and s.effect_for("b_test", "x") == 0.5
    slow, skip = key("slow"), key("skip_me")
    base = pairs(slow, [10, 10.1, 9.9, 10.0, 10.05]) + pairs(skip, [1, 1, 1])
    head = pairs(slow, [13, 13.1, 12.9, 13.0, 13.05]) + pairs(skip, [9, 9, 9])
    base += pairs(key("x", bench="flaky_test"), [1, 1, 1])
    head += pairs(key("x", bench="flaky_test"), [5, 5, 5])
    result = compare_samples(base, head, s)
    assert [t.key.test for t in result.tests] == ["slow"]
    assert result.tests[0].verdict == "same"  # +30% is below this benchmark's 50% threshold
    assert {k.test for k in result.ignored} == {"skip_me", "x"}
    assert settings_from_config(extra, min_effect=0.1).min_effect == 0.1
    with pytest.raises(ValueError):
        settings_from_config({"compare": {"thresholds": 3}})


def _typed_doc(n_same: int):
    return _document(n_same)


def _doc(n_same: int):
    return _document(n_same).to_json()


def _document(n_same: int):
    base, head = [], []
    reg, imp = key("reg"), key("imp")
    spread = [1.0, 1.01, 0.99, 1.0, 1.005, 0.995, 1.002, 0.998]  # 8 samples: q survives BH over 17 tests
    base += pairs(reg, [10 * s for s in spread]) + pairs(imp, [10 * s for s in spread])
    head += pairs(reg, [20 * s for s in spread]) + pairs(imp, [5 * s for s in spread])
    for i in range(n_same):
        base += pairs(key(f"same{i}"), [3.0] * 4)
        head += pairs(key(f"same{i}"), [3.0] * 4)
    result = compare_samples(base, head)
    b = Run(
        label="L",
        side="base",
        ref="main",
        commit_sha="aaa111",
        torch_version="2.13.0",
        host="h1",
        status="complete",
    )
    h = Run(
        label="L",
        side="head",
        ref="pr",
        commit_sha="bbb222",
        torch_version="2.13.0",
        host="h2",
        status="complete",
    )
    h.add_failure("broken_test", "python -m pt.broken_test", 1, "RuntimeError: boom")
    return comparison_document("L", [b], [h], result)


def test_json_document_shape():
    doc = _doc(2)
    assert {"base", "head", "tests"} <= set(doc)
    assert doc["base"]["commit"] == "aaa111" and doc["head"]["ref"] == "pr"
    first = doc["tests"][0]
    for field in (
        "benchmark",
        "test",
        "mode",
        "device",
        "base_median",
        "head_median",
        "change",
        "ci",
        "p_value",
        "verdict",
    ):
        assert field in first
    assert [t["verdict"] for t in doc["tests"]] == ["regression", "improvement", "same", "same"]
    assert doc["tests"][2]["resolution"] == 0.0 and first["resolution"] > 0.9  # "no change beyond ±R"
    assert first["change"] == pytest.approx(1.0, rel=0.01) and len(first["ci"]) == 2
    assert doc["head"]["failures"][0]["stderr_tail"] == "RuntimeError: boom"


def test_markdown_summary_first_regressions_first_env_last_details_fold():
    md = render_markdown(_typed_doc(15))
    lines = md.splitlines()
    assert "1 regression(s), 1 improvement(s), 15 same" in lines[0]
    assert md.index("| regression |") < md.index("| improvement |") < md.index("| same ±0.0% |")
    assert "<details><summary>Same (no change beyond ±R, within the minimum effect) (15)</summary>" in md  # folded
    assert "Improvements** (1)" in md  # short table shown
    env = md.index("**Environment**")
    assert env > md.index("| same ±0.0% |") and "aaa111" in md[env:] and "bbb222" in md[env:]
    assert "broken_test" in md


@pytest.mark.parametrize("trim", [-0.1, 0.5, float("nan"), 0.9])
def test_trim_out_of_range_is_refused(trim):
    with pytest.raises(ValueError, match=r"^trim must be in \[0, 0.5\)"):
        settings_from_config({"compare": {"trim": trim}})


def test_trim_from_config():
    assert settings_from_config({"compare": {"trim": 0.1}}).trim == 0.1
    assert settings_from_config({"compare": {"trim": 0}}).trim == 0.0


def test_markdown_shows_the_compared_centers_and_names_yuens_test():
    """The base/head cells are the trimmed geometric means the change is the ratio of (not the medians);
    the footnote names Yuen's test; the headline counts the undecided."""
    k = key("skewed")
    base, head = [1.0, 1.0, 1.0, 1.5, 1.5, 1.5, 1.6] * 3, [1.2, 1.2, 1.2, 1.3, 2.0, 2.0, 2.0] * 3
    result = compare_samples(pairs(k, base), pairs(k, head))
    t = result.tests[0]
    assert t.base_median == 1.5 and t.head_median == 1.3
    md = render_markdown(comparison_document("L", [], [], result))
    row = next(line for line in md.splitlines() if "`skewed`" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[7] == f"{t.change:+.1%}"
    assert float(cells[5].split()[0]) == pytest.approx(t.base_center, rel=1e-3)
    assert float(cells[6].split()[0]) == pytest.approx(t.head_center, rel=1e-3)
    assert (t.head_center / t.base_center - 1) == pytest.approx(t.change)
    assert "Yuen's trimmed Welch test" in md and "Welch's test on log-times" not in md
    assert "undecided" in md.splitlines()[0]


def test_a_side_jumping_between_two_modes_is_unstable_not_a_regression():
    """Processes landing in a 1.8x slower mode on 6 of 14 invocations (more than trimming sets aside): the
    +32% the trimmed means show is no verdict; a minority mode (2 of 14) is still trimmed away."""
    rng = np.random.default_rng(3)
    fast = np.exp(np.log(1.2) + 0.01 * rng.standard_normal(14))
    base = fast.copy()
    head = fast * np.where(np.arange(14) % 7 < 3, 1.8, 1.0) * rng.uniform(0.99, 1.01, 14)
    t = compare_samples(pairs(key("n4"), base), pairs(key("n4"), head)).tests[0]
    assert t.verdict == "unstable" and t.unstable_sides == ("head",) and "two modes" in t.reason
    few = fast * np.where(np.arange(14) == 4, 1.8, 1.0) * np.where(np.arange(14) == 9, 1.8, 1.0)
    calm = compare_samples(pairs(key("n4"), base), pairs(key("n4"), few)).tests[0]
    assert calm.verdict in ("same", "unknown") and calm.unstable_sides == ()  # a minority mode: trimmed
    md = render_markdown(comparison_document("L", [], [], compare_samples(pairs(key("n4"), base),
                                                                          pairs(key("n4"), head))))
    assert "1 undecided (1 unstable)" in md.splitlines()[0] and "**Unstable" in md


def test_two_modes_entirely_beyond_the_other_side_are_still_a_regression():
    """The head's invocations fall in two modes (120 and 200 us), but every one of them is hundreds of times
    the base's 0.34 us: whichever mode a process lands in, the head is slower, so the modes do not make it
    undecided (the CI's fixture slowdown, +46,000%, was called `unstable` and the gate passed)."""
    rng = np.random.default_rng(5)
    base = 0.34 * rng.uniform(0.99, 1.01, 20)
    head = np.where(np.arange(20) % 2 == 0, 120.0, 200.0) * rng.uniform(0.99, 1.01, 20)
    t = compare_samples(pairs(key("slowed"), base), pairs(key("slowed"), head)).tests[0]
    assert t.unstable_sides == ("head",)
    assert t.verdict == "regression", t.reason
    improved = compare_samples(pairs(key("slowed"), head), pairs(key("slowed"), base)).tests[0]
    assert improved.verdict == "improvement" and improved.unstable_sides == ("base",)
