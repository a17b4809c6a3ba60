"""Several native_functions yamls: one file given by several spellings is read once, and yamls that
define the same operators are merged (a conflicting kernel is a warning), never a duplicate-key crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.config import Config
from indexer.build import build_index
from indexer.native_yaml import OpFacts, merge_ops
from tests.aten_fixture import NATIVE_FUNCTIONS, make_repo, perfq
from tests.conftest import db_rows

YAML = "aten/src/ATen/native/native_functions.yaml"
OVERLAY = """\
- func: lonely(Tensor self) -> Tensor
  variants: function
  dispatch:
    CPU: lonely_kernel_v2
    XPU: lonely_xpu

- func: softmax_op.out(Tensor self, int dim, *, Tensor(a!) out) -> Tensor(a!)
  structured: True
  dispatch:
    XPU: softmax_op_xpu_out

- func: only_here(Tensor self) -> Tensor
  dispatch:
    XPU: only_here_xpu
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def test_one_yaml_by_several_spellings_is_read_once(repo: Path, tmp_path: Path):
    (repo / "nf_link.yaml").symlink_to(repo / YAML)
    spellings = (YAML, f"./{YAML}", str(repo / YAML), "aten/src/../src/ATen/native/native_functions.yaml",
                 "nf_link.yaml")
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(native_functions=spellings), db, jobs=1, quiet=True)
    single = tmp_path / "single.duckdb"
    build_index(repo, Config(), single, jobs=1, quiet=True)
    query = "SELECT name, schema FROM ops ORDER BY name"
    assert db_rows(db, query) == db_rows(single, query)
    kernels = "SELECT op, dispatch_key, kernel_name FROM kernels ORDER BY ALL"
    assert db_rows(db, kernels) == db_rows(single, kernels)
    assert db_rows(db, "SELECT message FROM warnings WHERE phase = 'yaml'") == []


def test_overlapping_yamls_merge_with_a_warning_per_conflict(repo: Path, tmp_path: Path):
    (repo / "backend.yaml").write_text(OVERLAY)
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(native_functions=(YAML, "backend.yaml")), db, jobs=1, quiet=True)
    kernels = set(db_rows(db, "SELECT op, dispatch_key, kernel_name FROM kernels"))
    assert {("lonely", "CPU", "lonely_kernel_v2"), ("lonely", "CUDA", "lonely_kernel"), ("lonely", "XPU", "lonely_xpu"),
            ("softmax_op.out", "CPU", "softmax_op_cpu_out"), ("softmax_op.out", "XPU", "softmax_op_xpu_out"),
            ("only_here", "XPU", "only_here_xpu")} <= kernels
    assert ("lonely", "CPU", "lonely_kernel") not in kernels
    assert len({op for op, key, _ in kernels if (op, key) == ("lonely", "CPU")}) == 1
    warnings = [m for (m,) in db_rows(db, "SELECT message FROM warnings WHERE phase = 'yaml'")]
    assert warnings == ["backend.yaml: lonely CPU kernel lonely_kernel_v2 replaces lonely_kernel".replace(
        "backend.yaml", str((repo / "backend.yaml").resolve()))]
    names = [n for (n,) in db_rows(db, "SELECT name FROM ops")]
    assert len(names) == len(set(names))


def test_the_cli_indexes_two_yamls_that_define_the_same_ops(repo: Path):
    (repo / "copy.yaml").write_text(NATIVE_FUNCTIONS)  # the same ops in another file
    proc = perfq(repo, "index", "-q", "--no-trace", "--native-functions", YAML, "--native-functions", "copy.yaml")
    assert proc.returncode == 0, proc.stderr
    ops = db_rows(repo / ".git/perfq/index.duckdb", "SELECT name FROM ops WHERE namespace = 'aten'")
    assert len(ops) == len(set(ops)) == NATIVE_FUNCTIONS.count("- func:")


def _op(name: str, schema: str, kernels: list[tuple[str, str]]) -> OpFacts:
    base, _, overload = name.partition(".")
    return OpFacts(name, base, overload, schema, False, None, "function", "", None, kernels)


def test_merge_ops_rules():
    first = [_op("a", "a(Tensor x) -> Tensor", [("CPU", "a_cpu"), ("CompositeImplicitAutograd", "a")])]
    second = [
        _op("a", "a(Tensor x, int y) -> Tensor", [("CPU", "a_cpu2"), ("CompositeImplicitAutograd", "a_other")]),
        _op("a", "a(Tensor x) -> Tensor", [("XPU", "ignored")]),
        _op("b", "b(Tensor x) -> Tensor", [("XPU", "b_xpu")]),
    ]
    ops, warnings = merge_ops([("up.yaml", first), ("mine.yaml", second)])
    merged = {o.name: o for o in ops}
    assert dict(merged["a"].kernels) == {"CPU": "a_cpu2", "CompositeImplicitAutograd": "a"}
    assert merged["a"].schema == "a(Tensor x) -> Tensor"
    assert set(merged) == {"a", "b"}
    assert warnings == [
        "mine.yaml: a has another schema than before (a(Tensor x, int y) -> Tensor); merged by name",
        "mine.yaml: a CPU kernel a_cpu2 replaces a_cpu",
        "mine.yaml: a is defined twice; the first entry is used",
    ]
