"""A contended A/A: whole processes run faster or slower, every test of one alike (bench/run_defaults.py
--contended, 2026-12-07: 4/56 false improvements, nearly every test reading the head faster). The verdict
must not take the sides' shared speed for a change of each test, and must still find a test's own change."""

from __future__ import annotations

import numpy as np
import pytest

from perfq.run import execute as runner
from perfq.run.compare import Settings, TestKey, compare_samples
from perfq.run.compare_labels import comparison_for_label
from perfq.run.report import Verdict
from tests.run_fakebench import make_bench_root
from tests.test_run_exec import plan_for

FILES = ("fake_a", "fake_b", "fake_c")  # 3 files x 4 tests in one batch process: 12 samples an invocation
# per-process speed factors: the head's processes happened to run 10-12% faster, with a spread from one
# process to the next that makes that shift significant for each test alone (Yuen q 0.007) but not at the
# strict level a shift of every test at once needs (Welch p 0.008 > 0.001)
BASE_FACTORS = "1.00,1.25,0.94,1.08,1.03,0.96,1.30,1.00,1.06,0.97"
HEAD_FACTORS = "0.93,0.86,1.10,0.88,0.95,0.90,0.84,0.98,0.91,0.94"


def contended_plan(tmp, head_extra=()):
    root = make_bench_root(tmp, names=FILES)
    base_env = [("FAKE_FACTORS", BASE_FACTORS), ("FAKE_COUNTER", str(tmp / "base.count"))]
    head_env = [("FAKE_FACTORS", HEAD_FACTORS), ("FAKE_COUNTER", str(tmp / "head.count")), *head_extra]
    return plan_for(tmp, root, benches=FILES, base_env=base_env, head_env=head_env, repeat=10, batch=True)


def test_a_shared_speed_of_one_sides_processes_is_no_change_of_each_test(tmp_path):
    runner.execute(contended_plan(tmp_path))
    doc = comparison_for_label(tmp_path / "h.duckdb", "L", Settings())
    assert len(doc.tests) == 12
    assert all(t.change < -0.05 for t in doc.tests)  # every test reads the head faster: the processes' speed
    assert {t.verdict for t in doc.tests} == {Verdict.unknown}  # not 12 false improvements
    assert all("ran -12.0% as a whole" in t.reason for t in doc.tests)


def test_a_tests_own_change_is_found_beside_the_shared_speed(tmp_path):
    slow = [("FAKE_SLOW", "1.3"), ("FAKE_SLOW_TESTS", "add_M8_cpu")]
    runner.execute(contended_plan(tmp_path, head_extra=slow))
    doc = comparison_for_label(tmp_path / "h.duckdb", "L", Settings())
    found = {(t.benchmark, t.test): t.verdict for t in doc.tests if t.verdict != Verdict.unknown}
    assert found == {(b, "add_M8_cpu"): Verdict.regression for b in FILES}


def samples(values: np.ndarray, key: TestKey, rounds: bool) -> list:
    return [(key, float(v), r) if rounds else (key, float(v)) for r, v in enumerate(values)]


@pytest.mark.parametrize("rounds", [False, True])
def test_simulated_contended_aas_give_no_false_direction(rounds):
    """200 simulated A/As of 56 tests, 10 processes a side, each process's speed drawn once (12% spread) for
    all its tests, each test's own noise 1-15%: without the rounds (no invocation known: the statistics of
    before) a few A/As flip many tests at once; with them, none."""
    rng = np.random.default_rng(1)
    keys = [TestKey("b", f"t{i}", "eager", "cpu", "forward_time", "us") for i in range(56)]
    own = np.exp(rng.uniform(np.log(0.01), np.log(0.15), len(keys)))
    false = 0
    for _ in range(200):
        shared_base, shared_head = rng.normal(0, 0.12, 10), rng.normal(0, 0.12, 10)
        base, head = [], []
        for key, sd in zip(keys, own, strict=True):
            base += samples(np.exp(5 + shared_base + rng.normal(0, sd, 10)), key, rounds)
            head += samples(np.exp(5 + shared_head + rng.normal(0, sd, 10)), key, rounds)
        counts = compare_samples(base, head).counts()
        false += counts["regression"] + counts["improvement"]
    assert (false > 20) != rounds  # before: 125 false verdicts, in 5 of the 200 A/As


def test_a_direction_needs_five_samples_a_side():
    key = TestKey("b", "t", "eager", "cpu", "forward_time", "us")
    base = [(key, v) for v in (100.0, 101.0, 100.5)]
    head = [(key, v) for v in (70.0, 70.4, 70.2)]  # -30% at 3 processes a side, tightly: q 0.0004
    (test,) = compare_samples(base, head).tests
    assert test.verdict == Verdict.unknown and "a direction needs 5" in test.reason
    (test,) = compare_samples(base + base[:2], head + head[:2]).tests
    assert test.verdict == Verdict.improvement
