"""Traced benchmark truth: `perfq index` runs each benchmark test's timed region once
(real PyTorch 2.6.0 operator benchmarks against the installed torch; a script benchmark of
our own) and records the operators it executes, per test."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from common.config import Config
from indexer.build import build_index
from indexer.trace import FileTrace, TraceJob, TraceOptions, trace_files
from schema.model import TraceMode, TraceStatus
from tests.conftest import CORPUS, db_rows, git, run_perfq

BENCH = "benchmarks/operator_benchmark"

pytestmark = [pytest.mark.torch]


@pytest.fixture
def corpus() -> Path:
    if not (CORPUS / BENCH).is_dir():
        pytest.skip("PyTorch 2.6.0 corpus not fetched")
    return CORPUS


@pytest.fixture
def opbench_repo(tmp_path: Path, corpus: Path) -> Path:
    """A repo with the corpus's yaml, its operator_benchmark framework and three benchmark files."""
    repo = tmp_path / "repo"
    native = repo / "aten/src/ATen/native"
    native.mkdir(parents=True)
    for name in ("native_functions.yaml", "tags.yaml"):
        shutil.copy(corpus / "aten/src/ATen/native" / name, native / name)
    (repo / BENCH / "pt").mkdir(parents=True)
    for path in (corpus / BENCH).glob("*.py"):
        shutil.copy(path, repo / BENCH / path.name)
    for name in ("__init__.py", "configs.py", "softmax_test.py", "stack_test.py", "qactivation_test.py"):
        shutil.copy(corpus / BENCH / "pt" / name, repo / BENCH / "pt" / name)
    return repo


def _trace_new_benchmark(repo: Path, name: str, source: str, **extra) -> FileTrace:
    """Write ``source`` as ``pt/<name>`` of ``repo``'s operator benchmarks and trace it alone."""
    path = repo / BENCH / "pt" / name
    path.write_text(source)
    rel = str(path.relative_to(repo))
    return trace_files([TraceJob(rel, "operator_benchmark", path)], TraceOptions(parallel=1, extra=extra))[rel]


@pytest.mark.corpus
def test_each_test_traced_with_nested_ops_and_remapped_devices(opbench_repo: Path, tmp_path: Path):
    pytest.importorskip("torch")
    db = tmp_path / "index.duckdb"
    cfg = Config(source_roots=(), python_roots=())
    report = build_index(opbench_repo, cfg, db, jobs=2, quiet=True)  # traces by default: torch is importable
    assert report.trace_failures == {}
    tests = {name: (device, mode) for name, device, mode in db_rows(db, "SELECT test, device, mode FROM bench_tests")}
    # short CPU configs ran for real, CUDA configs were traced on the meta device (shapes only)
    assert tests["Softmax_N1_C3_H256_W256_cpu"] == ("cpu", "real")
    assert tests["Softmax_N1_C3_H256_W256_cuda"] == ("cuda", "meta")
    assert any(mode == "meta" and device == "cpu" for device, mode in tests.values())  # long configs
    ops = {(b, t, base) for b, t, _, base in db_rows(db, "SELECT bench, test, namespace, base FROM trace_ops")}
    # operators called inside kernels: stack executes cat; softmax executes _softmax
    assert ("stack_test", "stack_sizes(1,1,1)_N2_cpu_dim0", "cat") in ops
    assert ("softmax_test", "Softmax_N1_C3_H256_W256_cuda", "_softmax") in ops
    # quantized tensors cannot run fake: long configs take the ops of their module's real tests
    assert any(m == "inferred" for (m,) in db_rows(db, "SELECT mode FROM bench_tests WHERE bench = 'qactivation_test'"))
    assert ("qactivation_test", "relu6_dims(3,4,5)_contigFalse_inplaceFalse_dtypetorch.quint8", "relu6") in ops
    before = db_rows(db, "SELECT count(*) FROM trace_ops")[0][0]
    # a later build without torch tracing keeps the cached traces of unchanged files
    (opbench_repo / BENCH / "pt/softmax_test.py").touch()
    build_index(opbench_repo, cfg, db, jobs=1, quiet=True, full=True, trace=False)
    assert db_rows(db, "SELECT count(*) FROM trace_ops")[0][0] == before


