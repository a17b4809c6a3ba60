"""Overloads told apart by argument count: the index records how many arguments each C++ call site
passes and how many each definition accepts (indexer/cpp_arity.py), and a call does not reach a
definition that cannot take its arguments. torch-xpu-ops r5-n03 deletes ``at::xpu::pair``'s
converting constructors (one parameter each); every reduction calls the kept two-argument
constructor, so the deletion changes no code that runs. Counts the text does not make certain
(a pack expansion, a macro's body, ``f(std::pair<A, B>(x))``, a prototype that may add defaults
elsewhere) are unknown, and an unknown count keeps every candidate."""

from __future__ import annotations

import json
import textwrap

import pytest

from indexer.cpp_arity import Arity, accepts, argument_count, operand_classes, parameter_arity
from indexer.extract import file_facts
from indexer.facts import FileFacts
from indexer.link import link
from indexer.source_text import LineIndex
from query.affected import _called_as
from query.changes import ChangedFunction
from tests.aten_fixture import commit_all, git, make_repo, replace_in
from tests.conftest import run_perfq


def _args(call: str) -> int | None:
    return argument_count(call, call.index("("))


def test_a_call_s_argument_count_where_the_text_makes_it_certain():
    assert [_args(c) for c in ("f()", "f(a)", "f(a, g(b, c))", "f([&](int a, int b) { return a; }, c)")] == [0, 1, 2, 2]
    assert _args("f(std::vector<int>(n), x)") == 2  # both readings of '<' agree
    assert _args("f(a < b)") == 1 and _args("f(x << 2, y)") == 2 and _args("f(a->b, c >= d)") == 2
    assert _args("f(',', b)") == 2 and _args("f(1'000, b)") == 2  # a character literal, a digit separator


@pytest.mark.parametrize("call", [
    "f(std::pair<A, B>(x))",  # a template's commas or two comparisons: the readings differ
    "f(i < n, j > m)",
    "f(args...)",  # a pack expansion
    "f(std::forward<Args>(args)...)",
    "f(__VA_ARGS__)",
    "f(a,\n#ifdef X\n b,\n#endif\n c)",  # a directive inside
])
def test_an_uncertain_argument_count_is_unknown(call):
    assert _args(call) is None


@pytest.mark.parametrize(("params", "in_class", "arity"), [
    ("()", True, Arity(0, 0)),
    ("(void)", True, Arity(0, 0)),
    ("(const T1& x, const T2& y)", True, Arity(2, 2)),
    ("(const T1& x, const T2& y)", False, Arity(0, 2)),  # a prototype elsewhere may give defaults
    ("(const pair<U1, U2>& p)", True, Arity(1, 1)),
    ("(int a, int b = 0, std::enable_if_t<N == 1, int> = 0)", True, Arity(1, 3)),
    ("(Args&&... args)", True, Arity(0, None)),
    ("(const char* fmt, ...)", True, Arity(1, None)),
    ("(std::function<void(A...)> g)", True, Arity(1, 1)),  # a pack of another template: not this one's
    ("(TENSOR_PARAMS)", True, Arity(0, None)),  # a macro may stand for several parameters
])
def test_a_definition_s_argument_counts(params, in_class, arity):
    assert parameter_arity(params, 0, in_class) == arity


def test_an_unknown_count_is_accepted():
    assert accepts(0, 1, None) and accepts(0, None, 7) and accepts(1, 3, 2)
    assert not accepts(0, 1, 2) and not accepts(2, 2, 1)


PAIR = """
namespace at::xpu {
template <typename T1, typename T2>
struct pair {
  T1 first;
  T2 second;
  pair(void) : first(), second() {}
  inline pair(const T1& x, const T2& y) : first(x), second(y) {}
  template <typename U1, typename U2>
  inline pair(const pair<U1, U2>& p) : first(p.first), second(p.second) {}
};
template <typename T1, typename T2>
inline pair<T1, T2> make_pair(T1 x, T2 y) {
  return pair<T1, T2>(x, y);
}
}
"""

REDUCE = """
namespace at::xpu {
void reduce_max(float a, int i) {
  auto p = at::xpu::pair<float, int>(a, i);
  pair<float, int> q(a, i);
  use(p, q);
}
void convert(std::pair<float, int> s) {
  auto p = at::xpu::pair<float, int>(std::pair<float, int>(s.first, s.second));
}
}
"""


def _facts(path: str, source: str) -> FileFacts:
    out = file_facts("cpp", path, textwrap.dedent(source).lstrip("\n").encode())
    assert isinstance(out, FileFacts) and out.status == "ok"
    return out


