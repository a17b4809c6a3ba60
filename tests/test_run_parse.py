"""operator_benchmark adapter: command building, output parsing, selection from `affected`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from common.errors import PerfqError
from perfq.run import opbench
from perfq.run.jobs import drop_unsupported_compile, jobs_from_affected, match_ops
from perfq.run.opbench import OpBenchSpec, RunnerCaps
from perfq.run.script_bench import parse_output, script_benchmarks
from tests.affected_docs import affected_doc, canary, selected
from tests.conftest import CORPUS
from tests.run_fakebench import make_bench_root

TEXT_260 = """# ----------------------------------------
# PyTorch/Caffe2 Operator Micro-benchmarks
# ----------------------------------------
# Tag : short

# Benchmarking PyTorch: Softmax
/site-packages/torch/nn/modules/module.py:1778: UserWarning: Implicit dimension choice
# Mode: Eager
# Name: Softmax_N1_C3_H256_W256_cpu
# Input: N: 1, C: 3, H: 256, W: 256, device: cpu
Forward Execution Time (us) : 140.033

# Benchmarking PyTorch: add
# Mode: JIT
# Name: add_M8_N2_K1_cuda_bwdall
# Input: M: 8, N: 2, K: 1, device: cuda
Run: 0, Backward Execution Time (us) : 11.500
Run: 1, Backward Execution Time (us) : 12.250

