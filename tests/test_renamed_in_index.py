"""An index of a later tree than the change (a backtest's, an old commit replayed against today's
index) may lack a changed function because it was renamed since: nothing in it has the name, and
nothing calls it. The base version of the changed file still says who called it there
(torch-xpu-ops r5-k03: ``_layer_norm_backward_kernel``, later ``layer_norm_backward_kernel_impl``,
changed under ``layer_norm_backward_kernel``, selected nothing)."""

from __future__ import annotations

import json

from tests.aten_fixture import commit_all, git, make_repo, replace_in
from tests.conftest import run_perfq

KERNEL = "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp"


def test_a_function_renamed_in_the_indexed_tree_starts_from_its_callers_in_the_base(tmp_path):
    repo = make_repo(tmp_path / "repo")
    base = git(repo, "rev-parse", "HEAD").strip()
    replace_in(repo, KERNEL, "out[i] = out[i] * 2;", "out[i] = out[i] * 3;")
    head = commit_all(repo, "inner_loop triples")
    replace_in(repo, KERNEL, "void inner_loop(", "void inner_loop_v2(")
    replace_in(repo, KERNEL, "inner_loop<scalar_t>(", "inner_loop_v2<scalar_t>(")
    commit_all(repo, "inner_loop renamed")
    assert run_perfq(repo, "index", "-q", "--no-trace").returncode == 0  # built after the rename

    proc = run_perfq(repo, "affected", f"{base}..{head}", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["unmapped_changes"] == []
    assert "softmax_op_test" in {b["name"] for b in doc["benchmarks"]}
