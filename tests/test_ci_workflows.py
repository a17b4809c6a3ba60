"""`perfq ci`: the generated workflows pass actionlint and zizmor, and run end to end on a fixture repo.

The end-to-end test runs both generated workflows, step by step as written, with
tests/gha_emulator.py (no GitHub): a push to main warms the index cache, a PR that slows a
kernel gets one sticky comment with the affected chain and a regression verdict, a re-run
updates that comment, a PR no benchmark sees still gets a comment, a stale run comments nowhere.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
import yaml

from perfq.ci.comment import MARKER, PullRequestRef, find_sticky, fit, parse_pr, sticky_body
from perfq.ci.workflows import PINS, WorkflowOptions, render
from perfq.options import EXIT_ERROR, EXIT_GATE
from tests.ci_fixture import SLOW_PATCH, WHEEL_BUILD, make_ci_repo, open_pr
from tests.conftest import git, run_perfq
from tests.fake_github import FakeGitHub
from tests.gha_emulator import Emulator, job_log, parse_outputs, perfq_wheel, python_venv

ROOT = Path(__file__).resolve().parents[1]
SPEC = "git+https://github.com/example/perfq@0123456789abcdef0123456789abcdef01234567"


def _tool(name: str) -> str:
    path = shutil.which(name) or str(Path(sys.executable).parent / name)
    if not Path(path).exists():
        pytest.skip(f"{name} is not installed (pip install -e '.[dev]')")
    return path


def _write(tmp_path: Path, files: dict[str, str]) -> Path:
    target = tmp_path / ".github/workflows"
    target.mkdir(parents=True)
    for name, text in files.items():
        (target / name).write_text(text)
    return target


@pytest.mark.parametrize("options", [
    WorkflowOptions(SPEC),
    WorkflowOptions(SPEC, runner=("self-hosted", "perf"), gate=True, run_flags=("--repeat", "3"),
                    python_version="3.12", base_branch="release/2.6", shards=4, budget="10m",
                    wheel_build="python setup.py bdist_wheel", build_runner=("self-hosted", "builder")),
    WorkflowOptions(SPEC, torch_spec="torch==2.6.0", upstream="torch",
                    wheel_url="https://wheels.example.org/xpu_ops-{commit}-cp311-linux_x86_64.whl"),
], ids=["defaults", "self-hosted-gate", "backend-published-wheels"])
def test_generated_workflows_have_no_actionlint_or_zizmor_findings(tmp_path, options):
    target = _write(tmp_path, render(options, "0.0.0"))
    custom = [label for label in options.runner + options.build_runner if label not in ("self-hosted", "ubuntu-latest")]
    config = tmp_path / ".github/actionlint.yaml"  # as a repository with custom runner labels has it
    config.write_text(yaml.safe_dump({"self-hosted-runner": {"labels": custom}}))
    workflows = sorted(str(p) for p in target.iterdir())
    lint = subprocess.run([_tool("actionlint"), "-config-file", str(config), *workflows], capture_output=True,
                          text=True, cwd=tmp_path)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    audit = subprocess.run([_tool("zizmor"), "--offline", "--persona", "pedantic", "--no-progress", "--color", "never",
                            str(target)],
                           capture_output=True, text=True, cwd=tmp_path)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "No findings to report" in audit.stdout
    # the one accepted finding: workflow_run itself, ignored inline with its reason (a self-hosted runner is
    # reported only by the auditor persona: docs/ci.md says how to run one safely)
    assert "(1 ignored" in audit.stdout


def test_workflows_are_pinned_least_privileged_and_injection_free():
    files = render(WorkflowOptions(SPEC), "0.0.0")
    text = "".join(files.values())
    uses = re.findall(r"uses: (\S+)@(\S+) # (v[\d.]+)", text)
    assert {a for a, _, _ in uses} == {p.action for p in PINS.values()}
    for action, sha, version in uses:
        pin = next(p for p in PINS.values() if p.action == action)
        assert re.fullmatch(r"[0-9a-f]{40}", sha) and (sha, version) == (pin.sha, pin.version)
    assert "uses:" not in re.sub(r"uses: \S+@[0-9a-f]{40} # v[\d.]+", "", text)  # no unpinned use
    docs = (ROOT / "docs/ci.md").read_text()
    assert all(f"| {p.version} | `{p.sha}` |" in docs for p in PINS.values())  # the docs state the pins
    bench, comment, nightly = (yaml.safe_load(files[n]) for n in ("perfq-benchmarks.yml", "perfq-comment.yml",
                                                                    "perfq-nightly.yml"))
    assert bench["permissions"] == nightly["permissions"] == {"contents": "read"} and comment["permissions"] == {}
    assert comment["jobs"]["comment"]["permissions"] == {"actions": "read", "pull-requests": "write"}
    assert bench["concurrency"]["cancel-in-progress"] is True
    for flow in (bench, comment, nightly):
        for job in flow["jobs"].values():
            assert job["timeout-minutes"] >= 1
            for step in job["steps"]:
                assert "${{" not in step.get("run", "")  # expressions only through env:
                if "checkout" in step.get("uses", ""):
                    assert step["with"]["persist-credentials"] is False
    checkouts = [s for s in bench["jobs"]["select"]["steps"] if "checkout" in s.get("uses", "")]
    assert checkouts[0]["with"]["filter"] == "blob:none" and checkouts[0]["with"]["fetch-depth"] == 50
    assert not any("checkout" in s.get("uses", "") for s in comment["jobs"]["comment"]["steps"])
    assert "pip install perfq" not in text and '"$PERFQ_SPEC"' in text


@pytest.mark.parametrize("args, message", [
    (("--perfq-spec", "perfq"), "package name"),
    (("--perfq-spec", "perfq==0.1.0"), "package name"),
    (("--perfq-spec", SPEC, "--wheel-build", "make ${{ github.event.pull_request.title }}"), "${{"),
    (("--perfq-spec", SPEC, "--runner", "self hosted"), "--runner"),
    (("--perfq-spec", SPEC, "--wheel-url", "https://x.org/torch.whl"), "{commit}"),
    (("--perfq-spec", SPEC, "--run-flags", "--tag-filter short"), "--tag-filter"),
    (("--perfq-spec", SPEC, "--budget", "soon"), "--budget"),
    (("--perfq-spec", SPEC, "--build-env", "USE CUDA=0"), "NAME=VALUE"),
    (("--perfq-spec", SPEC, "--build-env", "USE_CUDA=${{ github.head_ref }}"), "${{"),
])
def test_init_refuses_unsafe_values(tmp_path, cli, args, message):
    git(tmp_path, "init", "-q")
    res = cli(tmp_path, "ci", "init", *args)
    assert res.returncode == EXIT_ERROR and message in res.stderr and res.stderr.count("\n") == 1
    assert not (tmp_path / ".github").exists()


def test_the_build_job_checks_out_submodules_and_builds_with_the_build_env():
    def build_step(options: WorkflowOptions) -> tuple[dict, dict]:
        job = yaml.safe_load(render(options, "0.0.0")["perfq-benchmarks.yml"])["jobs"]["build"]
        checkout = next(s for s in job["steps"] if "checkout" in s.get("uses", ""))
        return checkout, next(s for s in job["steps"] if s.get("name") == "Build the wheel")

    checkout, step = build_step(WorkflowOptions(SPEC))
    assert checkout["with"]["submodules"] == "recursive"
    assert {k: v for k, v in step["env"].items() if k.startswith("USE_")} == {"USE_CUDA": "0", "USE_ROCM": "0",
                                                                              "USE_XPU": "0"}
    assert "--no-build-isolation" in step["run"]
    _, step = build_step(WorkflowOptions(SPEC, build_env=("USE_CUDA=1", "MAX_JOBS=32")))
    assert step["env"]["USE_CUDA"] == "1" and step["env"]["MAX_JOBS"] == "32" and "USE_ROCM" not in step["env"]
    _, step = build_step(WorkflowOptions(SPEC, build_env=()))
    assert set(step["env"]) == {"CCACHE_BASEDIR", "CCACHE_NOHASHDIR"}


def test_init_writes_once(tmp_path, cli):
    git(tmp_path, "init", "-q")
    assert cli(tmp_path, "ci", "init", "--perfq-spec", SPEC).returncode == 0
    assert sorted(p.name for p in (tmp_path / ".github/workflows").iterdir()) == [
        "perfq-benchmarks.yml", "perfq-comment.yml", "perfq-nightly.yml"]
    again = cli(tmp_path, "ci", "init", "--perfq-spec", SPEC)
    assert again.returncode == EXIT_ERROR and "--force" in again.stderr
    assert cli(tmp_path, "ci", "init", "--perfq-spec", SPEC, "--force").returncode == 0


def test_sticky_comment_rules():
    human = {"id": 1, "body": f"see {MARKER}", "user": {"login": "a", "type": "User"}}
    bot_other = {"id": 2, "body": "hello", "user": {"login": "github-actions[bot]", "type": "Bot"}}
    ours = {"id": 3, "body": sticky_body("x"), "user": {"login": "github-actions[bot]", "type": "Bot"}}
    assert find_sticky([human, bot_other, ours]) is ours and find_sticky([human, bot_other]) is None
    assert sticky_body(f"a {MARKER} b").count(MARKER) == 1
    long = "line\n" * 20000
    cut = fit(long, 1000)
    assert len(cut) <= 1000 and cut.endswith("artifact)\n")
    assert parse_pr('{"number": 7, "head_sha": "abcdef1"}') == PullRequestRef(7, "abcdef1")
    for bad in ('{"number": "7; rm -rf /", "head_sha": "abcdef1"}', '{"number": -1, "head_sha": "abcdef1"}',
                '{"number": true, "head_sha": "abcdef1"}', '{"number": 7, "head_sha": "HEAD"}', "[]", "nope"):
        with pytest.raises(ValueError):
            parse_pr(bad)


def _pr_event(number: int, pr: dict[str, str]) -> dict:
    return {"number": number, "pull_request": {"number": number, "head": {"sha": pr["head"]},
                                               "base": {"sha": pr["base"]}}}


def _run_event(run_id: int, pr: dict[str, str], branch: str) -> dict:
    return {"workflow_run": {"id": run_id, "event": "pull_request", "conclusion": "success", "head_sha": pr["head"],
                             "head_branch": branch, "head_repository": {"full_name": "org/repo"}}}


def _fixture_torch_wheel(origin: Path, python: Path, dest: Path) -> Path:
    """The fixture's own ``torch`` as a wheel: what the select job installs (offline) for a traced index."""
    subprocess.run([str(python), str(origin / "tools/build_wheel.py"), str(dest)], check=True)
    return next(dest.glob("torch-*.whl"))