SCRIPT = """\
import torch

device = "xpu"
x = torch.randn(64, 128, device=device)
torch.sigmoid(x)  # set-up: outside the timed region
model = torch.nn.Linear(128, 32).to(device)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
    for _ in range(3):
        y = model(x)
        y.sum().backward()
    torch.xpu.synchronize()
print(prof.key_averages().table(sort_by="cpu_time_total"))
"""


def test_script_timed_region_traced_on_cpu_for_an_xpu_device(tmp_path: Path):
    pytest.importorskip("torch")
    script = tmp_path / "linear_bench.py"
    script.write_text(SCRIPT)
    broken = tmp_path / "broken_bench.py"
    broken.write_text("import torch\nraise RuntimeError('no such device here')\n")
    results = trace_files(
        [TraceJob("linear_bench.py", "script", script), TraceJob("broken_bench.py", "script", broken)],
        TraceOptions(parallel=2),
    )
    linear = results["linear_bench.py"]
    assert linear.status == TraceStatus.ok
    (test,) = linear.tests
    assert test.device == "xpu" and test.mode == TraceMode.meta  # shapes only: no compute, no memory
    assert {"aten::linear", "aten::addmm", "aten::mm", "aten::sum"} <= set(test.ops)
    assert "aten::sigmoid" not in test.ops  # before the profile block
    failed = results["broken_bench.py"]
    assert failed.status == TraceStatus.failed and "no such device here" in failed.reason


GAPS = """\
import torch

x = torch.randn(64, 64, device="xpu", requires_grad=True)
target = torch.randint(0, 64, (64, 64), device="xpu")
mask = torch.randn(64, 64, device="xpu") > 0
with torch.profiler.profile() as prof:
    for _ in range(20):
        loss = torch.nn.functional.multilabel_margin_loss(x, target)  # no meta kernel for its backward
        loss.backward()
        picked = torch.nonzero(mask)  # data-dependent: no meta shape
"""


def test_script_runs_past_missing_meta_kernels_and_data_dependent_ops(tmp_path: Path):
    pytest.importorskip("torch")
    script = tmp_path / "gaps_bench.py"
    script.write_text(GAPS)
    result = trace_files([TraceJob("gaps_bench.py", "script", script)], TraceOptions(parallel=1))["gaps_bench.py"]
    assert result.status == TraceStatus.ok, result.errors
    (test,) = result.tests
    assert {"aten::multilabel_margin_loss_backward", "aten::nonzero"} <= set(test.ops)
    assert test.mode in (TraceMode.meta, TraceMode.fake)


BAGS = """\
import random
import torch

device = "xpu"
dict_len, batch = 2500000, 1024
emb = torch.nn.EmbeddingBag(dict_len, 128, mode="sum", device=device)
input = torch.empty([batch], dtype=torch.long, device=device)
for i in range(batch):
    input[i] = random.randint(0, dict_len - 1)
bag = torch.empty([batch], dtype=torch.long, device=device)
for i in range(batch):
    bag[i] = i
grad = torch.randn(batch, 128, device=device)
with torch.profiler.profile() as prof:
    for _ in range(20):
        output = emb(input, bag)
        output.backward(grad)
"""


def test_the_small_cpu_run_keeps_indices_written_by_python_within_its_small_tensors(tmp_path: Path):
    """The small run cuts a 2.5M-row table to a few rows; indices the script writes into an
    integer tensor from Python, and what it leaves uninitialised, must still fall inside it, or
    the run stops at the forward and never shows what runs inside the backward."""
    pytest.importorskip("torch")
    script = tmp_path / "embedding_bag_bench.py"
    script.write_text(BAGS)
    result = trace_files([TraceJob("embedding_bag_bench.py", "script", script)], TraceOptions(parallel=1))
    (test,) = result["embedding_bag_bench.py"].tests
    assert ("aten::_embedding_bag_backward", "aten::_embedding_bag_dense_backward") in set(map(tuple, test.nested))


