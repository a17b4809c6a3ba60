"""The tracer starts the largest benchmark files first: on two children the pass ends with its
last file, and a long file started last would run on alone."""

from __future__ import annotations

from pathlib import Path

from indexer.trace import TraceJob, TraceOptions, _request


def _job(root: Path, name: str, size: int) -> TraceJob:
    file = root / "benchmarks/operator_benchmark/pt" / name
    file.write_text("#" * size)
    return TraceJob(str(file.relative_to(root)), "operator_benchmark", file)


def test_the_driver_is_asked_for_the_largest_files_first_and_equal_sizes_keep_their_order(tmp_path: Path):
    pt = tmp_path / "benchmarks/operator_benchmark/pt"
    pt.mkdir(parents=True)
    for harness in ("benchmark_pytorch.py", "benchmark_core.py"):
        (tmp_path / "benchmarks/operator_benchmark" / harness).write_text("")
    jobs = [_job(tmp_path, "add_test.py", 300), _job(tmp_path, "cat_test.py", 100),
            _job(tmp_path, "quantization_test.py", 1200), _job(tmp_path, "sum_test.py", 300)]
    gone = TraceJob("benchmarks/operator_benchmark/pt/gone_test.py", "operator_benchmark", pt / "gone_test.py")
    request = _request([*jobs, gone], TraceOptions())
    assert [Path(j["path"]).name for j in request["jobs"]] == [
        "quantization_test.py", "add_test.py", "sum_test.py", "cat_test.py", "gone_test.py"]
    assert {j["module"] for j in request["jobs"]} == {
        "pt.quantization_test", "pt.add_test", "pt.sum_test", "pt.cat_test", "pt.gone_test"}