def test_workflows_run_end_to_end(tmp_path):
    origin = make_ci_repo(tmp_path / "origin")
    venv = python_venv(tmp_path / "py")
    wheel = perfq_wheel(ROOT, venv / "bin" / "python", tmp_path / "wheel")
    torch_wheel = _fixture_torch_wheel(origin, venv / "bin" / "python", tmp_path / "torch-wheel")
    init = run_perfq(origin, "ci", "init", "--perfq-spec", str(wheel), "--wheel-build", WHEEL_BUILD,
                     "--torch-spec", str(torch_wheel), "--torch-index", "", "--shards", "2", "--gate")
    assert init.returncode == 0, init.stderr
    git(origin, "add", "-A")
    git(origin, "commit", "-qm", "perfq workflows")
    main = git(origin, "rev-parse", "main").strip()
    fake = FakeGitHub()
    server, url = fake.serve()
    fake.add_comment(7, f"a human quoting {MARKER}", "someone", "User")
    emu = Emulator(origin, tmp_path / "gha", venv, api_url=url)
    benchmarks, comment, nightly = (origin / ".github/workflows" / n
                                    for n in ("perfq-benchmarks.yml", "perfq-comment.yml", "perfq-nightly.yml"))
    try:
        # the nightly on main: a traced index saved under main's commit, the coverage report and its trend
        night, jobs = emu.run_workflow(nightly, "schedule", {}, main, "refs/heads/main")
        assert jobs["index"].result == "success", job_log(jobs["index"])
        # the native shards sampled (or failed alone) and the merge saved the index under the commit's key
        assert jobs["merge"].result == "success" and "native shard file(s)" in job_log(jobs["merge"])
        assert [k for k in emu.caches if k.startswith("perfq-index-") and k.endswith(main)]
        report = emu.artifacts[night]["perfq-coverage"]
        assert {"coverage.html", "coverage.json", "trend.json", "trend.md"} <= {p.name for p in report.iterdir()}
        assert [n["commit"] for n in json.loads((report / "trend.json").read_text())["nights"]] == [main]

        # PR 7 slows the function the softmax benchmark calls
        pr7 = open_pr(origin, 7, SLOW_PATCH)
        fake.heads[7] = pr7["head"]
        run7, jobs = emu.run_workflow(benchmarks, "pull_request", _pr_event(7, pr7), pr7["merge"], "refs/pull/7/merge")
        for name in ("select", "build", "bench"):
            assert jobs[name].result == "success", job_log(jobs[name])
        # --gate: the regression fails the check, the comment still goes out
        assert jobs["report"].result == "failure", job_log(jobs["bench"]) + job_log(jobs["report"])
        cache = next(s for s in jobs["select"].steps if "cache-hit" in s.outputs)
        assert cache.outputs["cache-hit"] == "true"  # the index the nightly left, keyed by the PR's base
        log = job_log(jobs["select"])
        assert "Processing " in log and "torch-0.0.1" in log  # the select job installed torch before indexing
        matrix = json.loads(jobs["select"].outputs["matrix"])
        # one job per shard of the plan that holds a test (one selected test here: one of the 2 shards)
        assert matrix["include"] and all(e["shards"] == 2 and 1 <= e["shard"] <= 2 for e in matrix["include"])
        assert {b for e in matrix["include"] for b in e["benchmarks"].split()} == {"softmax_op_test"}
        assert {"wheel-base", "wheel-head"} <= set(emu.artifacts[run7])  # each side built once for every shard
        bench_log = job_log(jobs["bench"])
        # the bench job installs perfq and nothing else (its commands; pip's own "[notice] To update, run:
        # python -m pip install --upgrade pip" is output, printed when the environment's pip is old)
        installs = [line for line in bench_log.splitlines() if line.startswith("$ ") and "install" in line]
        assert installs == ['$ python -m pip install "$PERFQ_SPEC"'], installs
        assert "--tag-filter" not in bench_log
        _, posted = emu.run_workflow(comment, "workflow_run", _run_event(run7, pr7, "pr7"), main, "refs/heads/main")
        assert posted["comment"].result == "success", job_log(posted["comment"])
        [ours] = fake.bot_comments(7)
        body = ours["body"]
        assert body.startswith(MARKER) and "fancy_softmax" in body and "softmax_op_test" in body
        assert body.index("fancy_softmax") < body.index("Base vs head")  # affected summary first, then verdicts
        assert re.search(r"[1-9]\d* regression\(s\)", body), body
        assert fake.comments[7][0]["body"] == f"a human quoting {MARKER}"  # the human's comment untouched

        # the same run commented again (a re-run): one comment, updated in place
        emu.run_workflow(comment, "workflow_run", _run_event(run7, pr7, "pr7"), main, "refs/heads/main")
        assert len(fake.bot_comments(7)) == 1 and ("PATCH", f"/repos/org/repo/issues/comments/{ours['id']}") in \
            fake.requests

        # main moves on without a nightly; PR 8 changes nothing a benchmark sees: the nearest ancestor's index
        # is restored and patched, no bench job runs, and the comment says so
        (origin / "NOTES.md").write_text("notes\n")
        git(origin, "add", "-A")
        git(origin, "commit", "-qm", "notes")
        pr8 = open_pr(origin, 8, None)
        fake.heads[8] = pr8["head"]
        run8, jobs = emu.run_workflow(benchmarks, "pull_request", _pr_event(8, pr8), pr8["merge"], "refs/pull/8/merge")
        assert jobs["bench"].result == "skipped" and jobs["report"].result == "success", job_log(jobs["report"])
        cache = next(s for s in jobs["select"].steps if "cache-hit" in s.outputs)
        assert cache.outputs["cache-hit"] == "false" and cache.outputs["cache-matched-key"].endswith(main)
        emu.run_workflow(comment, "workflow_run", _run_event(run8, pr8, "pr8"), main, "refs/heads/main")
        [only] = fake.bot_comments(8)
        assert "Nothing to run" in only["body"] and "0 benchmark(s) selected" in only["body"]

        # the PR moved on before the comment workflow ran: the stale results comment nowhere
        fake.heads[8] = "f" * 40
        before = list(fake.requests)
        _, stale = emu.run_workflow(comment, "workflow_run", _run_event(run8, pr8, "pr8"), main, "refs/heads/main")
        assert stale["comment"].result == "success" and "not commenting" in job_log(stale["comment"])
        assert not [r for r in fake.requests[len(before):] if r[0] in ("POST", "PATCH")]

        # the next night adds a row to the trend
        head = git(origin, "rev-parse", "main").strip()
        night2, jobs = emu.run_workflow(nightly, "schedule", {}, head, "refs/heads/main")
        assert jobs["index"].result == "success", job_log(jobs["index"])
        trend = json.loads((emu.artifacts[night2]["perfq-coverage"] / "trend.json").read_text())
        assert [n["commit"] for n in trend["nights"]] == [main, head]
    finally:
        server.shutdown()


