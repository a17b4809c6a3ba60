"""Scaffolded operator_benchmark files: schema parsing, generation, compiling and running them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from common.errors import PerfqError
from perfq.coverage.scaffold import parse_schema, pick_overload, scaffold

SCHEMAS = [
    "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
    "lerp.Scalar(Tensor self, Tensor end, Scalar weight) -> Tensor",
    "index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor",
    "gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor",
    "sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
    "cat(Tensor[] tensors, int dim=0) -> Tensor",
    "mm(Tensor self, Tensor mat2) -> Tensor",
    "addmv(Tensor self, Tensor mat, Tensor vec, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
    "bmm(Tensor self, Tensor mat2) -> Tensor",
    "dot(Tensor self, Tensor tensor) -> Tensor",
    "bitwise_and.Tensor(Tensor self, Tensor other) -> Tensor",
    "clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor",
    "clamp_.Tensor(Tensor(a!) self, Tensor? min=None, Tensor? max=None) -> Tensor(a!)",
    "masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor",
    "permute(Tensor(a) self, int[] dims) -> Tensor(a)",
    "view(Tensor(a) self, SymInt[] size) -> Tensor(a)",
    "transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)",
    "max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0) -> Tensor",
    "adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor",
    "topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)",
    "cholesky(Tensor self, bool upper=False) -> Tensor",
    "nll_loss(Tensor self, Tensor target, Tensor? weight=None, int reduction=Mean, SymInt ignore_index=-100) -> Tensor",
    "prelu(Tensor self, Tensor weight) -> Tensor",
    "index.Tensor(Tensor self, Tensor?[] indices) -> Tensor",
    "div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor",
    "abs.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "std.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor",
    "narrow(Tensor(a) self, int dim, SymInt start, SymInt length) -> Tensor(a)",
    "einsum(str equation, Tensor[] tensors, *, int[]? path=None) -> Tensor",
    "where.self(Tensor condition, Tensor self, Tensor other) -> Tensor",
    "stft(Tensor self, int n_fft, int? hop_length=None, int? win_length=None, Tensor? window=None, "
    "bool normalized=False, bool? onesided=None, bool? return_complex=None) -> Tensor",
    "native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, "
    "bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)",
    "slow_conv3d_forward(Tensor self, Tensor weight, SymInt[3] kernel_size, Tensor? bias, SymInt[3] stride, "
    "SymInt[3] padding) -> Tensor",
    "native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C, SymInt HxW, int group, "
    "float eps) -> (Tensor, Tensor, Tensor)",
    "masked_fill.Tensor(Tensor self, Tensor mask, Tensor value) -> Tensor",
    "margin_ranking_loss(Tensor input1, Tensor input2, Tensor target, float margin=0.0, int reduction=Mean) -> Tensor",
    "channel_shuffle(Tensor self, SymInt groups) -> Tensor",
    "binary_cross_entropy(Tensor self, Tensor target, Tensor? weight=None, int reduction=Mean) -> Tensor",
    "istft(Tensor self, int n_fft, int? hop_length=None, int? win_length=None, Tensor? window=None, "
    "bool center=True, bool normalized=False, bool? onesided=None, int? length=None, "
    "bool return_complex=False) -> Tensor",
    "linspace(Scalar start, Scalar end, int steps, *, ScalarType? dtype=None, Layout? layout=None, "
    "Device? device=None, bool? pin_memory=None) -> Tensor",
]


def test_parse_schema_arguments():
    s = parse_schema('clamp_.Tensor(Tensor(a!) self, Tensor? min=None, *, int[2] k=[1,2], str m="a,b") -> Tensor(a!)')
    assert (s.name, s.overload, s.full_name) == ("clamp_", "Tensor", "clamp_.Tensor")
    self_, mn, k, m = s.args
    assert (self_.type, self_.mutable, self_.default, self_.kwarg_only) == ("Tensor", True, None, False)
    assert (mn.optional, mn.default) == (True, "None")
    assert (k.base, k.is_list, k.list_len, k.default, k.kwarg_only) == ("int", True, 2, "[1,2]", True)
    assert m.default == '"a,b"'
    assert parse_schema("relu(Tensor self) -> Tensor").overload == ""
    assert parse_schema("_foo() -> ()").args == ()
    q = parse_schema("quantized::softmax(Tensor qx, int dim, float output_scale, int output_zero_point) -> Tensor")
    assert (q.name, q.overload, len(q.args)) == ("softmax", "", 4)
    qtext = scaffold("quantized::softmax(Tensor qx, int dim) -> Tensor", namespace="quantized").text
    assert "return torch.ops.quantized.softmax.default(qx, -1)" in qtext
    idx = parse_schema("index.Tensor(Tensor self, Tensor?[] indices) -> Tensor").args[1]
    assert (idx.type, idx.optional, idx.is_list, idx.base) == ("Tensor?[]", False, True, "Tensor")


def test_parse_schema_rejects_garbage():
    with pytest.raises(PerfqError, match="cannot parse"):
        parse_schema("not a schema")


def test_pick_overload_prefers_functional_supported_few_args():
    got = pick_overload(
        [
            "sum.dim_DimnameList(Tensor self, Dimname[1] dim, bool keepdim=False) -> Tensor",
            "sum.IntList_out(Tensor self, int[1]? dim, *, Tensor(a!) out) -> Tensor(a!)",
            "sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False) -> Tensor",
            "sum(Tensor self, *, ScalarType? dtype=None) -> Tensor",
        ]
    )
    assert got.startswith("sum(")
    assert pick_overload(["a.x(Tensor self, Dimname d) -> Tensor", "a.y(Tensor self, Tensor o) -> Tensor"]).startswith(
        "a.y"
    )


def test_dimname_only_overload_cannot_be_scaffolded():
    # torchgen (torch >= 2.7) no longer knows Dimname; older torchgen parses it and the builder refuses
    with pytest.raises(PerfqError, match="no generator|cannot parse operator schema"):
        scaffold("sum.dim_DimnameList(Tensor self, Dimname[1] dim, bool keepdim=False) -> Tensor")


@pytest.mark.parametrize("schema", SCHEMAS)
def test_scaffold_compiles_and_has_configs(schema):
    result = scaffold(schema)
    compile(result.text, result.filename, "exec")
    assert "op_bench.config_list(" in result.text and "op_bench.cross_product_configs(" in result.text
    assert 'tags=["short"]' in result.text and 'tags=["long"]' in result.text
    assert result.call in result.text and result.call.startswith("torch.ops.aten.")
    assert "op_bench.generate_pt_test(" in result.text and "benchmark_runner.main()" in result.text


def test_scaffold_call_uses_exact_overload_and_defaults():
    text = scaffold(SCHEMAS[0]).text
    assert "return torch.ops.aten.add.Tensor(self_, other)" in text  # alpha left to its default
    assert "torch.ops.aten.mm.default(" in scaffold(SCHEMAS[6]).text
    div = scaffold("div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor").text
    assert "torch.ops.aten.div.Tensor_mode(self_, other, rounding_mode=None)" in div
    # a forced optional after defaulted positionals goes by keyword
    stft = scaffold(next(s for s in SCHEMAS if s.startswith("stft("))).text
    assert "torch.ops.aten.stft.default(self_, 8, return_complex=True)" in stft
    # a factory takes the config's device and dtype
    lin = scaffold(next(s for s in SCHEMAS if s.startswith("linspace("))).text
    assert "linspace.default(0, self.end, self.steps, dtype=self.dtype, device=self.device)" in lin


FAKE_OP_BENCH = textwrap.dedent('''
    """Just enough of operator_benchmark to run each short config once."""
    import itertools

    RAN = []


    class TorchBenchmarkBase:
        def set_module_name(self, name):
            self.name = name

        def auto_set(self):
            return False


    def config_list(attr_names, attrs, cross_product_configs=None, tags=None):
        cross = cross_product_configs or {}
        out = []
        for values in attrs:
            for combo in itertools.product(*cross.values()):
                out.append({**dict(zip(attr_names, values)), **dict(zip(cross, combo)), "tags": tags})
        return out


    def cross_product_configs(tags=None, **configs):
        return [{**dict(zip(configs, c)), "tags": tags} for c in itertools.product(*configs.values())]


    def generate_pt_test(configs, cls):
        for config in configs:
            if config["tags"] != ["short"] or config.get("device") != "cpu":
                continue
            bench = cls()
            bench.init(**{k: v for k, v in config.items() if k != "tags"})
            bench.forward(*bench.inputs.values())
            RAN.append(bench.name)


    class benchmark_runner:
        @staticmethod
        def main():
            pass
''')


@pytest.mark.torch
def test_scaffolds_run_against_torch(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    (tmp_path / "operator_benchmark.py").write_text(FAKE_OP_BENCH)
    failures = {}
    for schema in SCHEMAS:
        result = scaffold(schema)
        path = tmp_path / result.filename
        path.write_text(result.text)
    script = tmp_path / "driver.py"
    script.write_text(
        textwrap.dedent("""
        import runpy, sys, traceback
        import operator_benchmark
        for path in sys.argv[1:]:
            before = len(operator_benchmark.RAN)
            try:
                runpy.run_path(path)
                ok = len(operator_benchmark.RAN) - before
                print("OK" if ok == 2 else f"RAN {ok}", path)
            except Exception as exc:
                print("FAIL", path, type(exc).__name__, str(exc).splitlines()[0][:200])
    """)
    )
    files = [str(tmp_path / scaffold(s).filename) for s in SCHEMAS]
    proc = subprocess.run(
        [sys.executable, str(script), *files],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    for line in proc.stdout.splitlines():
        if not line.startswith("OK"):
            failures[line.split()[1]] = line
    assert not failures, "\n".join(failures.values())


from tests.conftest import CORPUS  # noqa: E402


@pytest.mark.torch
@pytest.mark.corpus
def test_scaffold_runs_with_real_operator_benchmark(tmp_path):
    pytest.importorskip("torch")
    root = CORPUS / "benchmarks" / "operator_benchmark"
    if not (root / "benchmark_runner.py").exists():
        pytest.skip("no PyTorch corpus with benchmarks/operator_benchmark")
    result = scaffold(SCHEMAS[2])
    path = tmp_path / result.filename
    path.write_text(result.text)
    proc = subprocess.run(
        [
            sys.executable,
            str(path),
            "--iterations",
            "1",
            "--warmup-iterations",
            "0",
            "--device",
            "cpu",
            "--tag-filter",
            "short",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("Forward Execution Time (us)") == 2
    assert "index_add" in proc.stdout
