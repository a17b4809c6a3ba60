"""`perfq affected` on the fixture repository: every resolution path, exact selections and chains."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import jsonschema
import pytest

from common.documents import json_schema
from perfq.options import EXIT_ERROR, EXIT_GATE
from query.document import AffectedDoc
from tests.aten_fixture import commit_all, git, make_repo, perfq, replace_in

KERNEL = "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp"
OP_FILE = "aten/src/ATen/native/SoftmaxOp.cpp"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_repo(tmp_path_factory.mktemp("affected"))
    proc = perfq(root, "index", "-q")
    assert proc.returncode == 0, proc.stderr
    return root


@pytest.fixture
def change(repo: Path) -> Iterator[Callable[..., dict]]:
    """Apply edits on a branch, commit, and return `perfq affected main --format json`."""

    def run(*edits: tuple[str, str, str], extra: tuple[str, ...] = ()) -> dict:
        git(repo, "checkout", "-q", "-b", "work")
        for rel, old, new in edits:
            replace_in(repo, rel, old, new)
        commit_all(repo)
        proc = perfq(repo, "affected", "main", "--format", "json", *extra)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    yield run
    git(repo, "checkout", "-q", "-f", "main")
    git(repo, "clean", "-fdq")
    git(repo, "branch", "-q", "-D", "work")


def names(doc: dict) -> list[str]:
    return sorted(b["name"] for b in doc["benchmarks"])


def bench(doc: dict, name: str) -> dict:
    return next(b for b in doc["benchmarks"] if b["name"] == name)


def test_helper_below_stub_kernel_reaches_ops_and_benchmarks(change):
    doc = change((KERNEL, "out[i] * 2", "out[i] * 3"))
    jsonschema.validate(doc, json_schema(AffectedDoc))  # the JSON is the typed document's
    assert [c["function"] for c in doc["changed_functions"]] == [
        "at::native::(anonymous namespace)::inner_loop<scalar_t>"
    ]
    assert names(doc) == ["fancy_test", "softmax_op_test"]
    assert {"softmax_op.out", "softmax_op", "fancy"} <= set(doc["ops"])
    chain = bench(doc, "softmax_op_test")["reasons"][0]["chain"]
    assert any("softmax_op_kernel_impl" in s for s in chain)
    assert "stub softmax_op_stub [registered]" in chain
    assert "op softmax_op.out [kernel]" in chain
    assert chain[-1] == "benchmark softmax_op_test [bench_call]"
    assert bench(doc, "softmax_op_test")["devices"] == ["cpu"]  # a cpu/ kernel: not the CUDA runs
    assert doc["no_benchmark_ops"] == []
    assert doc["compile_mode"] is False and doc["canary"] == []


def test_static_helper_with_no_benchmark(change, repo):
    doc = change((OP_FILE, "return x + 1;", "return x + 2;"))
    assert names(doc) == []
    assert doc["no_benchmark_ops"] == ["lonely"]
    proc = perfq(repo, "affected", "main", "--fail-on-no-benchmark", "--format", "names")
    assert proc.returncode == EXIT_GATE


def test_cuda_kernel_change_selects_cuda_runs(change):
    doc = change(("aten/src/ATen/native/cuda/SoftmaxOp.cu", "out[threadIdx.x] = 0;", "out[threadIdx.x] = 1;"))
    assert "softmax_op_test" in names(doc)
    assert bench(doc, "softmax_op_test")["devices"] == ["cuda"]
    assert "softmax_op.out" in doc["ops"]


def test_native_functions_entry_selects_its_op(change):
    doc = change(
        (
            "aten/src/ATen/native/native_functions.yaml",
            "CompositeExplicitAutograd: fancy",
            "CompositeExplicitAutograd: fancy\n  tags: core",
        )
    )
    assert names(doc) == ["fancy_test"]


def test_benchmark_file_selects_itself(change):
    doc = change(("benchmarks/operator_benchmark/pt/qthing_test.py", "torch.rand(N)", "torch.rand(N, 2)"))
    assert names(doc) == ["qthing_test"]


def test_library_impl_registration(change):
    doc = change(("aten/src/ATen/native/quantized/cpu/qthing.cpp", "return x;", "return x + x;"))
    assert names(doc) == ["qthing_test"]
    assert "quantized::qthing" in doc["ops"]


def test_python_function_change(change):
    doc = change(("torch/nn/functional.py", "torch.softmax_op(x, 0)", "torch.softmax_op(x, 1)"))
    assert names(doc) == ["softmax_op_test"]


def test_file_level_change_is_low_confidence_and_listed(change):
    doc = change((OP_FILE, "namespace at::native {\nDEFINE", "namespace at::native {\nint g_counter = 0;\nDEFINE"))
    assert doc["unmapped_changes"] and doc["unmapped_changes"][0]["file"] == OP_FILE
    assert "fancy_test" in names(doc)
    assert {b["confidence"] for b in doc["benchmarks"]} == {"low"}


def test_deleted_function_and_renamed_file(change, repo):
    git(repo, "checkout", "-q", "-b", "work")
    replace_in(repo, OP_FILE, "Tensor composite_thing(const Tensor& self) {\n  return self;\n}\n", "")
    git(repo, "mv", "aten/src/ATen/native/quantized/cpu/qthing.cpp", "aten/src/ATen/native/quantized/cpu/q2.cpp")
    commit_all(repo)
    proc = perfq(repo, "affected", "main", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    deleted = [c for c in doc["changed_functions"] if c["function"] == "at::native::composite_thing"]
    assert deleted and deleted[0]["status"] == "deleted"
    assert "composite_thing" in doc["no_benchmark_ops"]
    git(repo, "checkout", "-q", "-f", "main")
    git(repo, "branch", "-q", "-D", "work")
    git(repo, "checkout", "-q", "-b", "work")  # the fixture's teardown deletes it


def test_patch_on_stdin_and_other_formats(repo):
    patch = (
        f"diff --git a/{KERNEL} b/{KERNEL}\n--- a/{KERNEL}\n+++ b/{KERNEL}\n"
        "@@ -7 +7 @@\n-    out[i] = out[i] * 2;\n+    out[i] = out[i] * 4;\n"
    )
    proc = perfq(repo, "affected", "--diff", "-", "--format", "names", stdin=patch)
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.split()) == ["fancy_test", "softmax_op_test"]
    proc = perfq(repo, "affected", "--diff", "-", "--format", "gha-matrix", stdin=patch)
    matrix = json.loads(proc.stdout)
    assert {(e["benchmark"], e["mode"], e["device"]) for e in matrix["include"]} == {
        ("fancy_test", "eager", "cpu"),
        ("softmax_op_test", "eager", "cpu"),
    }
    proc = perfq(repo, "affected", "--diff", "-", "--format", "markdown", stdin=patch)
    assert proc.stdout.startswith("**perfq**: 2 benchmark(s)")
    assert "| `softmax_op_test` |" in proc.stdout


def test_compile_paths_select_compile_mode(change, repo):
    (repo / "torch/_inductor").mkdir(parents=True, exist_ok=True)
    doc = change(("torch/nn/functional.py", "import torch\n", "import torch\nimport torch._inductor\n"))
    assert doc["compile_mode"] is False  # only the module-level import changed: file level
    git(repo, "checkout", "-q", "-f", "main")
    git(repo, "branch", "-q", "-D", "work")
    git(repo, "checkout", "-q", "-b", "work")
    (repo / "torch/_inductor/lowering.py").write_text("def lower(x):\n    return x\n")
    commit_all(repo)
    proc = perfq(repo, "affected", "main", "--format", "json")
    doc = json.loads(proc.stdout)
    assert doc["compile_mode"] is True
    assert [c["set"] for c in doc["canary"]] == ["compile"]


def test_errors_are_one_line(repo, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    for args, where, message in [
        (("affected", "main"), plain, "is not a git repository"),
        (("affected", "no-such-ref"), repo, "unknown ref 'no-such-ref'"),
    ]:
        proc = perfq(where, *args)
        assert proc.returncode == EXIT_ERROR
        assert proc.stderr.strip().count("\n") == 0 and message in proc.stderr
    other = make_repo(tmp_path / "other")
    proc = perfq(other, "affected", "main")
    assert proc.returncode == EXIT_ERROR and "no perfq index" in proc.stderr and "perfq index" in proc.stderr


def test_corrupt_index_is_reported_not_crashed(repo, tmp_path):
    bad = tmp_path / "corrupt.duckdb"
    bad.write_bytes(b"this is not a duckdb file" * 100)
    proc = perfq(repo, "affected", "main", "--db", str(bad))
    assert proc.returncode == EXIT_ERROR
    assert proc.stderr.startswith("error: ") and proc.stderr.strip().count("\n") == 0


def test_stale_index_warns(repo):
    git(repo, "checkout", "-q", "-b", "ahead")
    replace_in(repo, "README.md", "fixture", "fixture 2")
    commit_all(repo)
    replace_in(repo, KERNEL, "out[i] * 2", "out[i] * 5")
    commit_all(repo)
    proc = perfq(repo, "affected", "HEAD~1", "--format", "json")
    git(repo, "checkout", "-q", "-f", "main")
    git(repo, "branch", "-q", "-D", "ahead")
    doc = json.loads(proc.stdout)
    assert any("older than the base" in w for w in doc["warnings"])
    assert "softmax_op_test" in names(doc)


def test_shutil_available():
    assert shutil.which("git")


def test_backtest_replays_every_commit(repo):
    git(repo, "checkout", "-q", "-b", "history")
    replace_in(repo, KERNEL, "out[i] * 2", "out[i] * 3")
    commit_all(repo, "kernel")
    replace_in(repo, "README.md", "fixture", "fixture docs")
    commit_all(repo, "docs")
    proc = perfq(repo, "backtest", "main..history", "--format", "json")
    git(repo, "checkout", "-q", "-f", "main")
    git(repo, "branch", "-q", "-D", "history")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [r["subject"] for r in report["commits"]] == ["kernel", "docs"]
    assert [r["benchmarks"] for r in report["commits"]] == [["softmax_op_test", "fancy_test"], []]
    assert report["summary"]["suite"] == 3 and report["summary"]["commits"] == 2


def test_hub_operator_selects_its_own_benchmarks_not_a_broad_set(tmp_path):
    from tests.aten_fixture import FILES, NATIVE_FUNCTIONS, write_tree

    users = "\n".join(f"void user_{i}(const Tensor& x) {{ at::hubby(x); }}" for i in range(40))
    files = dict(FILES)
    files["aten/src/ATen/native/native_functions.yaml"] = NATIVE_FUNCTIONS + (
        "\n- func: hubby(Tensor self) -> Tensor\n  variants: function\n  dispatch:\n    CPU: hubby_kernel\n"
    )
    files["aten/src/ATen/native/Hub.cpp"] = (
        "namespace at::native {\nTensor hubby_kernel(const Tensor& self) {\n  return self;\n}\n" + users + "\n}\n"
    )
    files["benchmarks/operator_benchmark/pt/hubby_test.py"] = (
        "import operator_benchmark as op_bench\nimport torch\n\n\n"
        "class HubbyBenchmark(op_bench.TorchBenchmarkBase):\n    def forward(self, x):\n        return torch.hubby(x)\n"
    )
    root = write_tree(tmp_path / "hub", files)
    git(root, "init", "-q", "-b", "main")
    commit_all(root, "base")
    assert perfq(root, "index", "-q").returncode == 0
    git(root, "checkout", "-q", "-b", "work")
    replace_in(root, "aten/src/ATen/native/Hub.cpp", "  return self;", "  return self + self;")
    commit_all(root)
    doc = json.loads(perfq(root, "affected", "main", "--format", "json").stdout)
    assert names(doc) == ["hubby_test"]
    assert doc["canary"] == []
    assert doc["shared_infrastructure"] is False
    assert doc["ops"] == ["hubby"]  # its 40 callers are not followed


def test_static_helper_in_a_header_reaches_its_includers(change, repo):
    (repo / "aten/src/ATen/native/cpu/Helpers.h").write_text(
        "#pragma once\nnamespace at::native {\nnamespace {\ninline int scale_of(int x) {\n  return x * 2;\n}\n}\n}\n"
    )
    replace_in(repo, KERNEL, "out[i] = out[i] * 2;", "out[i] = out[i] * scale_of(2);")
    commit_all(repo, "helper header")
    assert perfq(repo, "index", "-q").returncode == 0
    doc = change(("aten/src/ATen/native/cpu/Helpers.h", "return x * 2;", "return x * 3;"))
    assert names(doc) == ["fancy_test", "softmax_op_test"]
    git(repo, "checkout", "-q", "-f", "main")
    git(repo, "reset", "-q", "--hard", "HEAD~1")  # leave main (and the index) as the other tests expect
    assert perfq(repo, "index", "-q").returncode == 0


def test_an_uncommitted_edit_stays_out_of_a_committed_comparison(repo: Path):
    """The head's files are read from the working tree only when they are the committed
    blobs: an edit made after the commit is not part of `affected main`. Here the commit only
    re-spaces a line (a no-op: nothing selected) and the working tree then changes its code."""
    git(repo, "checkout", "-q", "-b", "work")
    try:
        replace_in(repo, KERNEL, "out[i] * 2", "out[i]  *  2")
        commit_all(repo)
        committed = perfq(repo, "affected", "main", "--format", "json")
        replace_in(repo, KERNEL, "out[i]  *  2", "out[i]  *  5")  # not committed
        proc = perfq(repo, "affected", "main", "--format", "json")
        with_worktree = perfq(repo, "affected", "main", "--worktree", "--format", "json")
    finally:
        git(repo, "checkout", "-q", "-f", "main")
        git(repo, "branch", "-q", "-D", "work")
    assert proc.returncode == committed.returncode == with_worktree.returncode == 0, proc.stderr
    assert proc.stdout == committed.stdout
    doc = json.loads(proc.stdout)
    assert doc["no_op_changes"] and not doc["changed_functions"] and not doc["benchmarks"]
    doc = json.loads(with_worktree.stdout)
    assert [c["function"].split("::")[-1] for c in doc["changed_functions"]] == ["inner_loop<scalar_t>"]
    assert doc["benchmarks"]