def test_comment_refuses_forged_or_unauthenticated_artifacts(tmp_path, cli, monkeypatch):
    fake = FakeGitHub()
    server, url = fake.serve()
    fake.heads[5] = "a" * 40
    prepared = tmp_path / "perfq-comment"
    prepared.mkdir()
    (prepared / "comment.md").write_text("body\n")
    (prepared / "pr.json").write_text(json.dumps({"number": 5, "head_sha": "b" * 40}))
    args = ("ci", "comment", str(prepared), "--repository", "org/repo", "--api-url", url)
    try:
        monkeypatch.delenv("GH_TOKEN", raising=False)
        monkeypatch.delenv("GITHUB_TOKEN", raising=False)
        res = cli(tmp_path, *args, "--head-sha", "a" * 40)
        assert res.returncode == EXIT_ERROR and "no GitHub token" in res.stderr
        monkeypatch.setenv("GH_TOKEN", "fake-token")
        # the artifact says another commit than the event: refused, nothing posted
        res = cli(tmp_path, *args, "--head-sha", "a" * 40)
        assert res.returncode == EXIT_ERROR and "refused" in res.stderr
        (prepared / "pr.json").write_text(json.dumps({"number": "5 && curl evil", "head_sha": "a" * 40}))
        res = cli(tmp_path, *args, "--head-sha", "a" * 40)
        assert res.returncode == EXIT_ERROR and "positive integer" in res.stderr
        monkeypatch.setenv("GH_TOKEN", "wrong")
        (prepared / "pr.json").write_text(json.dumps({"number": 5, "head_sha": "a" * 40}))
        res = cli(tmp_path, *args, "--head-sha", "a" * 40)
        assert res.returncode == EXIT_ERROR and "HTTP 401" in res.stderr
        assert not [r for r in fake.requests if r[0] != "GET"]
    finally:
        server.shutdown()