PROBING = """\
import operator_benchmark as op_bench
import torch

if torch.cuda.is_available():  # as torch.testing._internal does at import (fill_test imports it)
    torch.cuda.current_device()

configs = op_bench.config_list(
    attr_names=["N"], attrs=[[8], [16]], cross_product_configs={"device": ["cpu", "cuda"]}, tags=["short"]
)


class FillBenchmark(op_bench.TorchBenchmarkBase):
    def init(self, N, device):
        self.inputs = {"x": torch.zeros(N, device=device)}
        self.set_module_name("fill_")

    def forward(self, x):
        return x.fill_(10)


op_bench.generate_pt_test(configs, FillBenchmark)
"""


@pytest.mark.corpus
def test_a_module_that_probes_the_cuda_device_at_import_is_still_traced(opbench_repo: Path):
    pytest.importorskip("torch")
    result = _trace_new_benchmark(opbench_repo, "probe_test.py", PROBING)
    assert result.status == TraceStatus.ok, result.reason
    tests = {t.name: t for t in result.tests}
    assert {"fill__N8_cpu", "fill__N16_cpu", "fill__N8_cuda", "fill__N16_cuda"} <= set(tests)
    assert "aten::fill_" in tests["fill__N8_cuda"].ops


SIZES = """\
import operator_benchmark as op_bench
import torch

configs = op_bench.cross_product_configs(
    N=[2, 4, 8, 16], K=[2, 3], dtype=[torch.float, torch.double], device=["cpu"], tags=["long"]
)


class PlainBenchmark(op_bench.TorchBenchmarkBase):
    def init(self, N, K, dtype, device):
        self.inputs = {"x": torch.ones(N, K, dtype=dtype, device=device, requires_grad=self.auto_set())}
        self.set_module_name("plain")

    def forward(self, x):
        return x.mul(2)


class ThresholdBenchmark(op_bench.TorchBenchmarkBase):
    def init(self, N, K, dtype, device):
        self.inputs = {"x": torch.ones(N, K, dtype=dtype, device=device)}
        self.set_module_name("threshold")

    def forward(self, x):
        return torch.cumsum(x, 0) if x.numel() >= 32 else x.sum(0)  # a size decides the path


op_bench.generate_pt_test(configs, PlainBenchmark)
op_bench.generate_pt_gradient_test(configs, PlainBenchmark)
op_bench.generate_pt_test(configs, ThresholdBenchmark)
"""


@pytest.mark.corpus
def test_configs_that_differ_only_in_sizes_take_the_operators_of_their_smallest_and_largest(opbench_repo: Path):
    pytest.importorskip("torch")
    sampled = _trace_new_benchmark(opbench_repo, "sizes_test.py", SIZES)
    every = _trace_new_benchmark(opbench_repo, "sizes_test.py", SIZES, sample_sizes=False)
    assert sampled.status == every.status == TraceStatus.ok, (sampled.reason, every.reason)
    # the same tests, named as the framework names them (gradient tests: bwdall, bwd1), the same operators
    assert {t.name: set(t.ops) for t in sampled.tests} == {t.name: set(t.ops) for t in every.tests}
    assert "plain_N4_K3_dtypetorch.float32_cpu_bwd1" in {t.name for t in sampled.tests}
    modes = {t.name: t.mode for t in sampled.tests}
    assert modes["plain_N4_K3_dtypetorch.float32_cpu"] == TraceMode.sampled
    assert modes["plain_N2_K2_dtypetorch.float32_cpu"] != TraceMode.sampled  # the smallest ran
    # where the smallest and largest disagree (sum below 32 elements, cumsum from 32), all ran
    assert not any(m == TraceMode.sampled for n, m in modes.items() if n.startswith("threshold"))
    assert "aten::cumsum" in {op for t in sampled.tests if t.name.startswith("threshold_N16") for op in t.ops}
    # the 6 middles of plain's 4 groups: forward (1 case each), backward (2: all, bwd1)
    assert len([t for t in sampled.tests if t.mode == TraceMode.sampled]) == 2 * 6 + 2 * 6 * 2


SHARED_SIZES = "SIZES = [8, 16]\n"

