"""Issue 37 item 3: in CI the whole perfq config is the PR's base's. A PR that changes a kernel and
adds ``exclude`` for it in its own ``perfq.toml`` used to select 0 benchmarks (bench jobs skipped,
gate passed); the select job now reads the base's committed config (``perfq ci base-config``,
``PERFQ_CONFIG_DIR``), and the PR comment says the config change takes effect after merge."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from perfq.ci.workflows import WorkflowOptions, render
from tests.ci_fixture import SLOW_PATCH, make_ci_repo
from tests.conftest import git, run_perfq

EXCLUDE = '[tool.perfq]\nexclude = ["torch/nn/**", "**/test/**"]\n'


def _pr_with_own_config(root: Path) -> Path:
    """The fixture with a merge commit (HEAD) of a PR that slows the softmax kernel and excludes it."""
    repo = make_ci_repo(root)
    git(repo, "checkout", "-q", "-b", "pr")
    rel, old, new = SLOW_PATCH
    (repo / rel).write_text((repo / rel).read_text().replace(old, new, 1))
    (repo / "perfq.toml").write_text(EXCLUDE)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "slow softmax, and hide it")
    git(repo, "checkout", "-q", "--detach", "main")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge", "pr")
    return repo


def _selected(repo: Path, env: dict[str, str], db: Path) -> set[str]:
    """The benchmarks the select job's commands (index, then affected) select with ``env``."""
    built = run_perfq(repo, "index", "--no-trace", "--db", str(db), env=env)
    assert built.returncode == 0, built.stderr
    done = run_perfq(repo, "affected", "HEAD^1", "--db", str(db), "--format", "json", env=env)
    assert done.returncode == 0, done.stderr
    return {b["name"] for b in json.loads(done.stdout)["benchmarks"]}


def test_a_prs_own_config_cannot_unselect_the_benchmarks_it_slows(tmp_path):
    repo = _pr_with_own_config(tmp_path / "repo")
    # the fault: the PR's own exclude hides its change
    assert "softmax_op_test" not in _selected(repo, {}, tmp_path / "own.duckdb")
    out = tmp_path / "base-config"
    wrote = run_perfq(repo, "ci", "base-config", "HEAD^1", "--out", str(out))
    assert wrote.returncode == 0, wrote.stderr
    assert wrote.stdout == f"PERFQ_CONFIG_DIR={out}\n" and not (out / "perfq.toml").exists()
    # what the base's config selects
    assert "softmax_op_test" in _selected(repo, {"PERFQ_CONFIG_DIR": str(out)}, tmp_path / "base.duckdb")


def test_the_comment_says_a_config_change_takes_effect_after_merge(tmp_path):
    repo = _pr_with_own_config(tmp_path / "repo")
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "affected.md").write_text("affected\n")
    args = ("ci", "report", str(inputs), "--label", "pr-1", "--pr", "1", "--head-sha", "a" * 40, "--base", "HEAD^1")
    changed = run_perfq(repo, *args, "--out", str(tmp_path / "c1"))
    assert changed.returncode == 0, changed.stderr
    body = (tmp_path / "c1" / "comment.md").read_text()
    assert "**This PR changes `perfq.toml`**" in body and "takes effect after merge" in body
    same = run_perfq(repo, *args[:-1], "HEAD", "--out", str(tmp_path / "c2"))  # base == head: no change
    assert same.returncode == 0, same.stderr
    assert "takes effect after merge" not in (tmp_path / "c2" / "comment.md").read_text()


def test_every_ci_step_that_selects_reads_the_base_config_and_traces_only_sandboxed():
    files = render(WorkflowOptions("git+https://example.org/perfq@" + "0" * 40), "0.0.0")
    bench, nightly = yaml.safe_load(files["perfq-benchmarks.yml"]), yaml.safe_load(files["perfq-nightly.yml"])
    assert bench["env"]["PERFQ_TRACE_SANDBOX"] == nightly["env"]["PERFQ_TRACE_SANDBOX"] == "required"
    for job in ("select", "bench"):
        steps = bench["jobs"][job]["steps"]
        planning = [s for s in steps if any(f"perfq {c}" in s.get("run", "") for c in ("index", "affected", "run "))]
        assert planning and all(s["env"]["PERFQ_CONFIG_DIR"] == "${{ runner.temp }}/perfq-base-config"
                                for s in planning)
        first = next(i for i, s in enumerate(steps) if s in planning)
        assert any("perfq ci base-config HEAD^1" in s.get("run", "") for s in steps[:first])