def test_report_gate_and_nothing_selected(tmp_path, cli):
    inputs = tmp_path / "perfq-in"
    inputs.mkdir()
    (inputs / "affected.md").write_text("**perfq**: 0 benchmark(s) selected\n")
    # the plan's shards, none with a benchmark: no job, and the comment says nothing runs
    empty = [{"shard": k, "shards": 2, "benchmarks": ""} for k in (1, 2)]
    (inputs / "matrix.json").write_text(json.dumps({"include": empty}))
    matrix = cli(tmp_path, "ci", "matrix", str(inputs / "matrix.json"))
    assert matrix.returncode == 0 and parse_outputs(matrix.stdout) == {"matrix": '{"include":[]}', "count": "0"}
    res = cli(tmp_path, "ci", "report", str(inputs), "--label", "pr-3", "--pr", "3", "--head-sha", "c" * 40,
              "--out", str(tmp_path / "out"), "--fail-on-regression")
    assert res.returncode == 0, res.stderr
    body = (tmp_path / "out/comment.md").read_text()
    assert "0 benchmark(s) selected" in body and "Nothing to run" in body
    assert json.loads((tmp_path / "out/pr.json").read_text()) == {"number": 3, "head_sha": "c" * 40}
    bad = cli(tmp_path, "ci", "report", str(inputs), "--label", "x", "--pr", "3", "--head-sha", "HEAD",
              "--out", str(tmp_path / "o2"))
    assert bad.returncode == EXIT_ERROR and "hex commit" in bad.stderr


