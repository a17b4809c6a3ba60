"""A changed function of the index from which the walk meets no operator and no benchmark is
named as such ("reaches nothing"), never answered by a plain "No benchmark to run.": what runs
it (code generated at build time, a Python binding) is outside what perfq links, so an empty
selection would be a confident answer where perfq does not know (issue 40, round six: an
autograd formula helper and a torch-function check both came out as "No benchmark to run.")."""

from __future__ import annotations

import json

from tests.aten_fixture import commit_all, make_repo, replace_in
from tests.conftest import run_perfq

HELPER = "torch/csrc/autograd/FunctionsManual.cpp"
HELPER_BODY = """\
namespace torch::autograd::generated::details {
int mat1_backward(int grad) {
  return grad * 2;
}
}  // namespace torch::autograd::generated::details
"""


def _changed(tmp_path, rel: str, old: str, new: str) -> tuple:
    repo = make_repo(tmp_path / "repo")
    (repo / HELPER).parent.mkdir(parents=True)
    (repo / HELPER).write_text(HELPER_BODY)
    base = commit_all(repo, "a helper nothing in the tree calls")
    assert run_perfq(repo, "index", "-q", "--no-trace").returncode == 0
    replace_in(repo, rel, old, new)
    return repo, base, commit_all(repo, "change it")


def test_a_function_nothing_links_is_reported_as_reaching_nothing(tmp_path):
    repo, base, head = _changed(tmp_path, HELPER, "grad * 2", "grad * 3")
    doc = json.loads(run_perfq(repo, "affected", f"{base}..{head}", "--format", "json").stdout)
    assert doc["benchmarks"] == [] and doc["ops"] == []
    [hit] = doc["unreached_functions"]
    assert (hit["file"], hit["function"], hit["callers"]) == (
        HELPER, "torch::autograd::generated::details::mat1_backward", 0)
    assert "nothing in the index calls or registers it" in hit["reason"]

    table = run_perfq(repo, "affected", f"{base}..{head}").stdout
    assert "No benchmark to run." not in table
    assert "cannot tell what runs 1 changed function" in table and "reaches nothing" in table
    comment = run_perfq(repo, "affected", f"{base}..{head}", "--format", "markdown").stdout
    assert "1 changed function(s) reach no operator and no benchmark" in comment.splitlines()[0]


def test_a_kernel_that_reaches_its_operator_is_not_reported(tmp_path):
    # lonely_kernel is the CPU kernel of `lonely`, which no benchmark runs: a known answer (NO BENCHMARK)
    repo, base, head = _changed(tmp_path, "aten/src/ATen/native/SoftmaxOp.cpp", "make_size(3);", "make_size(4);")
    doc = json.loads(run_perfq(repo, "affected", f"{base}..{head}", "--format", "json").stdout)
    assert "lonely" in doc["no_benchmark_ops"]
    assert doc["unreached_functions"] == []
