"""PyTorch's benchmark database format: `perfq compare --format pytorch-benchmark` writes every sample of both
sides with the verdicts, `perfq import` reads it back to the same samples, and reads the operator benchmark
runner's `--output-json-for-dashboard` files.

The PyTorch 2.6.0 corpus's runner has no `--output-json-for-dashboard` (newer runners have it), so the runner's
file is a fixture (tests/data/pytorch_benchmark_dashboard.json) built from the documented schema, in the shape
newer runners write: three records per test (latency, peak memory, memory bandwidth, the last null on CPU),
backward times as latency with mode training.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfq.run.results import import_files
from perfq.run.runs import Run
from perfq.run.store import runs_for_label, save_runs
from schema.results_rows import RunStatus, Side

DASHBOARD = Path(__file__).parent / "data" / "pytorch_benchmark_dashboard.json"
BASE = (10.0, 10.2, 9.9, 10.1, 10.0, 9.8, 10.3, 10.1)
SLOWER = (12.0, 12.3, 11.9, 12.1, 12.2, 11.8, 12.4, 12.0)


class _M:
    def __init__(self, test: str, value: float, metric: str = "forward_time", mode: str = "eager") -> None:
        self.test, self.value, self.metric, self.unit, self.mode, self.device = test, value, metric, "us", mode, "cpu"


def _run(side: Side, softmax: tuple[float, ...], relu: tuple[float, ...]) -> Run:
    run = Run(label="L", side=side, status=RunStatus.complete, ref=side.value, commit_sha=f"{side.value}sha",
              host="box", cpu="cpu model", torch_version="2.13.0", env=json.dumps({"threads": "1"}))
    for repeat, (s, r) in enumerate(zip(softmax, relu, strict=True)):
        run.add_sample(repeat, "softmax_test", _M("Softmax_N1_cpu", s))
        run.add_sample(repeat, "softmax_test", _M("Softmax_N1_cpu", s * 3, "backward_time"))
        run.add_sample(repeat, "relu_test", _M("relu_N4_cpu", r, mode="compile"))
    return run


@pytest.fixture
def compared(tmp_path: Path) -> Path:
    """A history with label L: softmax slower on head, relu the same."""
    history = tmp_path / "h.duckdb"
    save_runs(history, [_run(Side.base, BASE, BASE), _run(Side.head, SLOWER, BASE)])
    return history


def _samples(history: Path, label: str) -> dict[tuple[str, str], list[tuple]]:
    return {(r.id, r.side): sorted((s.seq, s.repeat_index, s.benchmark, s.test, s.mode, s.device, s.metric, s.unit,
                                    s.value) for s in r.samples) for r in runs_for_label(history, label)}


def test_compare_writes_every_sample_with_the_verdicts_and_import_gives_them_back(tmp_path, cli, compared):
    out = cli(tmp_path, "compare", "L", "--history", str(compared), "--format", "pytorch-benchmark")
    assert out.returncode == 0, out.stderr
    records = json.loads(out.stdout)
    assert len(records) == 6  # 2 sides x (softmax forward, softmax backward, relu)
    by_key = {(r["benchmark"]["extra_info"]["perfq"]["run"]["side"], r["model"]["name"], r["benchmark"]["mode"]): r
              for r in records}
    forward = by_key[("head", "Softmax_N1_cpu", "inference")]
    assert forward["benchmark"]["name"] == "PyTorch operator benchmark"
    assert forward["metric"]["name"] == "latency" and forward["metric"]["benchmark_values"] == list(SLOWER)
    assert by_key[("head", "Softmax_N1_cpu", "training")]["metric"]["benchmark_values"] == [v * 3 for v in SLOWER]
    perfq = forward["benchmark"]["extra_info"]["perfq"]
    assert perfq["verdict"] == "regression" and perfq["change"] == pytest.approx(0.2, abs=0.02)
    same = by_key[("base", "relu_N4_cpu", "inference")]["benchmark"]["extra_info"]
    assert same["perfq"]["verdict"] == "same" and 0 < same["perfq"]["resolution"] < 0.05
    assert same["use_compile"] is True and same["device"] == "cpu"
    assert forward["runners"] == [{"name": "box", "cpu_info": "cpu model"}]

    (tmp_path / "r.json").write_text(out.stdout)
    fresh = tmp_path / "fresh.duckdb"
    counts = import_files(fresh, [tmp_path / "r.json"])
    assert (counts.runs_added, counts.samples_added) == (2, 48)
    assert _samples(fresh, "L") == _samples(compared, "L")
    assert {(r.side, r.commit_sha, r.torch_version, r.host, r.env) for r in runs_for_label(fresh, "L")} == {
        (side, f"{side}sha", "2.13.0", "box", json.dumps({"threads": "1"})) for side in ("base", "head")}
    assert import_files(compared, [tmp_path / "r.json"]).samples_added == 0  # the same runs, by id


def test_a_file_written_by_the_runner_imports_with_every_sample(tmp_path, cli):
    history = tmp_path / "h.duckdb"
    out = cli(tmp_path, "import", str(DASHBOARD), "--history", str(history), "--format", "json")
    assert out.returncode == 0, out.stderr
    values = [v for r in json.loads(DASHBOARD.read_text()) for v in r["metric"]["benchmark_values"] if v is not None]
    assert json.loads(out.stdout)["samples_added"] == len(values) == 6
    (run,) = runs_for_label(history, "pytorch-benchmark:pytorch_benchmark_dashboard")
    assert run.side == "head"
    got = sorted((s.benchmark, s.test, s.mode, s.metric, s.unit, s.value) for s in run.samples)
    assert got == sorted([
        ("add", "add_M64_N64_K64_cpu", "eager", "forward_time", "us", 14.853),
        ("add", "add_M64_N64_K64_cpu", "eager", "peak memory", "KB", 0.0),
        ("add", "add_M64_N64_K64_cpu_bwdall_BACKWARD", "eager", "backward_time", "us", 61.207),
        ("relu", "relu_N1024_cpu", "compile", "forward_time", "us", 7.5),
        ("relu", "relu_N1024_cpu", "compile", "forward_time", "us", 7.25),
        ("relu", "relu_N1024_cpu", "compile", "forward_time", "us", 7.75),
    ])
    assert import_files(history, [DASHBOARD]).samples_added == 0  # the run's id comes from the file's bytes


@pytest.mark.parametrize("text, message", [
    ('[{"name": "x"}]', "not a list of PyTorch benchmark records"),
    ("[]", "not a list of PyTorch benchmark records"),
    ('[{"model": {"name": "t"}, "metric": {"benchmark_values": 3}}]', "benchmark_values is not a list"),
    ('[{"model": {}, "metric": {"benchmark_values": [1]}}]', "model.name is missing"),
    ('[{"model": {"name": "t"}, "metric": {"benchmark_values": ["fast"]}}]', "value"),
    ('[{"model": {"name": "t"}, "metric": {"benchmark_values": [1]}}', "bad JSON"),
])
def test_bad_records_are_one_line_errors_and_change_nothing(tmp_path, cli, compared, text, message):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    before = _samples(compared, "L")
    out = cli(tmp_path, "import", str(bad), "--history", str(compared))
    assert out.returncode == 4 and out.stderr.startswith("error: ") and message in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert _samples(compared, "L") == before
