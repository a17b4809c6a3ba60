"""Python line truth (issue 40 item 4): the tracer records per test the Python lines it runs, and a
changed Python line selects exactly the tests that ran it (query/py_lines.py)."""

from __future__ import annotations

import json
import shutil
import textwrap
import zlib
from pathlib import Path

import pytest

from common.config import load_config
from common.diff import FileChange, parse_diff
from indexer.build import build_index
from query.py_lines import _readers, _statement, _touched, traced_line
from tests.conftest import CORPUS, db_rows, git, run_perfq

BENCH = "benchmarks/operator_benchmark"


def _digests(rows: list[str]) -> dict[int, int]:
    return {n: zlib.crc32(row.strip().encode()) & 0x7FFFFFFF for n, row in enumerate(rows, 1)}


def test_a_line_is_placed_by_its_text_where_the_traced_torch_moved_it():
    base = ["def f(x):", "    y = x + 1", "    return y", "", "def g(x):", "    return x"]
    traced = ["import os", "", "", *base]  # the installed torch: three lines more above
    assert traced_line(2, base, _digests(base)) == 2  # same number, same text
    assert traced_line(2, base, _digests(traced)) == 5  # moved: its text and its neighbours'
    edited = [*traced[:4], "    y = x + 2", *traced[5:]]  # the traced torch's line differs: not placed
    assert traced_line(2, base, _digests(edited)) is None
    twice = ["def f(x):", "    return x", "", "def f(x):", "    return x"]  # a tie: not placed
    assert traced_line(2, ["def f(x):", "    return x"], _digests(["pass", *twice])) is None


def test_statements_know_module_level_from_function_lines():
    import ast

    source = textwrap.dedent("""\
        configs = make(
            [1, 2],
        )

        class A:
            def run(self, x):
                if x:
                    return 1
                return 2
        """)
    tree = ast.parse(source)
    stmt, where, top = _statement(tree, 2)
    assert (type(stmt).__name__, where, top) == ("Assign", "<module>", True)
    stmt, where, top = _statement(tree, 8)
    assert (type(stmt).__name__, where, top) == ("Return", "A.run", False)
    stmt, where, top = _statement(tree, 7)  # the header of an if: the if itself
    assert (type(stmt).__name__, top) == ("If", False)


def test_a_pure_insertion_touches_the_code_lines_beside_it():
    rows = ["def f(x):", "    a = 1", "", "    # note", "    return a"]
    diff = "".join(line + "\n" for line in (
        "diff --git a/m.py b/m.py", "--- a/m.py", "+++ b/m.py", "@@ -2,3 +2,4 @@ def f(x):",
        "     a = 1", " ", "+    a += 1", "     # note",
    ))
    (fc,) = parse_diff(diff)
    assert _touched(fc, rows) == {2, 5}  # the code lines before and after, past blanks and comments


def _diff(*lines: str) -> FileChange:
    header = ("diff --git a/m.py b/m.py", "--- a/m.py", "+++ b/m.py")
    (fc,) = parse_diff("".join(line + "\n" for line in (*header, *lines)))
    return fc


def test_an_insertion_opening_a_block_touches_its_first_line_not_the_header():
    # perfq's diffs have no context (-U0): a pure insertion follows the line its hunk starts at
    rows = ["class T:", "    @wrap", "    def rsub(self, other):", "        return rsub(self, other)", "",
            "    def rdiv(self, other):", "        return 1"]
    fast_path = _diff("@@ -3,0 +4,2 @@", "+        if other == 0:", "+            return -self")
    assert _touched(fast_path, rows) == {4}  # not the def line (class level: it runs at import)
    rows = ["def f(x):", "    if x:", "        a()", "    c()"]
    assert _touched(_diff("@@ -3,0 +4 @@", "+        b()"), rows) == {3}  # ends the if's block: not c()
    assert _touched(_diff("@@ -2,0 +3 @@", "+        b()"), rows) == {3}  # opens it: not the if
    assert _touched(_diff("@@ -1,0 +2 @@", "+    b()"), rows) == {2}
    assert _touched(_diff("@@ -2 +2 @@", "-    if x:", "+    if not x:"), rows) == {2}