def test_report_gate_fails_on_a_regression_after_writing_the_comment(tmp_path, cli):
    from tests.run_fakebench import make_bench_root

    root = make_bench_root(tmp_path)
    inputs = tmp_path / "perfq-in"
    inputs.mkdir()
    res = cli(tmp_path, "run", "-l", "pr-4", "--ab", "--base-python", sys.executable, "--head-python",
              sys.executable, "--bench", "fake", "--head-env", "FAKE_SLOW=2", "--bench-root", str(root),
              "--history", str(tmp_path / "h.duckdb"), "--repo", str(tmp_path), "--out",
              str(inputs / "results-fake_test-eager-cpu.json"))
    assert res.returncode == 0, res.stderr
    out = tmp_path / "out"
    gate = cli(tmp_path, "ci", "report", str(inputs), "--label", "pr-4", "--pr", "4", "--head-sha", "d" * 40,
               "--out", str(out), "--fail-on-regression")
    assert gate.returncode == EXIT_GATE
    assert "4 regression(s)" in (out / "comment.md").read_text()
    assert json.loads((out / "comparison.json").read_text())["summary"]["regression"] == 4


def test_init_defaults_to_the_git_commit_perfq_was_installed_from(tmp_path, cli, monkeypatch):
    import importlib.metadata

    class Dist:
        def __init__(self, info):
            self.info = info

        def read_text(self, name):
            return json.dumps(self.info)

    sha = "89abcdef0123456789abcdef0123456789abcdef"
    git(tmp_path, "init", "-q")
    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: Dist(
        {"url": "https://github.com/example/perfq", "vcs_info": {"vcs": "git", "commit_id": sha}}))
    assert cli(tmp_path, "ci", "init").returncode == 0
    text = (tmp_path / ".github/workflows/perfq-benchmarks.yml").read_text()
    assert f'PERFQ_SPEC: "git+https://github.com/example/perfq@{sha}"' in text
    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: Dist({"url": "file:///src/perfq",
                                                                              "dir_info": {"editable": True}}))
    res = cli(tmp_path, "ci", "init", "--force")
    assert res.returncode == EXIT_ERROR and "give --perfq-spec" in res.stderr


