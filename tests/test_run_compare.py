"""query.compare statistics and verdicts, and the JSON/markdown report."""

from __future__ import annotations

import random

import pytest
from scipy import stats

from perfq.run.compare import (
    Settings,
    TestKey,
    benjamini_hochberg,
    compare_samples,
    pinpoint_p,
    settings_from_config,
)
from perfq.run.report import comparison_document, render_markdown
from perfq.schema.results_store import Run


def key(test: str, bench: str = "b_test", unit: str = "us", metric: str = "forward_time") -> TestKey:
    return TestKey(bench, test, "eager", "cpu", metric, unit)


def pairs(k: TestKey, values) -> list[tuple[TestKey, float]]:
    return [(k, v) for v in values]


def test_benjamini_hochberg_matches_hand_computation():
    p = [0.01, 0.04, 0.03, 0.20]
    # sorted: 0.01 (r1) 0.03 (r2) 0.04 (r3) 0.20 (r4): q = min over k>=r of p_k * 4 / k
    assert benjamini_hochberg(p) == pytest.approx([0.04, 0.0533333, 0.0533333, 0.20], rel=1e-4)
    assert benjamini_hochberg([]) == []
    assert benjamini_hochberg([0.9, 0.9]) == [0.9, 0.9]


def test_pinpoint_p_is_doubled_min_of_mwu_and_ks():
    a = [1.0, 1.1, 0.9, 1.05, 0.95, 1.02]
    b = [1.3, 1.25, 1.4, 1.35, 1.28, 1.31]
    import numpy as np

    expect = 2 * min(stats.mannwhitneyu(a, b).pvalue, stats.ks_2samp(a, b).pvalue)
    assert pinpoint_p(np.array(a), np.array(b)) == pytest.approx(min(1.0, expect))
    assert pinpoint_p(np.array([2.0, 2.0]), np.array([2.0, 2.0])) == 1.0


def test_verdicts_regression_improvement_same_unknown():
    slow, fast, flat, few = key("slow"), key("fast"), key("flat"), key("few")
    base = pairs(slow, [10, 10.2, 9.9, 10.1, 10.0, 9.95]) + pairs(fast, [20, 20.5, 19.8, 20.1, 20.2, 19.9])
    head = pairs(slow, [13, 13.1, 12.9, 13.2, 12.8, 13.05]) + pairs(fast, [15, 15.2, 14.9, 15.1, 15.0, 14.8])
    base += pairs(flat, [5.0] * 6) + pairs(few, [1.0, 1.0])
    head += pairs(flat, [5.0] * 6) + pairs(few, [3.0, 3.0])
    result = compare_samples(base, head, Settings(min_samples=3))
    by = {t.key.test: t for t in result.tests}
    assert by["slow"].verdict == "regression" and by["slow"].change == pytest.approx(13.025 / 10.0 - 1)
    assert by["slow"].ci[0] > 0.2 and by["slow"].p_value < 0.05
    assert by["fast"].verdict == "improvement" and by["fast"].change < -0.2
    assert by["flat"].verdict == "same" and by["flat"].ci == (0.0, 0.0)
    assert by["few"].verdict == "unknown"  # 2 samples per side are below min_samples
    assert result.counts() == {"regression": 1, "improvement": 1, "same": 1, "unknown": 1, "failed": 0}


def test_small_effect_is_not_a_regression_and_throughput_direction():
    tiny = key("tiny")
    base = pairs(tiny, [100 + i * 0.01 for i in range(10)])
    head = pairs(tiny, [101 + i * 0.01 for i in range(10)])  # +1%: significant but below the 5% minimum
    t = compare_samples(base, head).tests[0]
    assert t.p_value < 0.05 and t.verdict == "same"
    bw = key("bw", unit="GB/s", metric="bandwidth")
    t = compare_samples(pairs(bw, [10, 10.1, 9.9, 10.05, 9.95]), pairs(bw, [14, 14.1, 13.9, 14.05, 13.95])).tests[0]
    assert t.change > 0.3 and t.verdict == "improvement"  # more GB/s is better


def test_noisy_aa_simulation_has_few_false_regressions():
    rng = random.Random(7)
    base, head = [], []
    for i in range(60):
        k = key(f"t{i}")
        scale = rng.uniform(5, 500)
        base += pairs(k, [scale * (1 + rng.gauss(0, 0.08)) for _ in range(7)])
        head += pairs(k, [scale * (1 + rng.gauss(0, 0.08)) for _ in range(7)])
    result = compare_samples(base, head)
    assert result.counts()["regression"] <= 3  # <= 5% of 60 tests
    # a real 30% slowdown in the same noise is found on most tests
    base2, head2 = [], []
    for i in range(20):
        k = key(f"s{i}")
        base2 += pairs(k, [100 * (1 + rng.gauss(0, 0.08)) for _ in range(7)])
        head2 += pairs(k, [130 * (1 + rng.gauss(0, 0.08)) for _ in range(7)])
    assert compare_samples(base2, head2).counts()["regression"] >= 16


def test_bh_correction_spans_all_tests():
    # one borderline test alone is significant; among many null tests BH makes it unknown
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
    assert first["change"] == pytest.approx(1.0, rel=0.01) and len(first["ci"]) == 2
    assert doc["head"]["failures"][0]["stderr_tail"] == "RuntimeError: boom"


def test_markdown_summary_first_regressions_first_env_last_details_fold():
    md = render_markdown(_typed_doc(15))
    lines = md.splitlines()
    assert "1 regression(s), 1 improvement(s), 15 same" in lines[0]
    assert md.index("| regression |") < md.index("| improvement |") < md.index("| same |")
    assert "<details><summary>Same (15)</summary>" in md  # long table folded
    assert "Improvements** (1)" in md  # short table shown
    env = md.index("**Environment**")
    assert env > md.index("| same |") and "aaa111" in md[env:] and "bbb222" in md[env:]
    assert "broken_test" in md