USES_SHARED = """\
import operator_benchmark as op_bench
import torch

from pt import shared_sizes

configs = op_bench.cross_product_configs(N=shared_sizes.SIZES, device=["cpu"], tags=["short"])


class NegBenchmark(op_bench.TorchBenchmarkBase):
    def init(self, N, device):
        self.inputs = {"x": torch.ones(N, device=device)}
        self.set_module_name("neg")

    def forward(self, x):
        return torch.neg(x)


op_bench.generate_pt_test(configs, NegBenchmark)
"""


@pytest.mark.corpus
def test_a_benchmark_is_traced_again_when_a_module_it_imports_changes(tmp_path: Path, corpus: Path):
    """The tests of a benchmark come from the modules it imports too (shared configs, the
    harness): its cached trace is reused only while they are unchanged."""
    pytest.importorskip("torch")
    repo = tmp_path / "repo"
    native = repo / "aten/src/ATen/native"
    native.mkdir(parents=True)
    shutil.copy(corpus / "aten/src/ATen/native/native_functions.yaml", native)
    (repo / BENCH / "pt").mkdir(parents=True)
    for path in (corpus / BENCH).glob("*.py"):  # the harness: benchmark_core.py, benchmark_pytorch.py...
        shutil.copy(path, repo / BENCH / path.name)
    (repo / BENCH / "pt/__init__.py").write_text("")
    (repo / BENCH / "pt/shared_sizes.py").write_text(SHARED_SIZES)
    (repo / BENCH / "pt/neg_test.py").write_text(USES_SHARED)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a benchmark whose sizes live in a shared module")
    db = repo / ".git/perfq/index.duckdb"

    def tests() -> set[str]:
        return {t for (t,) in db_rows(db, "SELECT test FROM bench_tests WHERE bench = 'neg_test'")}

    first = run_perfq(repo, "index", "-q")
    assert first.returncode == 0, first.stderr
    assert tests() == {"neg_N8_cpu", "neg_N16_cpu"}
    (repo / BENCH / "pt/shared_sizes.py").write_text("SIZES = [8, 32]\n")  # the benchmark file is unchanged
    again = run_perfq(repo, "index", "-q")
    assert again.returncode == 0, again.stderr
    assert tests() == {"neg_N8_cpu", "neg_N32_cpu"}


QUANTIZED = """\
import operator_benchmark as op_bench
import torch

long_configs = op_bench.cross_product_configs(N=[8, 16, 32], dtype=[torch.quint8], tags=["long"])
short_configs = op_bench.config_list(attr_names=["N", "dtype"], attrs=[[4, torch.quint8]], tags=["short"])


class QTopkBenchmark(op_bench.TorchBenchmarkBase):
    def init(self, N, dtype):
        self.inputs = {"q": torch.quantize_per_tensor(torch.rand(N, N), 0.1, 0, dtype)}
        self.set_module_name("qtopk")

    def forward(self, q):
        return torch.topk(q, 2)


op_bench.generate_pt_test(short_configs + long_configs, QTopkBenchmark)
"""


@pytest.mark.corpus
def test_quantized_configs_are_not_traced_as_dense_ones_on_the_meta_device(opbench_repo: Path):
    """The meta device and fake tensors make ``quantize_per_tensor`` return a float tensor: a
    long quantized config traced there ran dense topk. It takes its real tests' operators."""
    pytest.importorskip("torch")
    result = _trace_new_benchmark(opbench_repo, "qtopk_only_test.py", QUANTIZED)
    assert result.status == TraceStatus.ok, result.reason
    tests = {t.name: t for t in result.tests}
    # named as the framework names them (its init sets the module name), not after the class
    assert set(tests) == {f"qtopk_N{n}_dtypetorch.quint8" for n in (4, 8, 16, 32)}
    assert tests["qtopk_N4_dtypetorch.quint8"].mode == TraceMode.real
    for n in (8, 16, 32):
        test = tests[f"qtopk_N{n}_dtypetorch.quint8"]
        assert test.mode == TraceMode.inferred
        assert "aten::topk@quantized" in test.ops and "aten::topk" not in test.ops