def _step_names(job: dict) -> list[str]:
    return [s.get("name") or s.get("uses", "").split("@")[0] for s in job["steps"]]


def test_init_for_an_out_of_tree_backend(tmp_path):
    from tests.oot_fixture import git as oot_git
    from tests.oot_fixture import make_oot_repo

    repo = make_oot_repo(tmp_path).path  # perfq.toml: upstream = "torch"
    (repo / "requirements.txt").write_text("pyyaml\ntorch==2.6.0  # the upstream this backend builds against\n")
    oot_git(repo, "add", "-A")
    oot_git(repo, "commit", "-qm", "pin torch")
    url = "https://wheels.example.org/torch_xpu_ops-{commit}-cp311-linux_x86_64.whl"
    init = run_perfq(repo, "ci", "init", "--perfq-spec", SPEC, "--wheel-url", url, "--stdout")
    assert init.returncode == 0, init.stderr
    assert "torch for the traced index: torch==2.6.0 (upstream of this backend: torch)" in init.stderr
    files = dict(re.findall(r"# ---- \.github/workflows/(\S+)\n(.*?)(?=# ---- |\Z)", init.stdout, re.S))
    flow = yaml.safe_load(files["perfq-benchmarks.yml"])
    assert flow["env"]["TORCH_SPEC"] == "torch==2.6.0" and flow["env"]["TORCH_INDEX"].endswith("/whl/cpu")
    assert "build" not in flow["jobs"]  # published per-commit wheels: nothing is built
    bench = flow["jobs"]["bench"]
    names = _step_names(bench)
    run_step = bench["steps"][-2]
    assert names.index("Install upstream torch (both sides' backend wheels run on it)") < names.index(run_step["name"])
    assert run_step["env"]["WHEEL_URL"] == url and "--head-ref HEAD^2" in run_step["run"]
    assert "--tag-filter" not in files["perfq-benchmarks.yml"]
    nightly = yaml.safe_load(files["perfq-nightly.yml"])
    assert nightly["env"]["TORCH_SPEC"] == "torch==2.6.0"

    # built per PR instead: each side's wheel is built once, against the upstream torch
    (repo / ".github/workflows").mkdir(parents=True)
    built = run_perfq(repo, "ci", "init", "--perfq-spec", SPEC, "--wheel-build", "python setup.py bdist_wheel")
    assert built.returncode == 0, built.stderr
    flow = yaml.safe_load((repo / ".github/workflows/perfq-benchmarks.yml").read_text())
    assert flow["jobs"]["build"]["strategy"]["matrix"] == {"side": ["base", "head"]}
    assert "Install upstream torch (the backend builds against it)" in _step_names(flow["jobs"]["build"])
    assert flow["jobs"]["bench"]["needs"] == ["select", "build"]
    # a PyTorch checkout (no upstream) installs nothing but perfq in the bench job: its wheel is torch
    pytorch = tmp_path / "pytorch"
    pytorch.mkdir()
    git(pytorch, "init", "-q")
    plain = run_perfq(pytorch, "ci", "init", "--perfq-spec", SPEC, "--stdout")
    assert plain.returncode == 0 and "Install upstream torch" not in plain.stdout and '"torch"' in plain.stdout


