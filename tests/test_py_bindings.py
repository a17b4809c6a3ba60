"""C++ functions bound to Python names (CPython ``PyMethodDef`` tables, pybind11 ``def``s) are called by
the Python code that calls the name in an extension module (``torch._C._has_torch_function_unary``,
or a name imported or aliased from it): the link adds those edges (``python_binding``), a patch keeps
them as a full link makes them, and ``perfq affected`` answers a changed bound function with the
traced tests that ran its calling lines (issue 40, held-out r6-s02: ``check_has_torch_function``
answered "0 operators reached, no benchmark")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from common.config import Config, load_config
from indexer.build import build_index
from indexer.cpp import python_bindings
from indexer.extract import file_facts
from indexer.link import link
from indexer.source_text import LineIndex, strip_c_comments
from tests.aten_fixture import NATIVE_FUNCTIONS
from tests.conftest import CORPUS, git, run_perfq
from tests.test_py_lines import BENCH, CONFIGS  # the same two-benchmark tree

HEADER = """\
#pragma once
PyObject* THPModule_has_torch_function_unary(PyObject*, PyObject* obj);
"""

IMPL = """\
#include "torch/csrc/utils/disable_torch_function.h"
namespace torch {
bool check_has_torch_function(PyObject* obj) {
  return obj != nullptr && !is_basic(obj);
}
}  // namespace torch
PyObject* THPModule_has_torch_function_unary(PyObject*, PyObject* obj) {
  if (torch::check_has_torch_function(obj)) {
    Py_RETURN_TRUE;
  }
  Py_RETURN_FALSE;
}
"""

MODULE = """\
#include "torch/csrc/utils/disable_torch_function.h"
static PyObject* THPModule_unused(PyObject* self, PyObject* noargs) {
  return nullptr;
}
static std::initializer_list<PyMethodDef> TorchMethods = {
    {"_unused", THPModule_unused, METH_NOARGS, nullptr},
    {"_has_torch_function_unary",
     (PyCFunction)(void (*)())THPModule_has_torch_function_unary,
     METH_O,
     nullptr},
    {"_add_docstr", THPModule_addDocStr, METH_VARARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};
static PyObject* THPModule_addDocStr(PyObject* self, PyObject* args) {
  return args;
}
"""

# another file's function of the same name, internal: the table cannot name it; two classes'
# static ``get`` bound to the same name: a call of ``get`` could be either's
OTHER = """\
static PyObject* THPModule_unused(PyObject* self, PyObject* noargs) {
  return Py_None;
}
A* A::get() { return nullptr; }
B* B::get() { return nullptr; }
void LoopNest::simplify() {}
void init(py::module& m) {
  py::class_<A>(m, "A").def_static("get", &A::get);
  py::class_<B>(m, "B").def_static("get", &B::get);
  py::class_<LoopNest>(m, "LoopNest").def("simplify", &LoopNest::simplify);
}
"""

OVERRIDES = """\
from torch._C import _add_docstr, _has_torch_function_unary

has_torch_function_unary = _add_docstr(_has_torch_function_unary, "True if the argument overrides.")
"""

FUNCTIONAL = """\
import torch
from torch.overrides import has_torch_function_unary


def relu(input):
    if has_torch_function_unary(input):
        return input
    return torch._C._unused()


def _unused(x):
    return x


def local(x):
    return _unused(x)  # a Python function of that name: not the binding


def typed():
    return torch._C.A.get()


V = make_virtualized()


def sizes():
    return V.graph.sizevars.simplify()  # an object's attribute, not an extension module's
"""


def test_method_table_entries_and_pybind_defs_name_the_functions_they_bind():
    code = strip_c_comments(MODULE + 'm.def("_jit_run", &torch::jit::run, py::arg("x"));\n'
                            'm.def("lambda", [](int x) { return x; });\n')
    assert python_bindings(code, LineIndex(code)) == [
        (6, "_unused", "THPModule_unused"),
        (7, "_has_torch_function_unary", "THPModule_has_torch_function_unary"),
        (11, "_add_docstr", "THPModule_addDocStr"),
        (16, "_jit_run", "torch::jit::run"),
    ]


def _facts():
    return [
        file_facts("cpp", "torch/csrc/utils/disable_torch_function.h", HEADER.encode()),
        file_facts("cpp", "torch/csrc/utils/disable_torch_function.cpp", IMPL.encode()),
        file_facts("cpp", "torch/csrc/Module.cpp", MODULE.encode()),
        file_facts("cpp", "torch/csrc/Other.cpp", OTHER.encode()),
        file_facts("python", "torch/__init__.py", b"from torch._C import *\n"),
        file_facts("python", "torch/overrides.py", OVERRIDES.encode()),
        file_facts("python", "torch/nn/functional.py", FUNCTIONAL.encode()),
    ]


def test_python_callers_of_a_bound_name_reach_the_function_the_table_binds():
    tables = link(_facts(), [], [], [])
    names = {row[0]: row[2] for row in tables.rows["functions"]}
    bound = {(names[src], names[dst], detail) for dst, src, kind, detail in tables.rows["reach_edges"]
             if kind == "python_binding"}
    assert bound == {
        # the module-level alias re-exporting the name (its callers' lines run it)
        ("torch.overrides.has_torch_function_unary", "THPModule_has_torch_function_unary",
         "torch._C._has_torch_function_unary line 3"),
        # called by its module: the table's own static function, not Other.cpp's
        ("torch.nn.functional.relu", "THPModule_unused", "torch._C._unused line 8"),
        # not the alias's call of _add_docstr (at import), nor torch._C.A.get (A's or B's get?),
        # nor V.graph.sizevars.simplify (V is a value of the module)
    }
    assert len(tables.rows["py_bindings"]) == 6


def _bindings(db: Path) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(
            "SELECT fs.qualname, fd.qualname, e.detail FROM reach_edges e JOIN functions fs ON fs.id = e.src"
            " JOIN functions fd ON fd.id = e.dst WHERE e.kind = 'python_binding' ORDER BY ALL"
        ).fetchall() + con.execute(
            "SELECT path, line, name, symbol FROM py_bindings JOIN files ON files.id = file_id ORDER BY ALL"
        ).fetchall()
    finally:
        con.close()


def _tree(repo: Path) -> Path:
    for path, text in {
        "torch/csrc/utils/disable_torch_function.h": HEADER,
        "torch/csrc/utils/disable_torch_function.cpp": IMPL,
        "torch/csrc/Module.cpp": MODULE,
        "torch/csrc/Other.cpp": OTHER,
        "torch/__init__.py": "from torch._C import *\n",
        "torch/overrides.py": OVERRIDES,
        "torch/nn/__init__.py": "",
        "torch/nn/functional.py": FUNCTIONAL,
        "aten/src/ATen/native/native_functions.yaml": NATIVE_FUNCTIONS,
    }.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    return repo


def _replace(repo: Path, path: str, old: str, new: str) -> None:
    text = (repo / path).read_text()
    assert text.count(old) == 1, old
    (repo / path).write_text(text.replace(old, new))


NEW_ENTRY = '    {"_unused2", THPModule_unused, METH_NOARGS, nullptr},\n    {nullptr, nullptr'
OWN_DEFINITION = (
    "PyObject* THPModule_has_torch_function_unary(PyObject*, PyObject* o) {\n  return o;\n}\n"
    "static PyObject* THPModule_u"
)


@pytest.mark.parametrize(
    ("path", "old", "new", "mode"),
    [
        # the bound function's callee changes, the table's entries move down a line: patched in place
        ("torch/csrc/utils/disable_torch_function.cpp", "!is_basic(obj)", "!is_basic(obj) && enabled()", "patched"),
        ("torch/csrc/Module.cpp", "static std::initializer_list", "// methods\nstatic std::initializer_list",
         "patched"),
        # a new entry of the table; a new function a binding names: both need a full link
        ("torch/csrc/Module.cpp", "    {nullptr, nullptr", NEW_ENTRY, "linked"),
        ("torch/csrc/Module.cpp", "static PyObject* THPModule_u", OWN_DEFINITION, "linked"),
    ],
)
def test_a_patch_keeps_the_bindings_as_a_full_link_makes_them(tmp_path, path, old, new, mode):
    repo, db = _tree(tmp_path / "repo"), tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True, trace=False)
    before = _bindings(db)
    assert ("torch.overrides.has_torch_function_unary", "THPModule_has_torch_function_unary",
            "torch._C._has_torch_function_unary line 3") in before
    _replace(repo, path, old, new)
    assert build_index(repo, Config(), db, jobs=1, quiet=True, trace=False).mode == mode
    full = tmp_path / "full.duckdb"
    build_index(repo, Config(), full, jobs=1, quiet=True, full=True, trace=False)
    assert _bindings(db) == _bindings(full)


# --------------------------------------------------------------------------- end to end (torch)

SPLIT = """\
import operator_benchmark as op_bench
import torch
from pt import mini_configs


class SplitBenchmark(op_bench.TorchBenchmarkBase):
    def init(self, M, N, device):
        self.inputs = {"input": torch.rand(M, N, device=device), "size": 2}
        self.set_module_name("split")

    def forward(self, input, size: int):
        return input.split(size)


op_bench.generate_pt_test(mini_configs.split_configs, SplitBenchmark)
"""

ADD = """\
import operator_benchmark as op_bench
import torch
from pt import mini_configs


class AddBenchmark(op_bench.TorchBenchmarkBase):
    def init(self, M, N, device):
        self.inputs = {"a": torch.rand(M, N, device=device), "b": torch.rand(M, N, device=device)}
        self.set_module_name("add")

    def forward(self, a, b):
        return torch.add(a, b)


op_bench.generate_pt_test(mini_configs.add_configs, AddBenchmark)
"""


@pytest.fixture
def bound_repo(tmp_path: Path) -> Path:
    """The bindings above, the corpus's torch/_tensor.py (2.6.0: ``Tensor.split`` calls
    ``has_torch_function_unary(self)``), its operator_benchmark harness and two small benchmarks:
    a Tensor.split (runs that line) and a torch.add (does not)."""
    pytest.importorskip("torch")
    if not (CORPUS / BENCH).is_dir():
        pytest.skip("PyTorch 2.6.0 corpus not fetched")
    repo = _tree(tmp_path / "repo")
    native = repo / "aten/src/ATen/native"
    for name in ("native_functions.yaml", "tags.yaml"):
        shutil.copy(CORPUS / "aten/src/ATen/native" / name, native / name)
    (repo / BENCH / "pt").mkdir(parents=True)
    for path in (CORPUS / BENCH).glob("*.py"):
        shutil.copy(path, repo / BENCH / path.name)
    (repo / BENCH / "pt/__init__.py").write_text("")
    (repo / BENCH / "pt/mini_configs.py").write_text(CONFIGS)
    (repo / BENCH / "pt/split_mini_test.py").write_text(SPLIT)
    (repo / BENCH / "pt/add_mini_test.py").write_text(ADD)
    shutil.copy(CORPUS / "torch/_tensor.py", repo / "torch/_tensor.py")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    return repo


@pytest.mark.torch
@pytest.mark.corpus
def test_a_changed_bound_function_selects_the_tests_that_ran_its_calling_lines(bound_repo: Path):
    build_index(bound_repo, load_config(bound_repo), bound_repo / ".git/perfq/index.duckdb", jobs=2, quiet=True)
    _replace(bound_repo, "torch/csrc/utils/disable_torch_function.cpp", "!is_basic(obj)", "!is_basic(obj) && on()")
    proc = run_perfq(bound_repo, "affected", "HEAD", "--worktree", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    # Tensor.split's `if has_torch_function_unary(self):` ran in the split test, in no add test
    assert {b["name"]: b["source"] for b in doc["benchmarks"]} == {"split_mini_test": "executed"}
    assert not doc["shared_infrastructure"]
    assert doc["unreached_functions"] == []  # answered through its binding's calling lines
