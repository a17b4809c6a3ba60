"""Commands called from Python as they run from the command line (issue 39): ``perfq index`` and
``perfq affected`` take a typed request and answer what the command prints."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from common.errors import PerfqError
from perfq.cli.affected_pipeline import AffectedRequest, affected
from perfq.cli.index_pipeline import IndexRequest, index
from schema.index_store import IndexStore
from schema.reader import open_index
from tests.aten_fixture import commit_all, git, make_repo, perfq, replace_in

KERNEL = "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture indexed from Python, then a kernel edit committed on a branch."""
    root = make_repo(tmp_path_factory.mktemp("pipelines"))
    (root / "perfq.toml").write_text("no_such_key = 1\n")
    warnings: list[str] = []
    answer = index(IndexRequest(repo=root, trace=False, quiet=True), warn=warnings.append)
    assert warnings == ["warning: unknown config key 'no_such_key' is ignored"]
    assert answer.db == root / ".git" / "perfq" / "index.duckdb" and answer.report.mode == "linked"
    with open_index(answer.db) as con:
        assert len(IndexStore(con, answer.db).ops_named("softmax_op")) == 1 and answer.report.counts["ops"] > 0
    (root / "perfq.toml").unlink()
    git(root, "checkout", "-q", "-b", "work")
    replace_in(root, KERNEL, "out[i] * 2", "out[i] * 3")
    commit_all(root)
    return root


def test_affected_from_python_is_what_the_command_prints(repo):
    answer = affected(AffectedRequest(repo=repo, ref="main", budget="5m"))
    proc = perfq(repo, "affected", "main", "--budget", "5m", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    assert printed.pop("plan") == answer.plan.to_json()
    assert printed == answer.doc.to_json()
    assert sorted(b.name for b in answer.doc.benchmarks) == ["fancy_test", "softmax_op_test"]


def test_affected_without_budget_has_no_plan_and_a_bad_diff_is_one_error(repo, tmp_path):
    assert affected(AffectedRequest(repo=repo, ref="main")).plan is None
    with pytest.raises(PerfqError, match="cannot read diff"):
        affected(AffectedRequest(repo=repo, diff=str(tmp_path / "missing.patch")))


def test_index_request_is_frozen_and_refreshes_the_index_to_head(repo):
    request = IndexRequest(repo=repo, trace=False, quiet=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.full = True  # type: ignore[misc]
    answer = index(request)
    assert answer.report.reparsed == 1  # the branch's one changed file
    with open_index(answer.db) as con:
        indexed = IndexStore(con, answer.db).meta()["indexed_commit"]
    assert indexed == git(repo, "rev-parse", "HEAD").strip()


def test_ci_from_python_is_what_the_command_writes_and_prints(tmp_path, cli):
    """``perfq ci init`` and ``perfq ci report`` as functions: the workflows the command prints, the
    files it writes, the comment and the gate's exit status it ends with."""
    from perfq.ci.pipeline import InitRequest, ReportRequest, init_workflows, prepare_report
    from perfq.options import EXIT_GATE

    git(tmp_path, "init", "-q")
    spec = "git+https://github.com/org/perfq@" + "0" * 40
    answer = init_workflows(InitRequest(repo=tmp_path, perfq_spec=spec, gate=True, stdout=True))
    printed = cli(tmp_path, "ci", "init", "--perfq-spec", spec, "--gate", "--stdout")
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == "".join(f"# ---- .github/workflows/{n}\n{t}" for n, t in answer.workflows.items())
    assert answer.written == () and not (tmp_path / ".github").exists()
    written = init_workflows(InitRequest(repo=tmp_path, perfq_spec=spec, gate=True)).written
    assert {p.name: p.read_text() for p in written} == answer.workflows
    with pytest.raises(PerfqError, match="exists"):
        init_workflows(InitRequest(repo=tmp_path, perfq_spec=spec))

    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "matrix.json").write_text(json.dumps({"include": [{"shard": 1, "shards": 1, "benchmarks": "a_test"}]}))
    request = ReportRequest(inputs, "pr-7", 7, "c" * 40, out=tmp_path / "out", fail_on_regression=True)
    report = prepare_report(request)
    assert report.exit_code == EXIT_GATE and report.outcome.missing == ("a_test",)
    assert "a_test" in (tmp_path / "out" / "comment.md").read_text()
    assert prepare_report(dataclasses.replace(request, fail_on_regression=False)).exit_code == 0
