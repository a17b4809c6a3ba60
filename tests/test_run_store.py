"""The run's domain types (perfq.run.runs) through the run's store (perfq.run.store) and the history's
typed rows (schema.results_rows, schema.results_store)."""

from __future__ import annotations

import typing

from perfq.run.opbench import Measurement
from perfq.run.runs import Run
from perfq.run.store import runs_for_label, save_runs
from schema import results_store
from schema.results_rows import RunStatus, Side, StoredRun


def measured_run() -> Run:
    run = Run(label="L", side=Side.head, ref="abc", command="perfq run")
    run.add_sample(0, "softmax", Measurement("Softmax_N1", 12.5))
    run.add_sample(0, "softmax", Measurement("Softmax_N2", float("nan")))  # printed nan: not a measurement
    run.add_sample(1, "softmax", Measurement("Softmax_N1", 12.0, "backward_time", "us", "compile", "cpu"))
    run.add_failure("sum", "python -m pt.sum_test", 1, "RuntimeError: boom")
    run.add_invocation(1.5, {("softmax", "Softmax_N1"): 1.5}, run.started_at, {"contended": False})
    run.status = RunStatus.complete
    return run


def test_a_measurement_becomes_a_numbered_sample_and_nan_is_dropped():
    run = measured_run()
    assert [(s.seq, s.repeat_index, s.test, s.metric, s.mode, s.value) for s in run.samples] == [
        (0, 0, "Softmax_N1", "forward_time", "eager", 12.5), (1, 1, "Softmax_N1", "backward_time", "compile", 12.0)]


def test_runs_go_through_the_store_as_rows_and_come_back_as_runs(tmp_path):
    run = measured_run()
    stored = run.stored()
    assert isinstance(stored, StoredRun) and stored.row.id == run.id and len(stored.invocations) == 1
    assert save_runs(tmp_path / "h.duckdb", [run]) == (1, 2, 1)
    assert save_runs(tmp_path / "h.duckdb", [run]) == (0, 0, 0)  # idempotent: rows keyed by (run id, seq)
    [back] = runs_for_label(tmp_path / "h.duckdb", "L")
    assert (back.id, back.side, back.ref, back.status, back.command) == (run.id, "head", "abc", "complete", "perfq run")
    assert back.samples == run.samples and back.sample_count == 2
    assert [(f.benchmark, f.returncode, f.stderr_tail) for f in back.failures] == [("sum", 1, "RuntimeError: boom")]
    [counted] = runs_for_label(tmp_path / "h.duckdb", "L", with_samples=False)
    assert counted.samples == [] and counted.sample_count == 2


def test_the_schema_store_is_typed_with_its_rows():
    for function in (results_store.save_runs, results_store.runs_for_label, results_store.read_runs):
        hints = typing.get_type_hints(function)
        assert typing.Any not in hints.values(), function.__name__
    assert typing.get_args(typing.get_type_hints(results_store.save_runs)["runs"]) == (StoredRun,)
