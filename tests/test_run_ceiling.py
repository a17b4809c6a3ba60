"""A run stores where its sampling stopped (``max_samples`` and its ceiling: ``--max-repeat``, or the extension
within a budget), so `perfq compare` gives the reasons `perfq run` gave, and a test stopped at the ceiling
only when it reached it."""

from __future__ import annotations

import random

from perfq.run import execute as runner
from perfq.run.compare import Settings, TestKey, compare_samples
from perfq.run.compare_labels import comparison_for_label
from perfq.run.opbench import Measurement
from perfq.run.results import export_runs, import_files
from perfq.run.runs import Run
from perfq.run.store import runs_for_label, save_runs
from schema import history
from schema.results_rows import Side
from tests.test_run_exec import script_plan


def _reasons(doc) -> dict[str, str]:
    return {t.test: t.reason for t in doc.tests}


def test_compare_knows_the_runs_max_repeat(tmp_path):
    plan = script_plan(tmp_path, repeat=3, adaptive=True, budget_seconds=600.0, max_repeat=5,
                       settings=Settings(max_samples=5))  # what `perfq run --max-repeat 5` plans
    base, _ = runner.execute(plan)
    assert (base.max_samples, base.sample_ceiling) == (5, 5)
    run_says = comparison_for_label(tmp_path / "h.duckdb", "S", plan.settings)
    compare_says = comparison_for_label(tmp_path / "h.duckdb", "S", Settings())  # `perfq compare S`: config's 20
    assert _reasons(compare_says) == _reasons(run_says)
    assert "the sample ceiling (5 a side) was reached at ±" in _reasons(compare_says)["noisy"]  # after any contention


def _stored(tmp_path, n: int, max_samples: int | None, ceiling: int | None) -> None:
    rng = random.Random(7)
    runs = [Run("L", side, max_samples=max_samples, sample_ceiling=ceiling) for side in (Side.base, Side.head)]
    for run in runs:
        for i in range(n):
            run.add_sample(i, "b_test", Measurement("t", 100.0 * (1 + rng.gauss(0, 0.15))))
    save_runs(tmp_path / "h.duckdb", runs)


def test_a_test_stopped_at_max_samples_with_the_extension_on_says_the_budget_stopped_it(tmp_path):
    _stored(tmp_path, 20, 20, 100)  # sampling could have gone on to 100: the budget ended it at 20
    reason = _reasons(comparison_for_label(tmp_path / "h.duckdb", "L", Settings()))["t"]
    assert "sample ceiling" not in reason
    assert reason.startswith("the budget (or the run's repeats) ended the sampling at 20 samples a side, ±")
    assert reason.endswith("before it could go past the ceiling (up to 100 a side)")


def test_the_reasons_at_each_ceiling():
    rng = random.Random(3)
    key = TestKey("b_test", "t", "eager", "cpu", "forward_time", "us")

    def reason(n: int, settings: Settings, noise: float = 0.15) -> str:
        base = [(key, 100.0 * max(0.1, 1 + rng.gauss(0, noise))) for _ in range(n)]
        head = [(key, 100.0 * max(0.1, 1 + rng.gauss(0, noise))) for _ in range(n)]
        (test,) = compare_samples(base, head, settings).tests
        return test.reason

    assert reason(20, Settings()).startswith("the sample ceiling (20 a side) was reached")  # no extension
    assert reason(20, Settings(ceiling=20)).startswith("the sample ceiling (20 a side) was reached")
    assert "went past the ceiling (20 a side) to 34 while the budget lasted" in reason(34, Settings(ceiling=100))
    assert "to the most the run allows (100 a side)" in reason(100, Settings(ceiling=100), noise=0.5)
    assert reason(12, Settings(ceiling=100)).startswith("the budget (or the run's repeats) ended the sampling at 12")


def test_the_ceiling_travels_with_the_result_file(tmp_path):
    _stored(tmp_path, 20, 20, 100)
    export_runs(runs_for_label(tmp_path / "h.duckdb", "L"), tmp_path / "r.json")
    import_files(tmp_path / "copy.duckdb", [tmp_path / "r.json"])
    assert {(r.max_samples, r.sample_ceiling) for r in runs_for_label(tmp_path / "copy.duckdb", "L")} == {(20, 100)}


def test_a_history_from_before_the_ceiling_was_stored_still_compares(tmp_path, monkeypatch):
    shipped = history.migrations()
    monkeypatch.setattr(history, "migrations", lambda: [m for m in shipped if m[0] < 7])
    con = history.connect_history(tmp_path / "old.duckdb")  # made by a perfq without migration 7
    rng = random.Random(5)
    for side in ("base", "head"):
        con.execute("INSERT INTO runs (id, label, side, status) VALUES (?, 'L', ?, 'complete')", [side, side])
        con.executemany("INSERT INTO samples (run_id, seq, benchmark, test, value) VALUES (?, ?, 'b_test', 't', ?)",
                        [[side, i, 100.0 * (1 + rng.gauss(0, 0.15))] for i in range(20)])
    con.close()
    monkeypatch.undo()
    doc = comparison_for_label(tmp_path / "old.duckdb", "L", Settings())  # read-only: never migrated
    assert _reasons(doc)["t"].startswith("the sample ceiling (20 a side) was reached")  # as before: nothing stored
