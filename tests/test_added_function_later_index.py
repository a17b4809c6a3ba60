"""An index built from a later tree than the change's head (a backtest's, or an old commit replayed
against today's index) holds the functions the change adds with that later tree's callers. Those
are not the change's: a helper added and used by one kernel, then called by others in later
commits, selected the later callers' benchmarks (held-out x06 on torch-xpu-ops: a launch helper
added for 10 kernels, called by 21 at the indexed commit, selected every script)."""

from __future__ import annotations

import json

from tests.aten_fixture import commit_all, git, make_repo, replace_in
from tests.conftest import run_perfq

HELPER = "aten/src/ATen/native/LaunchUtils.h"
OPS_FILE = "aten/src/ATen/native/SoftmaxOp.cpp"
KERNEL = "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp"


def _affected(repo, rev_range: str) -> dict:
    proc = run_perfq(repo, "affected", rev_range, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_an_added_functions_later_callers_are_not_the_changes(tmp_path):
    repo = make_repo(tmp_path / "repo")
    header = "#pragma once\nnamespace at::native {\ninline int warp_size() {\n  return 32;\n}\n"
    (repo / HELPER).write_text(header + "}\n")
    base = commit_all(repo, "a helpers header")
    (repo / HELPER).write_text(header + "\ninline int group_range(int n) {\n  return n / 256 + 1;\n}\n}\n")
    replace_in(repo, OPS_FILE, "  make_size(3);\n", "  make_size(group_range(3));\n")
    replace_in(repo, OPS_FILE, "#include <ATen/native/SoftmaxOp.h>\n", f"#include <{HELPER[len('aten/src/'):]}>\n"
               "#include <ATen/native/SoftmaxOp.h>\n")
    added = commit_all(repo, "add group_range, used by lonely_kernel")
    replace_in(repo, KERNEL, "#include <ATen/native/SoftmaxOp.h>\n", f"#include <{HELPER[len('aten/src/'):]}>\n"
               "#include <ATen/native/SoftmaxOp.h>\n")
    replace_in(repo, KERNEL, "for (int i = 0; i < 4; i++) {", "for (int i = 0; i < group_range(4); i++) {")
    later = commit_all(repo, "softmax's kernel uses group_range too")
    assert run_perfq(repo, "index", "-q", "--no-trace").returncode == 0  # built at the later commit

    doc = _affected(repo, f"{base}..{added}")
    assert "lonely" in doc["no_benchmark_ops"]  # the change's own caller
    assert "softmax_op_test" not in {b["name"] for b in doc["benchmarks"]}  # a later caller's benchmark
    # the later commit's own change does select it, and an index at the change's head keeps its callers
    assert "softmax_op_test" in {b["name"] for b in _affected(repo, f"{added}..{later}")["benchmarks"]}
    git(repo, "checkout", "-q", added)
    assert run_perfq(repo, "index", "-q", "--no-trace").returncode == 0
    assert "lonely" in _affected(repo, f"{base}..{added}")["no_benchmark_ops"]


def test_a_new_overload_of_a_called_helper_starts_from_its_callers_in_the_head_only(tmp_path):
    """New overloads of a widely called launch helper (torch-xpu-ops' ``sycl_kernel_submit<kptr>``,
    issue 31) and a namespace alias for them are not a change to the old overloads, whose callers
    are everywhere: with the index at the base, the change reaches what its own changed callers
    reach, and the alias line selects nothing by itself (it fell back to every includer)."""
    repo = make_repo(tmp_path / "repo")
    header = "#pragma once\nnamespace at::native {\ninline int launch(int n) {\n  return n;\n}\n"
    (repo / HELPER).write_text(header + "}\n")
    include = f"#include <{HELPER[len('aten/src/'):]}>\n#include <ATen/native/SoftmaxOp.h>\n"
    replace_in(repo, KERNEL, "#include <ATen/native/SoftmaxOp.h>\n", include)
    replace_in(repo, KERNEL, "for (int i = 0; i < 4; i++) {", "for (int i = 0; i < launch(4); i++) {")
    replace_in(repo, OPS_FILE, "#include <ATen/native/SoftmaxOp.h>\n", include)
    replace_in(repo, OPS_FILE, "  make_size(3);\n", "  make_size(launch(3));\n")
    base = commit_all(repo, "a launch helper, called by two kernels")
    assert run_perfq(repo, "index", "-q", "--no-trace").returncode == 0  # built at the base
    overload = "namespace fast = at::native;\ninline int launch(int n, int group) { return n / group; }\n"
    (repo / HELPER).write_text(header + overload + "}\n")
    head = commit_all(repo, "a new launch overload, not used yet")

    doc = _affected(repo, f"{base}..{head}")
    assert [cf["status"] for cf in doc["changed_functions"]] == ["added"]
    assert doc["benchmarks"] == [] and doc["ops"] == [] and doc["unmapped_changes"] == []
    assert any("namespace alias" in w for w in doc["warnings"])
