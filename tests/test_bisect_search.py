"""The pure search: noise, skips, failures in a row, baseline validation, ambiguity, pruning."""

from __future__ import annotations

import random

import pytest

from perfq.bisect.search import AMBIGUOUS, SearchConfig, bisect, classify, estimated_steps


def history(n: int, culprit: int, base: float = 10.0, regression: float = 0.30, noise: float = 0.05,
            broken: set[int] = frozenset(), seed: int = 0):
    commits = [f"c{i:03d}" for i in range(n)]
    rng = random.Random(seed)
    calls: list[tuple[str, int]] = []

    def measure(commit: str, runs: int) -> list[float] | None:
        calls.append((commit, runs))
        i = int(commit[1:])
        if i in broken:
            return None
        true = base * (1 + regression) if i >= culprit else base
        return [true * rng.uniform(1 - noise, 1 + noise) for _ in range(runs)]

    return commits, measure, calls


@pytest.mark.parametrize("seed", range(8))
def test_finds_the_culprit_under_noise(seed):
    culprit = random.Random(seed).randrange(1, 60)
    commits, measure, _ = history(60, culprit, noise=0.08, seed=seed)
    out = bisect(commits, measure)
    assert out.status == "found"
    assert out.first_bad == commits[culprit]
    assert out.last_good == commits[culprit - 1]
    assert out.first_bad_value > out.last_good_value * 1.15
    assert out.runs < 80


def test_higher_is_better_metric():
    commits, measure, _ = history(40, 23, base=100.0, regression=-0.4)
    out = bisect(commits, measure, SearchConfig(lower_is_better=False))
    assert out.status == "found" and out.first_bad == commits[23]


def test_broken_commits_are_skipped_and_neighbours_tried():
    commits, measure, calls = history(33, 20, broken={16, 17})
    out = bisect(commits, measure)
    assert out.status == "found" and out.first_bad == commits[20]
    tried = [c for c, _ in calls]
    assert "c016" in tried  # the midpoint was broken...
    assert set(out.skipped) >= {"c016"}
    assert any(s.verdict == "skip" for s in out.steps)
    # ...and the next commit tried was a neighbour of it.
    after = tried[tried.index("c016") + 1]
    assert after in ("c015", "c017")


def test_skipped_commit_next_to_culprit_is_reported_as_suspect():
    commits, measure, _ = history(20, 10, broken={9})
    out = bisect(commits, measure)
    assert out.status == "ambiguous"
    assert out.first_bad == commits[10]
    assert out.suspects == [commits[9], commits[10]]


def test_three_failures_in_a_row_stop_with_state():
    commits, measure, _ = history(40, 30, broken=set(range(15, 26)))
    out = bisect(commits, measure)
    assert out.status == "failures"
    assert "3 commits in a row" in out.message
    assert out.last_good is not None and out.first_bad is not None
    assert len(out.skipped) == 3


def test_small_difference_is_noise_and_stops_unless_forced():
    commits, measure, calls = history(30, 12, regression=0.02, noise=0.0)
    out = bisect(commits, measure)
    assert out.status == "noise" and "possibly noise" in out.message
    assert {c for c, _ in calls} == {commits[0], commits[-1]}
    forced = bisect(commits, measure, SearchConfig(force=True))
    assert forced.status == "found" and forced.first_bad == commits[12]


def test_better_bad_is_reported_as_swapped():
    commits, measure, _ = history(30, 12, regression=-0.3)
    out = bisect(commits, measure)
    assert out.status == "swapped" and "swapped" in out.message


def test_baseline_failure():
    commits, measure, _ = history(10, 5, broken={0})
    out = bisect(commits, measure)
    assert out.status == "baseline_failed" and commits[0][:12] in out.message


def test_value_near_threshold_gets_more_runs_then_is_ambiguous():
    commits = [f"c{i}" for i in range(9)]
    # c4 sits exactly on the 30% threshold (10 -> 13: threshold 10.9): no side can be chosen.
    vals = {0: 10.0, 1: 10.0, 2: 10.0, 3: 10.0, 4: 10.9, 5: 13.0, 6: 13.0, 7: 13.0, 8: 13.0}
    calls = []

    def measure(c, n):
        calls.append((c, n))
        return [vals[int(c[1:])]] * n

    out = bisect(commits, measure, SearchConfig(pool=False))
    assert ("c4", 5) in calls  # extra runs were asked for
    assert AMBIGUOUS in [s.verdict for s in out.steps if s.commit == "c4"]
    assert out.ambiguous == ["c4"]
    assert out.status == "ambiguous" and out.suspects == ["c4", "c5"]


def test_pruning_tests_only_candidates_and_answer_is_a_candidate():
    commits, measure, calls = history(64, 40, noise=0.02)
    touches = {commits[i] for i in (5, 17, 33, 40, 51, 63)}
    out = bisect(commits, measure, may_affect=lambda c: c in touches)
    assert out.status == "found" and out.first_bad == commits[40]
    assert {c for c, _ in calls} <= touches | {commits[0]}
    assert out.pruned == 62 - 5
    unpruned = bisect(*history(64, 40, noise=0.02)[:2])
    assert out.runs < unpruned.runs


def test_pruning_that_rules_out_the_culprit_is_reported():
    commits, measure, _ = history(32, 20, noise=0.02)
    out = bisect(commits, measure, may_affect=lambda c: c in {commits[5], commits[10]})
    assert out.status == "pruned_culprit" and "without --prune" in out.message


def test_replaying_the_same_values_reproduces_the_search():
    commits, measure, _ = history(50, 31, noise=0.08, seed=3)
    log: list[tuple[str, int, list[float] | None]] = []

    def recording(c, n):
        v = measure(c, n)
        log.append((c, n, v))
        return v

    first = bisect(commits, recording)
    replay = iter(log)

    def replaying(c, n):
        rc, rn, v = next(replay)
        assert (rc, rn) == (c, n)
        return v

    second = bisect(commits, replaying)
    assert [(s.commit, s.verdict) for s in second.steps] == [(s.commit, s.verdict) for s in first.steps]
    assert second.first_bad == first.first_bad == commits[31]


def test_classify_and_estimates():
    assert classify([10.0, 10.1], 10.0, 13.0) == ("good", False)
    assert classify([12.9], 10.0, 13.0) == ("bad", False)
    assert classify([10.9], 10.0, 13.0)[1] is True
    assert classify([80.0], 100.0, 60.0) == ("bad", False)  # higher is better: lower value is bad
    assert classify([95.0], 100.0, 60.0) == ("good", False)
    assert estimated_steps(200) == 8
    with pytest.raises(ValueError):
        bisect(["only"], lambda c, n: [1.0])