def test_readers_of_a_module_level_name_are_the_files_that_use_it():
    sources = {
        "b/pt/configs.py": b"conv_3d = [1]\nlinear = [2]\n",
        "b/pt/conv_test.py": b"from pt import configs\nx = configs.conv_3d\n",
        "b/pt/linear_test.py": b"from pt import configs\nx = configs.linear  # not conv_3d\n",
        "b/pt/other_test.py": b"from pt.configs import conv_3d\n",
    }
    assert _readers("conv_3d", "b/pt/configs.py", sources) == {"b/pt/conv_test.py", "b/pt/other_test.py"}


# --------------------------------------------------------------------------- end to end (torch)

CONFIGS = """\
import operator_benchmark as op_bench

split_configs = op_bench.config_list(
    attr_names=["M", "N"], attrs=[[4, 6]], cross_product_configs={"device": ["cpu"]}, tags=["short"]
)
add_configs = op_bench.config_list(
    attr_names=["M", "N"], attrs=[[3, 5]], cross_product_configs={"device": ["cpu"]}, tags=["short"]
)
"""

SPLIT = """\
import operator_benchmark as op_bench
import torch
from pt import mini_configs


class SplitBenchmark(op_bench.TorchBenchmarkBase):
    def init(self, M, N, device):
        self.inputs = {"input": torch.rand(M, N, device=device), "size": 2}
        self.linear = torch.nn.Linear(N, N)  # setup: Linear.reset_parameters runs outside the timed region
        self.set_module_name("split")

    def forward(self, input, size: int):
        return torch.split(1 - self.linear(input), size)  # Linear.forward, Tensor.__rsub__


op_bench.generate_pt_test(mini_configs.split_configs, SplitBenchmark)
"""

ADD = """\
import operator_benchmark as op_bench
import torch
from pt import mini_configs


class AddBenchmark(op_bench.TorchBenchmarkBase):
    def init(self, M, N, device):
        self.inputs = {
            "a": torch.rand(M, N, device=device, requires_grad=self.auto_set()),
            "b": torch.rand(M, N, device=device, requires_grad=self.auto_set()),
        }
        self.set_module_name("add")

    def forward(self, a, b):
        return torch.add(a, b)


op_bench.generate_pt_test(mini_configs.add_configs, AddBenchmark)
op_bench.generate_pt_gradient_test(mini_configs.add_configs, AddBenchmark)
"""


@pytest.fixture
def line_repo(tmp_path: Path) -> Path:
    """A git repo with the corpus's operator_benchmark harness, a shared config module, two small
    benchmarks (a split building an nn.Linear in its init; an add with gradient tests) and the
    corpus's torch/_tensor.py and torch/nn/modules/linear.py (2.6.0, while the traced torch is the
    installed one)."""
    pytest.importorskip("torch")
    if not (CORPUS / BENCH).is_dir():
        pytest.skip("PyTorch 2.6.0 corpus not fetched")
    repo = tmp_path / "repo"
    native = repo / "aten/src/ATen/native"
    native.mkdir(parents=True)
    for name in ("native_functions.yaml", "tags.yaml"):
        shutil.copy(CORPUS / "aten/src/ATen/native" / name, native / name)
    (repo / BENCH / "pt").mkdir(parents=True)
    for path in (CORPUS / BENCH).glob("*.py"):
        shutil.copy(path, repo / BENCH / path.name)
    (repo / BENCH / "pt/__init__.py").write_text("")
    (repo / BENCH / "pt/mini_configs.py").write_text(CONFIGS)
    (repo / BENCH / "pt/split_mini_test.py").write_text(SPLIT)
    (repo / BENCH / "pt/add_mini_test.py").write_text(ADD)
    (repo / "torch/nn/modules").mkdir(parents=True)
    for path in ("torch/_tensor.py", "torch/nn/modules/linear.py"):
        shutil.copy(CORPUS / path, repo / path)
    (repo / "pyproject.toml").write_text('[tool.perfq]\nsource_roots = []\npython_roots = ["torch"]\n')
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    return repo


def _edit(repo: Path, path: str, old: str, new: str) -> None:
    file = repo / path
    text = file.read_text()
    assert text.count(old) == 1, old
    file.write_text(text.replace(old, new))


