"""A change to a module of a benchmark tree that is not itself a benchmark (shared configs such as
PyTorch's ``pt/configs.py``, the harness) selects the benchmark files that import it, directly or
through other modules; it used to be taken for a benchmark named after the module (``configs``)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from indexer.bench_imports import imported_names, importers, module_names
from tests.aten_fixture import FILES, commit_all, git, write_tree
from tests.conftest import run_perfq

BENCH = "benchmarks/operator_benchmark"


def test_module_names_are_the_names_from_every_folder_above():
    assert module_names("b/ob/pt/configs.py") == {"configs", "pt.configs", "ob.pt.configs", "b.ob.pt.configs"}
    assert module_names("b/ob/pt/__init__.py") == {"pt", "ob.pt", "b.ob.pt"}


def test_imported_names_resolve_from_and_relative_imports():
    source = b"import torch\nimport operator_benchmark as op_bench\nfrom pt import configs\nfrom . import shapes\n"
    source += b"from ..common import util\n"
    names = imported_names("b/ob/pt/x_test.py", source)
    assert {"torch", "operator_benchmark", "pt", "pt.configs", "b.ob.pt.shapes", "b.ob.common.util"} <= names
    assert imported_names("b/broken.py", b"def (:\n") == set()


def test_importers_follow_modules_that_import_the_changed_one():
    sources = {
        "ob/core.py": b"import time\n",
        "ob/operator_benchmark.py": b"from core import *\n",
        "ob/pt/configs.py": b"X = 1\n",
        "ob/pt/a_test.py": b"import operator_benchmark\nfrom pt import configs\n",
        "ob/pt/b_test.py": b"import operator_benchmark\n",
    }
    found = importers(["ob/core.py", "ob/pt/configs.py", "ob/pt/lonely.py"], sources)
    assert found["ob/core.py"] == {"ob/operator_benchmark.py", "ob/pt/a_test.py", "ob/pt/b_test.py"}
    assert found["ob/pt/configs.py"] == {"ob/pt/a_test.py"}
    assert found["ob/pt/lonely.py"] == set()


TREE = {  # modules of the benchmark root (pt/, the default) that are not benchmarks
    f"{BENCH}/pt/__init__.py": "",
    f"{BENCH}/pt/configs.py": "from pt.shapes import SIZES\n\nshort_configs = [8]\n",
    f"{BENCH}/pt/shapes.py": "SIZES = (8, 16)\n",
    f"{BENCH}/pt/helpers_nobody_uses.py": "VALUE = 1\n",
    # the harness, beside the benchmark root: every benchmark imports it through operator_benchmark
    f"{BENCH}/operator_benchmark.py": "from benchmark_core import *\n",
    f"{BENCH}/benchmark_core.py": "def run(n):\n    return n\n",
}


def _repo(root: Path) -> Path:
    files = dict(FILES)
    softmax = f"{BENCH}/pt/softmax_op_test.py"
    files[softmax] = "from pt import configs\n" + textwrap.dedent(files[softmax])
    write_tree(root, {**files, **TREE})
    git(root, "init", "-q", "-b", "main")
    commit_all(root, "base")
    return root


def _selected(root: Path, ref: str) -> dict:
    proc = run_perfq(root, "affected", ref, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_changed_benchmark_module_selects_the_benchmarks_that_import_it(tmp_path: Path):
    root = _repo(tmp_path / "repo")
    proc = run_perfq(root, "index", "--no-trace", "-q")
    assert proc.returncode == 0, proc.stderr
    base = git(root, "rev-parse", "HEAD").strip()
    (root / f"{BENCH}/pt/configs.py").write_text("from pt.shapes import SIZES\n\nshort_configs = [16]\n")
    (root / f"{BENCH}/pt/helpers_nobody_uses.py").write_text("VALUE = 2\n")
    (root / f"{BENCH}/pt/brand_new_test.py").write_text("import operator_benchmark as op_bench\n")
    commit_all(root, "configs, an unused helper, a new benchmark")
    doc = _selected(root, base)
    picked = {b["name"]: b for b in doc["benchmarks"]}
    assert set(picked) == {"softmax_op_test", "brand_new_test"}  # not "configs", not the other tests
    (reason,) = picked["softmax_op_test"]["reasons"]
    why = f"benchmark file {BENCH}/pt/softmax_op_test.py imports {BENCH}/pt/configs.py, which changed"
    assert reason["chain"] == [why]
    table = run_perfq(root, "affected", base, "--format", "table", env={"COLUMNS": "200"})
    assert table.returncode == 0, table.stderr
    row = next(line for line in table.stdout.splitlines() if "softmax_op_test" in line)
    assert "benchmark file softmax_op_test.py imports configs.py, which changed" in row  # its "why"
    assert picked["brand_new_test"]["source"] == "changed"
    assert f"{BENCH}/pt/helpers_nobody_uses.py (no benchmark imports it)" in doc["ignored_files"]

    (root / f"{BENCH}/pt/shapes.py").write_text("SIZES = (8, 32)\n")
    commit_all(root, "shapes, which configs imports")
    doc = _selected(root, "HEAD~1")
    assert {b["name"] for b in doc["benchmarks"]} == {"softmax_op_test"}

    for rel in (f"{BENCH}/pt/shapes.py", f"{BENCH}/pt/fancy_test.py"):  # comments only: nothing runs differently
        (root / rel).write_text((root / rel).read_text() + "# a note\n")
    commit_all(root, "comments")
    doc = _selected(root, "HEAD~1")
    assert doc["benchmarks"] == []
    assert {c["file"] for c in doc["no_op_changes"]} == {f"{BENCH}/pt/shapes.py", f"{BENCH}/pt/fancy_test.py"}

    (root / f"{BENCH}/benchmark_core.py").write_text("def run(n):\n    return n + 0\n")
    commit_all(root, "the harness")
    doc = _selected(root, "HEAD~1")
    assert {b["name"] for b in doc["benchmarks"]} == {"softmax_op_test", "fancy_test", "qthing_test"}
