"""A C++ function a derivatives.yaml formula calls runs in its operator's backward (the generated
``AddmmBackward0::apply``, which no index holds): the operator reaches it through a ``formula``
edge, the functions it calls through the call graph; the name is resolved as the compiler resolves
it from the generated code, never to every function of that name; an in-place patch of the C++
file or a changed derivatives.yaml keeps the edges a full link makes (held-out r6-u01:
``mm_mat1_backward`` reached no operator)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from common.config import Config
from indexer.build import build_index
from indexer.derivatives import Derivative, derivative, resolve
from indexer.link import link
from indexer.native_yaml import OpFacts
from indexer.rules.traces import numbered_tests
from query.affected import _backward_runs, _via_formula
from query.reach import Reach
from schema.index_store import IndexStore, TracedHit
from schema.kinds import EdgeKind, NodeKind
from schema.writer import index_ddl
from tests.aten_fixture import commit_all, make_repo, replace_in
from tests.cpp_facts import cpp_facts
from tests.test_link_registered_lambdas import reached

MANUAL = "torch/csrc/autograd/FunctionsManual.cpp"
MANUAL_SOURCE = """
namespace torch::autograd::generated::details {
static Tensor transpose_helper(const Tensor& t) { return t.t(); }
Tensor mm_mat1_backward(const Tensor& grad, const Tensor& mat2) {
  return grad.mm(transpose_helper(mat2));
}
Tensor mm_mat2_backward(const Tensor& grad, const Tensor& mat1) { return grad; }
template <typename T>
Tensor mul_tensor_backward(const Tensor& grad, T other) { return grad; }
}
"""
# functions of the same names the generated code does not see: an ATen helper, a sum_to of another namespace
OTHER_SOURCE = """
namespace at::native {
Tensor mm_mat1_backward(const Tensor& grad) { return grad; }
Tensor sum_to(const Tensor& t) { return t; }
}
namespace at {
Tensor sum_to(const Tensor& t, IntArrayRef shape) { return t; }
}
"""
ADDMM_ENTRY = {
    "name": "addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
    "self": "maybe_multiply(at::sum_to(grad, self.sym_sizes()), beta.conj()) + mul_tensor_backward(grad, beta)",
    "mat1": "mm_mat1_backward(grad, mat2, mat1.sym_sizes(), mat1.sym_strides(), mat1.layout(), alpha)",
    "result": "mm_mat2_backward(self_t, mat1_p)",  # forward-mode AD: no backward runs it
}
OPS = [
    OpFacts(name, name, "", f"{name}(Tensor self) -> Tensor", False, None, "function", "", None)
    for name in ("addmm", "sum")
]


def test_an_entry_names_the_functions_its_backward_formulas_call():
    d = derivative(ADDMM_ENTRY)
    assert d == Derivative("addmm", ("mm_mat1_backward", "mm_mat2_backward", "mul_tensor_backward"),
                           ("at::sum_to", "maybe_multiply", "mm_mat1_backward", "mul_tensor_backward"))
    method_only = {"name": "sum(Tensor self) -> Tensor", "self": "grad.expand_symint(self.sym_sizes())"}
    assert derivative(method_only).calls == ()
    std_only = {"name": "special_ndtri(Tensor self) -> Tensor", "self": "grad * std::sqrt(2 * M_PI) * result.exp()"}
    assert derivative(std_only).calls == ()  # the standard library's


def test_a_name_is_resolved_in_the_first_scope_the_generated_code_sees_it():
    by_qualname = {"torch::autograd::generated::details::f": [1], "at::native::f": [2], "at::g": [3], "g": [4],
                   "torch::autograd::generated::h": [5], "torch::autograd::generated::details::h": [6]}
    assert resolve("f", by_qualname) == [1]
    assert resolve("at::g", by_qualname) == [3]
    assert resolve("h", by_qualname) == [5]  # the enclosing namespace before the using-directive's
    assert resolve("native::f", by_qualname) == []


def _tables():
    files = [cpp_facts(MANUAL, MANUAL_SOURCE), cpp_facts("aten/src/ATen/native/Other.cpp", OTHER_SOURCE)]
    return link(files, [], OPS, [], derivatives=[derivative(ADDMM_ENTRY)])


def test_a_function_a_formula_calls_and_what_it_calls_reach_the_operator_whose_backward_runs_them():
    tables = _tables()
    assert ("op", "addmm") in reached(tables, "details::mm_mat1_backward")
    assert ("op", "addmm") in reached(tables, "details::transpose_helper")  # a helper of the helper
    assert ("op", "addmm") in reached(tables, "at::sum_to")
    assert ("op", "addmm") in reached(tables, "details::mul_tensor_backward<T>")  # a template, called by its name
    assert ("op", "addmm") not in reached(tables, "details::mm_mat2_backward")  # only its forward-mode formula
    assert ("op", "addmm") not in reached(tables, "at::native::mm_mat1_backward")  # another namespace's
    assert ("op", "addmm") not in reached(tables, "at::native::sum_to")
    details = {d for _, _, kind, d in tables.rows["reach_edges"] if kind == "formula"}
    assert details == {f"derivatives.yaml: addmm's formula calls {name}"
                       for name in ("mm_mat1_backward", "at::sum_to", "mul_tensor_backward")}
    assert sorted(tables.rows["formula_calls"]) == [("addmm", "addmm", name) for name in (
        "at::sum_to", "maybe_multiply", "mm_mat1_backward", "mul_tensor_backward")]


FIXTURE_MANUAL = """\
namespace torch::autograd::generated::details {
Tensor fancy_backward_helper(const Tensor& grad) { return grad; }
}
"""
FIXTURE_DERIVATIVES = """\
- name: fancy(Tensor self) -> Tensor
  self: fancy_backward_helper(grad)