def _affected(repo: Path) -> dict:
    proc = run_perfq(repo, "affected", "HEAD", "--worktree", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _selected(doc: dict) -> dict[str, str]:
    return {b["name"]: b["source"] for b in doc["benchmarks"]}


@pytest.mark.torch
@pytest.mark.corpus
def test_a_changed_python_line_selects_the_tests_that_ran_it(line_repo: Path):
    db = line_repo / ".git/perfq/index.duckdb"
    build_index(line_repo, load_config(line_repo), db, jobs=2, quiet=True)
    harness = f"{BENCH}/benchmark_pytorch.py"
    backward_line = next(n for n, row in enumerate((line_repo / harness).read_text().splitlines(), 1)
                         if row.strip() == "self.mean.backward(retain_graph=True)")
    ran_backward = {t for (t,) in db_rows(db, "SELECT DISTINCT t.test FROM py_test_lines t JOIN py_line_sets s USING"
                                              f" (line_set) WHERE s.path = '{harness}' AND s.line = {backward_line}")}
    backward_tests = {t for (t,) in db_rows(db, "SELECT test FROM bench_tests WHERE backward")}
    assert ran_backward == backward_tests and backward_tests  # the gradient tests, no forward one
    assert db_rows(db, "SELECT count(*) FROM py_line_texts WHERE path = 'torch/_tensor.py'")[0][0] > 1000

    # the harness's backward loop: the benchmark with gradient tests, not every benchmark
    _edit(line_repo, harness, "backward(retain_graph=True)", "backward(retain_graph=True, inputs=None)")
    doc = _affected(line_repo)
    assert _selected(doc) == {"add_mini_test": "executed"}
    assert {t for b in doc["benchmarks"] for t in b["tests"]} == backward_tests
    git(line_repo, "checkout", "-q", "--", ".")

    # a harness line every test runs (each test's benchmark is built there): shared infrastructure
    _edit(line_repo, f"{BENCH}/benchmark_core.py", "        op = bench_op()\n",
          "        op = bench_op()  # built\n        op.x = 1\n")
    doc = _affected(line_repo)
    assert set(_selected(doc)) == {"add_mini_test", "split_mini_test"} and doc["shared_infrastructure"]
    assert [c["set"] for c in doc["canary"]] == ["executed-by-all"]
    git(line_repo, "checkout", "-q", "--", ".")

    # a harness line no test runs (per-iteration printing): nothing
    _edit(line_repo, harness, "length = min(len(self.time_series), 50)", "length = min(len(self.time_series), 100)")
    doc = _affected(line_repo)
    assert _selected(doc) == {} and any(w.startswith(f"no traced test runs {harness}:") for w in doc["warnings"])
    git(line_repo, "checkout", "-q", "--", ".")

    # torch's Tensor.split, int branch, placed by its text in the installed torch: the split test only
    _edit(line_repo, "torch/_tensor.py", "return torch._VF.split(self, split_size, dim)",
          "return torch._VF.split(self, int(split_size), dim)")
    assert set(_selected(_affected(line_repo))) == {"split_mini_test"}
    git(line_repo, "checkout", "-q", "--", ".")

    # torch code the benchmark's init runs (its setup, outside the timed region): nothing
    _edit(line_repo, "torch/nn/modules/linear.py", "bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0",
          "bound = math.sqrt(1.0 / fan_in) if fan_in > 0 else 0")
    assert _selected(_affected(line_repo)) == {}
    git(line_repo, "checkout", "-q", "--", ".")

    # the same class's forward, in the timed region: the split test
    _edit(line_repo, "torch/nn/modules/linear.py", "return F.linear(input, self.weight, self.bias)",
          "return F.linear(input, self.weight, bias=self.bias)")
    assert _selected(_affected(line_repo)) == {"split_mini_test": "executed"}
    git(line_repo, "checkout", "-q", "--", ".")

    # lines inserted before the only body line of a decorated method (its def line differs in the
    # installed torch, and runs at import): placed by that body line
    _edit(line_repo, "torch/_tensor.py", "    def __rsub__(self, other):\n",
          "    def __rsub__(self, other):\n        if isinstance(other, int) and other == 0:\n"
          "            return self.neg()\n")
    assert _selected(_affected(line_repo)) == {"split_mini_test": "executed"}
    git(line_repo, "checkout", "-q", "--", ".")

    # a module-level name of the shared configs: the benchmarks that read it
    _edit(line_repo, f"{BENCH}/pt/mini_configs.py", "attrs=[[4, 6]]", "attrs=[[4, 8]]")
    assert set(_selected(_affected(line_repo))) == {"split_mini_test"}