def test_the_index_records_counts_and_a_call_reaches_only_the_overloads_that_take_it():
    pair, reduce = _facts("src/comm/XPUPair.h", PAIR), _facts("src/ATen/native/xpu/sycl/Reduce.cpp", REDUCE)
    arity = {(f.start_line, f.name): (f.least_args, f.most_args) for f in pair.functions}
    assert arity == {(6, "pair"): (0, 0), (7, "pair"): (2, 2), (8, "pair"): (1, 1), (11, "make_pair"): (0, 2)}
    counts = {(c.line, c.qualifier): c.n_args for c in reduce.calls if c.callee_name == "pair"}
    # line 4: ``T x(a, b)`` constructs with 2; line 8: a template's commas make the outer count unknown
    assert counts == {(3, "at::xpu"): 2, (4, ""): 2, (8, "at::xpu"): None, (8, "std"): 2}

    tables = link([pair, reduce], [], [], [], {}, [])
    functions = {row[0]: row for row in tables.rows["functions"]}
    columns = [(row[3], row[5], row[9], row[10]) for row in functions.values()]
    assert ("pair", 8, 1, 1) in columns  # the functions table keeps each definition's counts
    calls = {(row[1], row[2], row[4]): row[5] for row in tables.rows["calls"]}
    assert calls[("pair", "at::xpu", 3)] == 2 and calls[("pair", "at::xpu", 8)] is None
    edges = {(functions[a][3], functions[b][5]) for a, b, _, _ in tables.rows["call_edges"]}
    assert ("reduce_max", 7) in edges  # the two-argument constructor
    assert ("reduce_max", 8) not in edges and ("reduce_max", 6) not in edges  # one and no parameters
    assert {("convert", 6), ("convert", 7), ("convert", 8)} <= edges  # a count not certain: any of them
    assert ("make_pair", 7) in edges and ("make_pair", 8) not in edges


HELPER = "aten/src/ATen/native/LaunchPair.h"
KERNEL = "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp"
CONVERTING = "  template <typename U>\n  inline Pair(const Pair<U>& p) : first(p.first) {}\n"


def _header(*members: str) -> str:
    return ("#pragma once\nnamespace at::native {\ntemplate <typename T>\nstruct Pair {\n  T first;\n"
            "  inline Pair(const T& x, int y) : first(x + y) {}\n" + "".join(members) + "};\n}\n")


@pytest.mark.parametrize("indexed", ["base", "head"])
def test_a_deleted_overload_no_call_can_take_is_a_no_op(tmp_path, indexed):
    repo = make_repo(tmp_path / "repo")
    (repo / HELPER).write_text(_header(CONVERTING))
    include = f"#include <{HELPER[len('aten/src/'):]}>\n#include <ATen/native/SoftmaxOp.h>\n"
    replace_in(repo, KERNEL, "#include <ATen/native/SoftmaxOp.h>\n", include)
    replace_in(repo, KERNEL, "for (int i = 0; i < 4; i++) {", "for (int i = 0; i < Pair<int>(4, 0).first; i++) {")
    base = commit_all(repo, "a pair with a converting constructor nothing calls")
    (repo / HELPER).write_text(_header())
    head = commit_all(repo, "drop the converting constructor")
    if indexed == "base":  # the index holds the deleted constructor (linked to no call); at the head it is gone
        git(repo, "checkout", "-q", base)
    assert run_perfq(repo, "index", "-q", "--no-trace").returncode == 0
    proc = run_perfq(repo, "affected", f"{base}..{head}", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["benchmarks"] == [] and doc["changed_functions"] == [] and doc["unmapped_changes"] == []
    assert [n["function"] for n in doc["no_op_changes"]] == ["at::native::Pair::Pair<U>"]
    assert not any("still called" in w for w in doc["warnings"])


OPERATOR = """
template <typename T1, typename T2>
inline bool operator!=(const pair<T1, T2>& x, const pair<T1, T2>& y) {
  return !(x == y);
}
"""


def test_a_free_operator_is_reached_where_the_values_it_takes_are_made():
    """An expression ``a != b`` is no call site: a free operator overload the index lacks is reached
    through the callers of its first operand's class (the functions that make such values), as a
    functor's operator() is through its class's; not through its namespace's name (``xpu``)."""
    code = textwrap.dedent(OPERATOR).lstrip("\n")
    [f] = _facts("src/comm/XPUPair.h", OPERATOR).functions
    assert operand_classes(code, f, LineIndex(code)) == ("pair",)
    cf = ChangedFunction("src/comm/XPUPair.h", f.qualname, f.name, [1, 2, 3, 4], "base", "deleted",
                         operands=("pair",))
    assert _called_as(cf, "xpu") == "pair"
    functor = ChangedFunction("a.h", "ns::Functor::operator()", "operator()", [3], "base", "deleted", member=True)
    assert _called_as(functor, "Functor") == "Functor"
