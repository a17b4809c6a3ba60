"""A selected test is never dropped by the tag filter (gelu_test has only `long` configs)."""

from __future__ import annotations

import sys
from pathlib import Path

from perfq.run import execute as runner
from perfq.run.jobs import opbench_job
from perfq.run.opbench import OpBenchSpec
from tests.run_fakebench import FAKE_MODULE, make_bench_root

PY = sys.executable


def _run(tmp: Path, root: Path, benches: tuple[str, ...], tests: tuple[str, ...] = (), batch: bool = False):
    jobs = [opbench_job(root, b, "eager", OpBenchSpec("", device="cpu"), tests) for b in benches]
    plan = runner.Plan(label="tags", jobs=jobs, sides=[runner.Side("head", PY)], repeat=1, bench_root=root,
                       repo=tmp, history=tmp / "h.duckdb", batch=batch)
    return runner.execute(plan)[0]


def _long_only(root: Path, name: str = "gelu_test") -> None:
    (root / "pt" / f"{name}.py").write_text(FAKE_MODULE.replace('"short"', '"long"'))


def test_several_selected_tests_run_whatever_their_tag_and_only_they(tmp_path):
    root = make_bench_root(tmp_path)
    run = _run(tmp_path, root, ("fake_test",), tests=("add_M8_cpu", "add_M512_cpu"))
    assert not run.failures
    assert {s.test for s in run.samples} == {"add_M8_cpu", "add_M512_cpu"}


def test_one_selected_long_test_runs(tmp_path):
    root = make_bench_root(tmp_path)
    _long_only(root)
    run = _run(tmp_path, root, ("gelu_test",), tests=("mul_M8_cpu",))
    assert not run.failures and {s.test for s in run.samples} == {"mul_M8_cpu"}


def test_whole_file_without_short_configs_runs_its_configs(tmp_path):
    root = make_bench_root(tmp_path)
    _long_only(root)
    run = _run(tmp_path, root, ("gelu_test",))
    assert not run.failures, run.failures
    assert {s.test for s in run.samples} == {"add_M8_cpu", "add_M64_cpu", "add_M512_cpu", "add_M8_cpu_bwdall",
                                              "mul_M8_cpu"}


def test_batch_keeps_each_files_tag_and_selection(tmp_path):
    root = make_bench_root(tmp_path)
    _long_only(root)
    run = _run(tmp_path, root, ("fake_test", "gelu_test"), batch=True)
    assert not run.failures, run.failures
    by_bench: dict[str, set[str]] = {}
    for s in run.samples:
        by_bench.setdefault(s.benchmark, set()).add(s.test)
    assert "add_M512_cpu" not in by_bench["fake_test"]  # a file with short tests keeps the short filter
    assert "add_M512_cpu" in by_bench["gelu_test"]  # one without any runs all its tests
