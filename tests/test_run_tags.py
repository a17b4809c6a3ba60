"""A selected test is never dropped by the tag filter (gelu_test has only `long` configs)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from perfq.run import execute as runner
from perfq.run.jobs import opbench_job
from perfq.run.opbench import OpBenchSpec
from tests.run_fakebench import FAKE_MODULE, make_bench_root

PY = sys.executable


def _run(tmp: Path, root: Path, benches: tuple[str, ...], tests: tuple[str, ...] = (), batch: bool = False):
    jobs = [opbench_job(root, b, "eager", OpBenchSpec("", device="cpu"), tests) for b in benches]
    plan = runner.RunSpec(label="tags", jobs=jobs, sides=[runner.SideSetup("head", PY)], repeat=1, bench_root=root,
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


def test_invocation_walls_are_recorded_and_split_by_timed_work(tmp_path):
    from perfq.run.execute import test_shares, timed_iterations
    from perfq.run.opbench import Measurement
    from schema.results_store import test_walls

    root = make_bench_root(tmp_path)
    run = _run(tmp_path, root, ("fake_test",), tests=("add_M8_cpu", "add_M512_cpu"))
    walls = test_walls(tmp_path / "h.duckdb")
    assert set(walls) == {("fake_test", "add_M8_cpu"), ("fake_test", "add_M512_cpu")}
    assert sum(walls.values()) == pytest.approx(run.invocations[0].seconds, rel=1e-3)
    # the slower test (900 us vs 10 us) gets the larger share; the rest of the wall is split evenly
    spec = OpBenchSpec("x", iterations=20, num_runs=10)
    assert timed_iterations(spec) == 300
    job = runner.Job("b", spec=spec)
    result = runner.InvocationResult([Measurement("slow", 1000.0), Measurement("fast", 10.0)], 0, "", [])
    shares = test_shares(10.0, [(job, result)])
    assert shares[("b", "slow")] == pytest.approx(0.3 + (10 - 0.303) / 2)
    assert shares[("b", "fast")] == pytest.approx(0.003 + (10 - 0.303) / 2)
    assert test_walls(tmp_path / "none.duckdb") == {}


COUNTING_MODULE = '''
import operator_benchmark as op_bench
import torch

configs = op_bench.cross_product_configs(M=[8, 16, 32], N=[4, 64], device=["cpu"], tags=["short"])


class CountBenchmark(op_bench.TorchBenchmarkBase):
    def init(self, M, N, device):
        print(f"# perfq-test-init: M{M} N{N}", flush=True)
        self.inputs = {"x": torch.rand(M, N, device=device, requires_grad=self.auto_set())}
        self.set_module_name("count")

    def forward(self, x):
        return x + 1


op_bench.generate_pt_test(configs, CountBenchmark)
op_bench.generate_pt_gradient_test(configs, CountBenchmark)

if __name__ == "__main__":
    op_bench.benchmark_runner.main()
'''


@pytest.mark.corpus
@pytest.mark.torch
def test_only_the_selected_tests_configs_are_built_with_the_real_runner(tmp_path, corpus, monkeypatch):
    """The 2.6.0 runner builds every config (its tensors included) before it filters by name; perfq's
    wrapper hands it only the selected tests' configs, backward ones (``_bwdall``) included."""
    pytest.importorskip("torch")
    root = tmp_path / "operator_benchmark"
    shutil.copytree(corpus / "benchmarks/operator_benchmark", root, ignore=shutil.ignore_patterns("pt", "*_test.py"))
    (root / "pt").mkdir()
    (root / "pt" / "__init__.py").write_text("")
    (root / "pt" / "count_test.py").write_text(COUNTING_MODULE)
    wanted = ("count_M8_N64_cpu", "count_M32_N4_cpu_bwdall")
    jobs = [opbench_job(root, "count_test", "eager", OpBenchSpec("", device="cpu", iterations=2, num_runs=1), wanted)]
    plan = runner.RunSpec(label="narrow", jobs=jobs, sides=[runner.SideSetup("head", PY)], repeat=1, bench_root=root,
                       repo=tmp_path, history=tmp_path / "h.duckdb")
    seen: list[str] = []
    spawn = runner._spawn

    def recording(*args, **kwargs):
        result = spawn(*args, **kwargs)
        seen.append(result.stdout)
        return result

    monkeypatch.setattr(runner, "_spawn", recording)
    run = runner.execute(plan)[0]
    assert not run.failures, run.failures
    assert {s.test for s in run.samples} == set(wanted)
    built = [line for out in seen for line in out.splitlines() if line.startswith("# perfq-test-init:")]
    # without narrowing: 6 forward configs and 6 backward ones built twice (bwdall, bwd1) = 18; with it, the
    # forward M8 N64, and the backward M32 N4 and M8 N64 (a backward name may equal a forward one) twice each
    assert len(built) == 5, built
    assert built.count("# perfq-test-init: M32 N4") == 2 and built.count("# perfq-test-init: M8 N64") == 3
