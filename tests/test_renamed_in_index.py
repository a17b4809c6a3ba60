"""An index of a later tree than the change (a backtest's, an old commit replayed against today's
index) may lack a changed function because it was renamed since: nothing in it has the name, and
nothing calls it. The base version of the changed file still says who called it there
(torch-xpu-ops r5-k03: ``_layer_norm_backward_kernel``, later ``layer_norm_backward_kernel_impl``,
changed under ``layer_norm_backward_kernel``, selected nothing)."""

from __future__ import annotations

import json

from indexer.facts import FileFacts, Function
from query.changes import ChangedFunction, ChangeSet, _note_base_callers
from schema.kinds import FunctionKind
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


def _base_callers_of(name: str, lines: list[str]) -> list[str]:
    """The base callers ``_note_base_callers`` finds for ``name``, changed in a one-line function,
    among one function per entry of ``lines`` (``caller{i}`` holding ``lines[i]``)."""
    rows = ["void helper() {}"] + [f"void caller{i}() {{ {line} }}" for i, line in enumerate(lines)]
    functions = [Function(f"ns::{row.split()[1][:-2]}", row.split()[1][:-2], FunctionKind.FUNCTION, n, n, False)
                 for n, row in enumerate(rows, start=1)]
    cs = ChangeSet()
    changed = ChangedFunction("a.cpp", f"ns::{name}", name, [1], "both", "modified")
    _note_base_callers(cs, FileFacts("a.cpp", "cpp", "", len(rows), functions=functions), [changed], rows)
    return [caller.removeprefix("ns::") for caller in cs.base_callers.get(("a.cpp", f"ns::{name}"), [])]


def test_base_callers_are_the_bodies_calling_the_name_itself():
    lines = [
        "helper(1);",  # 0: a call
        "helper <int, decltype(g(x))> (2);",  # 1: with template arguments (holding a call of their own)
        "obj.helper(3); p->helper(4); ns2::helper(5);",  # 2: a member or a qualified name: another function
        "helper_v2(6); my_helper(7); int helper = 8;",  # 3: longer names, and the name not called
        "f(helper(9));",  # 4: an argument's call
    ]
    assert _base_callers_of("helper", lines) == ["caller0", "caller1", "caller4"]
    assert _base_callers_of("g", lines) == ["caller1"]  # inside another call's template arguments
