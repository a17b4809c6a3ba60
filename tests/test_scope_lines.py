"""Changed lines outside functions that hold no code of their own: a namespace's opening and
closing lines and ``#pragma once``. The functions inside hold their own changed lines; these
lines do not fall back to every function of the file and of its includers (held-out h11 on
torch-xpu-ops: a new header's ``#pragma once`` and namespace braces started from every function
of ``Copy.cpp``, which includes it, at low confidence)."""

from __future__ import annotations

import json

from tests.aten_fixture import commit_all, git, make_repo, replace_in
from tests.conftest import run_perfq

HELPER = "aten/src/ATen/native/SizeHelpers.h"
OPS_FILE = "aten/src/ATen/native/SoftmaxOp.cpp"


def test_a_new_headers_namespace_and_pragma_lines_select_nothing(tmp_path):
    repo = make_repo(tmp_path / "repo")
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / HELPER).write_text(
        "#pragma once\n\nnamespace at::native {\n\nint padded_size(int x);\n\n}  // namespace at::native\n"
    )
    replace_in(repo, OPS_FILE, "#include <ATen/native/SoftmaxOp.h>\n",
               "#include <ATen/native/SoftmaxOp.h>\n#include <ATen/native/SizeHelpers.h>\n")
    helper = "int padded_size(int x) {\n  return x + 8;\n}\n\n"
    replace_in(repo, OPS_FILE, "Tensor lonely_kernel(", helper + "Tensor lonely_kernel(")
    head = commit_all(repo, "a new helper header, its function defined beside lonely_kernel")
    assert run_perfq(repo, "index", "-q", "--no-trace").returncode == 0  # the header and its includer indexed

    proc = run_perfq(repo, "affected", f"{base}..{head}", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    # before: the header's lines 1, 3 and 7 fell back to every function of SoftmaxOp.cpp, which
    # includes it (softmax_op_cpu_out: softmax_op_test), at low confidence
    assert doc["benchmarks"] == [] and doc["unmapped_changes"] == []
    assert any("namespace" in w and HELPER in w for w in doc["warnings"])