- name: lonely(Tensor self) -> Tensor
  self: lonely_grad(grad)
"""


def _formula_edges(db: Path, lines: bool = False) -> set[tuple]:
    """(function, its first line when ``lines``, operator, detail) of the index's formula edges."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return set(con.execute(
            "SELECT f.qualname," + (" f.start_line," if lines else "") + " n.key, e.detail FROM reach_edges e"
            " JOIN functions f ON f.id = e.dst JOIN nodes n ON n.id = e.src WHERE e.kind = 'formula'").fetchall())
    finally:
        con.close()


def _fixture(tmp_path: Path) -> tuple[Path, Path]:
    repo = make_repo(tmp_path / "repo")
    for rel, text in ((MANUAL, FIXTURE_MANUAL), ("tools/autograd/derivatives.yaml", FIXTURE_DERIVATIVES)):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    commit_all(repo)
    db = tmp_path / "index.duckdb"
    build_index(repo, Config(), db, jobs=1, quiet=True, trace=False)
    return repo, db


def _full(repo: Path, tmp_path: Path, lines: bool = True) -> set[tuple]:
    full = tmp_path / "full.duckdb"
    build_index(repo, Config(), full, jobs=1, quiet=True, full=True, trace=False)
    return _formula_edges(full, lines)


@pytest.mark.parametrize(
    ("added", "edge"),
    [  # a new function a formula names; an overload of the one it names (every id of the file is fresh)
        ("Tensor lonely_grad(const Tensor& g) { return g; }\n", ("lonely_grad", "lonely")),
        ("Tensor fancy_backward_helper(int x) { return x; }\n", ("fancy_backward_helper", "fancy")),
    ],
    ids=["new-function", "overload"],
)
def test_a_patch_adding_a_function_a_formula_names_links_it_as_a_full_link_does(tmp_path, added, edge):
    repo, db = _fixture(tmp_path)
    assert _formula_edges(db) == {("torch::autograd::generated::details::fancy_backward_helper", "fancy",
                                   "derivatives.yaml: fancy's formula calls fancy_backward_helper")}
    replace_in(repo, MANUAL, "Tensor fancy_backward_helper(", added + "Tensor fancy_backward_helper(")
    assert build_index(repo, Config(), db, jobs=1, quiet=True, trace=False).mode == "patched"
    name, op = edge
    patched = _formula_edges(db, lines=True)
    assert (f"torch::autograd::generated::details::{name}", 2, op, f"derivatives.yaml: {op}'s formula calls {name}") \
        in patched
    assert patched == _full(repo, tmp_path)