def test_cache_keys_fall_back_to_the_nearest_ancestor(tmp_path, cli):
    git(tmp_path, "init", "-q", "-b", "main")
    commits = []
    for i in range(4):
        (tmp_path / "f").write_text(str(i))
        git(tmp_path, "add", "-A")
        git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", str(i))
        commits.append(git(tmp_path, "rev-parse", "HEAD").strip())
    res = cli(tmp_path, "ci", "cache-key", "HEAD", "--ancestors", "2")
    assert res.returncode == 0, res.stderr
    outputs = parse_outputs(res.stdout)
    stem = outputs["key"][: -len(commits[3])]
    assert outputs["key"] == stem + commits[3] and stem.startswith("perfq-index-")
    assert outputs["restore-keys"].splitlines() == [stem + commits[2], stem + commits[1], stem]


def test_coverage_trend_adds_one_row_per_night(tmp_path, cli):
    report = tmp_path / "coverage.json"
    trend = tmp_path / "t/trend.json"
    for night, covered in (("2026-12-01", 40), ("2026-12-02", 43), ("2026-12-02", 44)):
        report.write_text(json.dumps({"summary": {"ops_total": 100, "ops_covered": covered,
                                                  "ops_ratio": covered / 100, "benchmarks": 7}, "ops": []}))
        res = cli(tmp_path, "ci", "coverage-trend", str(report), "--trend", str(trend), "--commit", "a" * 40,
                  "--date", night, "--markdown", str(tmp_path / "trend.md"))
        assert res.returncode == 0, res.stderr
    nights = json.loads(trend.read_text())["nights"]
    assert [(n["date"], n["ops_covered"]) for n in nights] == [("2026-12-01", 40), ("2026-12-02", 44)]
    assert "| 2026-12-02 | aaaaaaaaaaaa | 44 | 100 | 44.0% | +4 | 7 |" in (tmp_path / "trend.md").read_text()
    report.write_text("{}")
    bad = cli(tmp_path, "ci", "coverage-trend", str(report), "--trend", str(trend), "--commit", "a" * 40)
    assert bad.returncode == EXIT_ERROR and "not a `perfq coverage --format json` report" in bad.stderr


# a C++ extension project of our own: one file the PR leaves alone, one it changes
EXT_FILES = {
    "setup.py": """\
        from setuptools import Extension, setup

        setup(name="fastops", version="0.1", ext_modules=[Extension("fastops", ["fastops.cpp", "kernel.cpp"])])
        """,
    "requirements.txt": "setuptools>=70.1\n",
    "fastops.cpp": """\
        #include <Python.h>

        long kernel(long x);

        static PyObject *run(PyObject *, PyObject *arg) { return PyLong_FromLong(kernel(PyLong_AsLong(arg))); }
        static PyMethodDef methods[] = {{"run", run, METH_O, "kernel(x)"}, {nullptr, nullptr, 0, nullptr}};
        static PyModuleDef module = {PyModuleDef_HEAD_INIT, "fastops", nullptr, -1, methods};
        PyMODINIT_FUNC PyInit_fastops() { return PyModule_Create(&module); }
        """,
    "kernel.cpp": "long kernel(long x) { return x + 1; }\n",
}


def _only_job(workflow: Path, job: str, dest: Path) -> Path:
    """``workflow`` with ``job`` alone (its needs and condition dropped): the build path without the index."""
    flow = yaml.safe_load(workflow.read_text())
    spec = {k: v for k, v in flow["jobs"][job].items() if k not in ("needs", "if")}
    dest.write_text(yaml.safe_dump({**flow, "jobs": {job: spec}}, sort_keys=False))
    return dest