# Benchmarking PyTorch: relu
# Mode: Eager
# Name: relu_M4
# Input: M: 4
Forward Execution Time (us) : 3.000
"""


def test_parse_text_260_format():
    found = opbench.parse_text(TEXT_260, default_device="cpu")
    assert [(m.test, m.value, m.metric, m.mode, m.device) for m in found] == [
        ("Softmax_N1_C3_H256_W256_cpu", 140.033, "forward_time", "eager", "cpu"),
        ("add_M8_N2_K1_cuda_bwdall", 11.5, "backward_time", "jit", "cuda"),
        ("add_M8_N2_K1_cuda_bwdall", 12.25, "backward_time", "jit", "cuda"),
        ("relu_M4", 3.0, "forward_time", "eager", "cpu"),  # no device in input: the run's device
    ]
    assert all(m.unit == "us" for m in found)


def test_num_runs_collapse_to_one_sample_per_invocation():
    spec = OpBenchSpec("x", device="cpu")
    found = opbench.parse_invocation(
        TEXT_260.replace("12.250", "12.250\nRun: 2, Backward Execution Time (us) : 90.000"), spec
    )
    by = {m.test: m.value for m in found}
    assert by["add_M8_N2_K1_cuda_bwdall"] == 11.5  # fastest of 11.5, 12.25, 90
    assert len(found) == 3
    runs = opbench.parse_text(TEXT_260.replace("12.250", "12.250\nRun: 2, Backward Execution Time (us) : 90.000"))
    assert [m.value for m in opbench.collapse(runs, "median") if m.test.startswith("add")] == [12.25]


def test_parse_json_list_and_dashboard_records():
    listed = [
        {
            "test_name": "add_M8_cpu",
            "runtime": "Compile",
            "run": "Forward",
            "latency": 4.5,
            "latency unit": "us",
            "device": "cpu",
        },
        {"test_name": "add_M8_cpu_bwdall", "runtime": "Eager", "run": "Backward", "latency": 9.0},
    ]
    found = opbench.parse_json(listed, "cpu")
    assert [(m.test, m.value, m.metric, m.mode) for m in found] == [
        ("add_M8_cpu", 4.5, "forward_time", "compile"),
        ("add_M8_cpu_bwdall", 9.0, "backward_time", "eager"),
    ]
    dashboard = [
        {
            "benchmark": {
                "name": "PyTorch operator benchmark",
                "mode": "training",
                "extra_info": {"device": "cuda", "use_compile": False},
            },
            "model": {"name": "mm_M64_cuda"},
            "metric": {"name": "latency", "unit": "us", "benchmark_values": [7.0]},
        },
        {
            "benchmark": {"mode": "training", "extra_info": {}},
            "model": {"name": "mm_M64_cuda"},
            "metric": {"name": "peak memory", "unit": "KB", "benchmark_values": [100.0]},
        },
    ]
    found = opbench.parse_json(dashboard)
    assert [(m.test, m.value, m.metric, m.device, m.mode) for m in found] == [
        ("mm_M64_cuda", 7.0, "backward_time", "cuda", "eager")
    ]


def test_parse_csv_output():
    text = (
        "Benchmarking Framework,Benchmarking Module Name,Case Name,tag,run_backward,Execution Time,"
        "Peak Memory (KB)\n"
        "PyTorch,add,add_M8_cpu,short,False,3.250000,0\n"
        "PyTorch,add,add_M8_cpu_bwdall_BACKWARD,short,True,7.500000,0\n"
    )
    found = opbench.parse_csv(text)
    assert [(m.test, m.value, m.metric, m.device) for m in found] == [
        ("add_M8_cpu", 3.25, "forward_time", "cpu"),
        ("add_M8_cpu_bwdall", 7.5, "backward_time", "cpu"),
    ]


def test_build_command_filters_and_flags():
    caps = RunnerCaps()
    spec = OpBenchSpec(
        "softmax_test",
        tests=("Softmax_N1_cpu",),
        device="cpu",
        iterations=50,
        num_runs=2,
        warmup_iterations=5,
        omp_num_threads=1,
        mkl_num_threads=1,
    )
    argv, notes = opbench.build_command("py", spec, caps)
    assert argv[:3] == ["py", "-m", "pt.softmax_test"]
    assert argv[3:5] == ["--test-name", "Softmax_N1_cpu"]
    assert "--tag-filter" not in argv  # a test name overrides the tag in the runner anyway
    for flag, value in (
        ("--device", "cpu"),
        ("--iterations", "50"),
        ("--num-runs", "2"),
        ("--warmup-iterations", "5"),
        ("--omp-num-threads", "1"),
        ("--mkl-num-threads", "1"),
    ):
        assert argv[argv.index(flag) + 1] == value
    assert notes == []
    assert opbench.thread_env(spec) == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

    many = OpBenchSpec("add", tests=("a", "b"), ops=("add", "mul"), tag_filter="all")
    argv, notes = opbench.build_command("py", many, caps)
    assert argv[argv.index("--tag-filter") + 1] == "all"
    assert argv[argv.index("--operators") + 1] == "add,mul"
    assert "--test-name" not in argv and notes and "2 tests" in notes[0]


def test_compile_mode_needs_runner_support(tmp_path):
    old = make_bench_root(tmp_path / "old")
    new = make_bench_root(tmp_path / "new", new_runner=True)
    assert opbench.detect_caps(old) == RunnerCaps(False, False, False, True)
    caps = opbench.detect_caps(new)
    assert caps.use_compile and caps.output_json and caps.output_csv
    spec = OpBenchSpec("fake_test", mode="compile")
    with pytest.raises(ValueError, match="no --use-compile"):
        opbench.build_command("py", spec, opbench.detect_caps(old))
    argv, _ = opbench.build_command("py", spec, caps, json_out=tmp_path / "o.json")
    assert "--use-compile" in argv and argv[argv.index("--output-json") + 1] == str(tmp_path / "o.json")


@pytest.mark.corpus
def test_pytorch_260_runner_has_no_compile_or_json():
    root = CORPUS / "benchmarks" / "operator_benchmark"
    if not root.is_dir():
        pytest.skip("no PyTorch 2.6.0 corpus")
    caps = opbench.detect_caps(root)
    assert not caps.use_compile and not caps.output_json and caps.warmup_iterations


def test_fake_module_output_parses_and_filters(tmp_path):
    root = make_bench_root(tmp_path, new_runner=True)
    spec = OpBenchSpec("fake_test", tests=("add_M64_cpu", "mul_M8_cpu"), device="cpu")
    argv, _ = opbench.build_command(sys.executable, spec, RunnerCaps())
    out = subprocess.run(argv, cwd=root, capture_output=True, text=True, check=True).stdout
    found = opbench.parse_invocation(out, spec)
    assert sorted((m.test, m.value) for m in found) == [("add_M64_cpu", 40.0), ("mul_M8_cpu", 12.0)]
    # newer runner: the JSON file wins over stdout
    json_file = tmp_path / "out.json"
    one = OpBenchSpec("fake_test", tests=("add_M8_cpu",), mode="compile")
    argv, _ = opbench.build_command(sys.executable, one, opbench.detect_caps(root), json_file)
    out = subprocess.run(argv, cwd=root, capture_output=True, text=True, check=True).stdout
    assert json.loads(json_file.read_text())[0]["runtime"] == "Compile"
    found = opbench.parse_invocation("", one, json_file)
    assert [(m.test, m.mode, m.value) for m in found] == [("add_M8_cpu", "compile", 10.0)]


AFFECTED = affected_doc(
    (
        selected("fake_test", "benchmarks/operator_benchmark/pt/fake_test.py", tests=("AddBenchmark",),
                 ops=("aten::add.Tensor",), modes=("eager", "compile")),
        selected("other_test", "benchmarks/operator_benchmark/pt/other_test.py", ops=("aten::mul", "aten::relu_")),
        selected("gone_test", "benchmarks/operator_benchmark/pt/gone_test.py"),
    ),
    (canary("core", "fake_test", "third_test", trigger="c10/core/TensorImpl.h"),),
)


def test_jobs_from_affected_selection_to_commands(tmp_path):
    root = make_bench_root(tmp_path, names=("fake_test", "other_test", "third_test"))
    base = OpBenchSpec("", device="cpu", iterations=10)
    jobs, notes = jobs_from_affected(
        AFFECTED, root, base, {}, mode=None, ops_resolver=lambda name: ["add", "mul", "Relu", "Softmax"]
    )
    by = {(j.benchmark, j.spec.mode): j.spec for j in jobs}
    assert set(by) == {
        ("fake_test", "eager"),
        ("fake_test", "compile"),
        ("other_test", "eager"),
        ("third_test", "eager"),
    }
    # fake_test is also in a canary set (all tests): the wider selection wins
    assert by[("fake_test", "eager")].tests == ()
    assert by[("other_test", "eager")].ops == ("mul", "Relu")
    assert by[("third_test", "eager")].tests == () and by[("third_test", "eager")].ops == ()
    assert any("gone_test" in n for n in notes)
    argv, _ = opbench.build_command("py", by[("other_test", "eager")], RunnerCaps())
    assert argv[2] == "pt.other_test" and argv[argv.index("--operators") + 1] == "mul,Relu"
    assert argv[argv.index("--iterations") + 1] == "10"
    kept, notes = drop_unsupported_compile(jobs, opbench.detect_caps(root))
    assert len(kept) == 3 and "no --use-compile" in notes[0]
    # without the canary, the direct entry's operators narrow the job; its "tests" are
    # benchmark classes, which the runner's --test-name would never match
    jobs, _ = jobs_from_affected(
        affected_doc(AFFECTED.benchmarks[:1]), root, base, {}, mode="eager", ops_resolver=lambda name: ["add"]
    )
    assert [(j.spec.tests, j.spec.ops, j.spec.mode) for j in jobs] == [((), ("add",), "eager")]
    argv, _ = opbench.build_command("py", jobs[0].spec, RunnerCaps())
    assert "--test-name" not in argv and argv[argv.index("--operators") + 1] == "add"


def test_traced_selection_runs_its_tests_by_module(tmp_path):
    root = make_bench_root(tmp_path, names=("fake_test",))
    doc = affected_doc((selected("fake_test", "x", tests=("add_M1_N1_cpu", "add_M8_N8_cpu"), modules=("add",),
                                 ops=("add.Tensor", "add.out")),))
    (job,) = jobs_from_affected(doc, root, OpBenchSpec("", device="cpu"), {}, mode=None)[0]
    assert job.spec.tests == ("add_M1_N1_cpu", "add_M8_N8_cpu") and job.spec.ops == ("add",)
    argv, notes = opbench.build_command("py", job.spec, RunnerCaps())
    assert argv[argv.index("--operators") + 1] == "add" and "--test-name" not in argv
    assert "kept by parsing" in notes[0]


def test_default_root_from_config():
    assert opbench.default_root(("benchmarks/operator_benchmark/pt",)) == "benchmarks/operator_benchmark"
    assert opbench.default_root(("bench/operator_benchmark",)) == "bench/operator_benchmark"
    assert opbench.default_root(("other/dir",)) == opbench.DEFAULT_ROOT


def test_match_ops_normalises_names():
    assert match_ops(["aten::softmax.int", "aten::add_"], ["Softmax", "add", "mul"]) == ["Softmax", "add"]
    assert match_ops(["aten::conv2d"], ["add"]) == []


def test_script_benchmark_config_and_parse():
    extra = {
        "benchmarks": {
            "gemm": {
                "command": "{python} bench.py --n 3",
                "pattern": r"^(?P<test>\w+): (?P<value>[0-9.]+) GB/s$",
                "unit": "GB/s",
                "metric": "bandwidth",
            }
        }
    }
    bench = script_benchmarks(extra)["gemm"]
    assert bench.argv("/usr/bin/python3") == ["/usr/bin/python3", "bench.py", "--n", "3"]
    found = parse_output(bench, "warmup\nsmall: 1.5 GB/s\nlarge: 12 GB/s\nnoise: x GB/s\n")
    assert [(m.test, m.value, m.unit, m.metric) for m in found] == [
        ("small", 1.5, "GB/s", "bandwidth"),
        ("large", 12.0, "GB/s", "bandwidth"),
    ]
    with pytest.raises(PerfqError, match="value"):
        script_benchmarks({"benchmarks": {"x": {"command": "a", "pattern": "(?P<v>1)"}}})
    with pytest.raises(PerfqError, match="command"):
        script_benchmarks({"benchmarks": {"x": {"pattern": "(?P<value>1)"}}})