def test_a_changed_derivatives_yaml_is_linked_again(tmp_path):
    repo, db = _fixture(tmp_path)
    replace_in(repo, "tools/autograd/derivatives.yaml", "fancy_backward_helper(grad)", "grad")
    assert build_index(repo, Config(), db, jobs=1, quiet=True, trace=False).mode != "patched"
    assert _formula_edges(db) == set() == _full(repo, tmp_path, lines=False)


# (bench, test, module, class, tag, backward, device, mode, kernels_seen): add_test's addmm module has
# forward and gradient tests, matmul_test runs addmm and mm forward only
TESTS = [
    ("add_test", "addmm_M64", "addmm", "AddmmBenchmark", "short", False, "cpu", "real", True),
    ("add_test", "addmm_M64_bwdall", "addmm", "AddmmBenchmark", "short", True, "cpu", "real", True),
    ("matmul_test", "matmul_M64", "matmul", "MatMulBenchmark", "short", False, "cpu", "real", True),
]
TRACE_OPS = [("add_test", "addmm_M64", "addmm"), ("add_test", "addmm_M64_bwdall", "mm"),
             ("matmul_test", "matmul_M64", "addmm"), ("matmul_test", "matmul_M64", "mm")]


def _store() -> IndexStore:
    con = duckdb.connect()
    con.execute(index_ddl())
    con.executemany("INSERT INTO ops VALUES (?, ?, '', 'aten', '', false, NULL, 'function', '', NULL)",
                    [("addmm", "addmm"), ("mm", "mm")])
    con.executemany("INSERT INTO bench_tests VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", numbered_tests(TESTS))
    con.executemany("INSERT INTO trace_ops VALUES (?, ?, 'aten', ?, 'dense', '', false)", TRACE_OPS)
    return IndexStore(con)


def test_the_tests_running_an_operators_backward_are_the_gradient_tests_of_the_modules_running_it():
    """A gradient test's trace holds what its backward pass runs (mm), not the operator whose
    backward node runs it (addmm): its module's forward tests say which that is."""
    store = _store()
    (hit,) = store.backward_hits(["addmm"], "why")
    assert (hit.bench, hit.tests, hit.ops, hit.inferred) == ("add_test", ("addmm_M64_bwdall",), ("addmm",), "why")
    assert store.backward_hits(["mm"], "why") == []  # run inside addmm's backward, never its own


def _walk() -> Reach:
    """A walk from the changed function 1: addmm and mm through their formulas, mm also through
    a kernel function 4 the change is called by."""
    r = Reach(kind={1: NodeKind.FUNCTION, 2: NodeKind.OP, 3: NodeKind.OP, 4: NodeKind.FUNCTION},
              key={1: "1", 2: "addmm", 3: "mm", 4: "4"})
    r.parent = {2: (1, EdgeKind.FORMULA, "f"), 3: (1, EdgeKind.FORMULA, "f"), 4: (1, EdgeKind.CALL, "")}
    r.into_op = [(1, 2, EdgeKind.FORMULA, "f"), (1, 3, EdgeKind.FORMULA, "f"), (4, 3, EdgeKind.KERNEL, "CPU")]
    return r


def test_an_operator_reached_through_its_formula_only_runs_the_change_in_its_backward_only():
    assert _via_formula(_walk()) == {"addmm"}


def test_an_operator_whose_backward_runs_the_change_selects_its_gradient_tests_not_its_forward_ones():
    forward = [TracedHit(("addmm",), bench, (test,), module, "cpu", "real", True, "")
               for bench, test, module, *_ in TESTS if bench == "matmul_test" or test == "addmm_M64"]
    hits, warnings = _backward_runs(_store(), _walk(), forward)
    assert [(h.bench, h.tests) for h in hits] == [("add_test", ("addmm_M64_bwdall",))]
    assert warnings == []