def _ccache_stats(store: Path) -> dict[str, int]:
    out = subprocess.run(["ccache", "--print-stats"], env={**os.environ, "CCACHE_DIR": str(store)},
                         capture_output=True, text=True, check=True).stdout
    stats = dict(line.split("\t") for line in out.splitlines() if "\t" in line)
    return {"hits": int(stats["direct_cache_hit"]) + int(stats["preprocessed_cache_hit"]),
            "misses": int(stats["cache_miss"])}


def _build_steps(result) -> dict[str, str]:
    return {s.name: s.outcome for s in result.steps}


def _run_wheel(wheel_dir: Path, python: Path, target: Path, arg: int) -> str:
    """``fastops.run(arg)`` from the built wheel (unpacked: a wheel is a zip of the installed files)."""
    zipfile.ZipFile(next(wheel_dir.glob("fastops-*.whl"))).extractall(target)
    return subprocess.run([str(python), "-c", f"import fastops; print(fastops.run({arg}))"], cwd=target,
                          capture_output=True, text=True, check=True).stdout.strip()


def test_the_build_job_compiles_a_cpp_extension_through_ccache_and_reuses_main(tmp_path):
    """The generated build steps, as written, on a C++ extension: the nightly build on main warms the compiler
    cache and leaves main's wheel; a PR on main restores that wheel as its base (no build) and builds its head
    from main's objects; the PR's second run compiles nothing (every compilation a ccache hit)."""
    if not shutil.which("ccache") or not shutil.which("g++"):
        pytest.skip("ccache and g++ are needed (scripts/test.sh installs ccache)")
    import setuptools

    if tuple(int(p) for p in setuptools.__version__.split(".")[:2]) < (70, 1):
        pytest.skip("setuptools < 70.1 cannot build a wheel without isolation (pip install -e '.[dev]')")
    origin = tmp_path / "origin"
    origin.mkdir()
    for name, text in EXT_FILES.items():
        (origin / name).write_text(textwrap.dedent(text))
    git(origin, "init", "-q", "-b", "main")
    for key in ("uploadpack.allowFilter", "uploadpack.allowAnySHA1InWant"):
        git(origin, "config", key, "true")
    files = render(WorkflowOptions(SPEC), "0.0.0")
    workflows = _write(origin, files)
    git(origin, "add", "-A")
    git(origin, "commit", "-qm", "fastops")
    main = git(origin, "rev-parse", "main").strip()
    nightly = _only_job(workflows / "perfq-nightly.yml", "build", tmp_path / "nightly-build.yml")
    pr_build = _only_job(workflows / "perfq-benchmarks.yml", "build", tmp_path / "pr-build.yml")
    venv = python_venv(tmp_path / "py")
    emu = Emulator(origin, tmp_path / "gha", venv)

    night, jobs = emu.run_workflow(nightly, "schedule", {}, main, "refs/heads/main")
    assert jobs["build"].result == "success", job_log(jobs["build"])
    assert _ccache_stats(emu.caches["ccache-perfq-build-1"]) == {"hits": 0, "misses": 2}
    assert f"perfq-wheel-py3.11-{main}" in emu.caches

    pr = open_pr(origin, 1, ("kernel.cpp", "x + 1", "x + 2"))
    for attempt, expected in enumerate(({"hits": 1, "misses": 1}, {"hits": 2, "misses": 0}), start=2):
        run, jobs = emu.run_workflow(pr_build, "pull_request", _pr_event(1, pr), pr["merge"], "refs/pull/1/merge")
        assert jobs["build"].result == "success", job_log(jobs["build"])
        steps = jobs["build"].steps  # the base entry's, then the head entry's
        base, head = steps[:len(steps) // 2], steps[len(steps) // 2:]
        assert next(s for s in base if s.name == "wheel").outputs["cache-hit"] == "true"  # main's wheel, not built
        assert [s.outcome for s in base if "ccache --zero-stats" in s.log] == []
        assert any("ccache --zero-stats" in s.log and s.outcome == "success" for s in head)
        assert _ccache_stats(emu.caches[f"ccache-perfq-build-{attempt}"]) == expected
        python = venv / "bin" / "python"
        assert _run_wheel(emu.artifacts[run]["wheel-base"], python, tmp_path / f"base{attempt}", 40) == "41"
        assert _run_wheel(emu.artifacts[run]["wheel-head"], python, tmp_path / f"head{attempt}", 40) == "42"
