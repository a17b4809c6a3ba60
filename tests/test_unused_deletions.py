"""A deleted function nothing calls changes no executed code: its deletion is a no-op with a
reason, like a comment edit (torch-xpu-ops r5-n03: unused ``xpu::pair`` overloads dropped from a
header every reduction includes selected 20 scripts through the header's includers). A deleted
overload of a name that is still called stays a change: a call may now pick another overload."""

from __future__ import annotations

import json

import pytest

from query.unused_deletions import SYNTHESIZED, UNCALLED, may_name, synthesized_not_equal
from schema.index_store import CallSite
from tests.aten_fixture import commit_all, git, make_repo, replace_in
from tests.conftest import run_perfq

HELPER = "aten/src/ATen/native/LaunchUtils.h"
KERNEL = "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp"
USED = "inline int launch(int n) { return n; }\n"
OVERLOAD = "template <typename T>\ninline T launch(T n, int group) { return n / group; }\n"
UNUSED = "inline int unused_pair(int a, int b) { return a + b; }\n"


def _header(*functions: str) -> str:
    return "#pragma once\nnamespace at::native {\n" + "".join(functions) + "}\n"


def _affected(repo, rev_range: str) -> dict:
    proc = run_perfq(repo, "affected", rev_range, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _repo(tmp_path) -> tuple[object, str]:
    """The softmax kernel includes the header and calls ``launch(int)``; nothing calls the rest."""
    repo = make_repo(tmp_path / "repo")
    (repo / HELPER).write_text(_header(USED, OVERLOAD, UNUSED))
    include = f"#include <{HELPER[len('aten/src/'):]}>\n#include <ATen/native/SoftmaxOp.h>\n"
    replace_in(repo, KERNEL, "#include <ATen/native/SoftmaxOp.h>\n", include)
    replace_in(repo, KERNEL, "for (int i = 0; i < 4; i++) {", "for (int i = 0; i < launch(4); i++) {")
    return repo, commit_all(repo, "a launch helper and two functions nothing calls")


@pytest.mark.parametrize("indexed", ["base", "head"])
def test_a_deleted_function_nothing_calls_is_a_no_op(tmp_path, indexed):
    repo, base = _repo(tmp_path)
    (repo / HELPER).write_text(_header(USED, OVERLOAD))
    head = commit_all(repo, "drop unused_pair")
    if indexed == "base":  # the index holds the function (without callers); at the head it is gone
        git(repo, "checkout", "-q", base)
    assert run_perfq(repo, "index", "-q", "--no-trace").returncode == 0
    doc = _affected(repo, f"{base}..{head}")
    assert doc["benchmarks"] == [] and doc["changed_functions"] == [] and doc["unmapped_changes"] == []
    [no_op] = doc["no_op_changes"]
    assert no_op["function"] == "at::native::unused_pair" and no_op["why"] == UNCALLED


def test_a_deleted_overload_of_a_called_name_stays_a_change(tmp_path):
    repo, base = _repo(tmp_path)
    (repo / HELPER).write_text(_header(USED, UNUSED))
    head = commit_all(repo, "drop the launch(int, int) overload")
    assert run_perfq(repo, "index", "-q", "--no-trace").returncode == 0
    doc = _affected(repo, f"{base}..{head}")
    assert doc["no_op_changes"] == []
    assert "softmax_op_test" in {b["name"] for b in doc["benchmarks"]}
    assert any("its name launch is still called" in w and "another overload" in w for w in doc["warnings"])


def test_a_call_under_another_namespace_does_not_name_it():
    def site(qualifier: str) -> CallSite:
        return CallSite(1, qualifier, "a.cpp")

    get = "at::xpu::get<N, T1, T2>"
    assert not may_name(site("std"), get, "get", member=False)
    assert not may_name(site("at::xpu::detail::IndexToOffset"), get, "get", member=False)
    assert not may_name(site("."), get, "get", member=False)  # a free function: no member call calls it
    assert may_name(site(""), get, "get", member=False)  # argument-dependent lookup
    assert may_name(site("xpu"), get, "get", member=False)
    assert may_name(site("at::xpu"), "at::xpu::pair<T1, T2>::pair", "pair", member=True)  # a constructor, by its class
    assert may_name(site("."), "at::xpu::Config::size", "size", member=True)


LOCAL = "inline int pick(int a, int b) {\n  return a < b ? a : b;\n}\n"
NAMESPACE = "namespace at::native {\n"


@pytest.mark.parametrize("head", ["inline", "static"])
def test_a_deleted_file_local_helper_is_not_called_by_another_file(tmp_path, head):
    """torch-xpu-ops r6-k02: a source file's own ``inline int min(int, int)``, deleted with its
    callers rewritten, is called by no other translation unit: other files' unqualified ``min``
    calls (their own helpers, std's) and a yaml kernel of the name (``max``: upstream's) do not
    make it a change of every caller of the name."""
    local = LOCAL.replace("inline", head)
    repo = make_repo(tmp_path / "repo")
    with (repo / "aten/src/ATen/native/native_functions.yaml").open("a") as yaml:
        yaml.write("\n- func: pick(Tensor self) -> Tensor\n  dispatch:\n    CPU: pick\n")
    source = "aten/src/ATen/native/SoftmaxOp.cpp"
    replace_in(repo, KERNEL, NAMESPACE + "namespace {\n", NAMESPACE + local + "namespace {\n")
    replace_in(repo, KERNEL, "for (int i = 0; i < 4; i++) {", "for (int i = 0; i < pick(4, 8); i++) {")
    replace_in(repo, source, NAMESPACE + "DEFINE_DISPATCH", NAMESPACE + local + "DEFINE_DISPATCH")
    replace_in(repo, source, "make_size(3);", "make_size(pick(3, 2));")
    base = commit_all(repo, "each file has its own pick")
    replace_in(repo, source, local, "")
    replace_in(repo, source, "make_size(pick(3, 2));", "make_size(std::min(3, 2));")
    head_sha = commit_all(repo, "drop SoftmaxOp.cpp's pick")
    assert run_perfq(repo, "index", "-q", "--no-trace").returncode == 0
    doc = _affected(repo, f"{base}..{head_sha}")
    assert [(f["function"], f["why"]) for f in doc["no_op_changes"]] == [("at::native::pick", UNCALLED)]
    assert [f["function"] for f in doc["changed_functions"]] == ["at::native::lonely_kernel"]
    assert "softmax_op_test" not in {b["name"] for b in doc["benchmarks"]}


@pytest.mark.parametrize(("text", "same"), [
    ("template <typename T1, typename T2>\ninline bool operator!=(const pair<T1, T2>& x, const pair<T1, T2>& y) {\n"
     "  return !(x == y);\n}", True),
    ("inline bool operator!=(const P& x, const P& y) {\n  return !(y == x);\n}", False),  # the arguments swapped
    ("inline bool operator!=(const P& x, const P& y) {\n  return x.first != y.first;\n}", False),
    ("inline bool operator!=(const P& x) const {\n  return !(*this == x);\n}", False),  # a member: one parameter
])
def test_a_deleted_not_equal_is_what_cxx20_synthesizes_only_when_it_negates_equal(text: str, same: bool):
    assert synthesized_not_equal(text) is same


def test_a_deleted_not_equal_that_negates_equal_is_a_no_op(tmp_path):
    """torch-xpu-ops r5-n03: ``xpu::pair`` lost ``operator!=(x, y) { return !(x == y); }``; C++20
    rewrites every ``a != b`` of the header's includers to ``!(a == b)``: the same code."""
    equal = "struct Cfg { int n; };\ninline bool operator==(const Cfg& x, const Cfg& y) { return x.n == y.n; }\n"
    not_equal = "inline bool operator!=(const Cfg& x, const Cfg& y) {\n  return !(x == y);\n}\n"
    repo, _ = _repo(tmp_path)
    (repo / HELPER).write_text(_header(equal, not_equal, USED))
    base = commit_all(repo, "Cfg with == and !=")
    (repo / HELPER).write_text(_header(equal, USED))
    head = commit_all(repo, "drop operator!=: C++20 synthesizes it")
    assert run_perfq(repo, "index", "-q", "--no-trace").returncode == 0
    doc = _affected(repo, f"{base}..{head}")
    assert doc["benchmarks"] == [] and doc["changed_functions"] == []
    assert [(f["function"], f["why"]) for f in doc["no_op_changes"]] == [("at::native::operator!=", SYNTHESIZED)]
