"""`perfq bisect` end to end on small temp git repos: the found commit, restoration of the
branch and the dirty tree, skips, merges, output formats and error cases."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from common.errors import PerfqError
from perfq.cli import app
from perfq.options import EXIT_ERROR, EXIT_GATE
from query.document import AffectedDoc
from tests.affected_docs import affected_doc, selected
from tests.bisect_fixture import git, make_repo
from tests.conftest import run_perfq as perfq

PY = sys.executable


def invoke(repo: Path, *args: str):
    """Run the CLI in-process; returns (exit_code, stdout, stderr, exception)."""
    old = Path.cwd()
    os.chdir(repo)
    try:
        res = CliRunner().invoke(app, list(args))
    finally:
        os.chdir(old)
    return res.exit_code, res.stdout, res.stderr, res.exception


def test_finds_the_commit_and_restores_branch_and_dirty_tree(tmp_path):
    r = make_repo(tmp_path, n=16, culprit=11, broken=(4,))
    head = git(r.path, "rev-parse", "HEAD")
    (r.path / "n.txt").write_text("my unsaved edit\n")
    (r.path / "speed.txt").write_text("10.0\n# staged note\n")
    git(r.path, "add", "speed.txt")
    res = perfq(r.path, "bisect", r.commits[0], "--yes", "--format", "json", "--history",
                str(tmp_path / "h.duckdb"), "--", PY, "bench.py")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["first_bad"]["commit"] == r.culprit
    assert doc["first_bad"]["subject"] == "c11: change 11"
    assert doc["last_good"]["commit"] == r.commits[10]
    assert doc["first_bad"]["value"] > 12 and doc["last_good"]["value"] < 11
    assert {"commit", "values", "verdict"} <= set(doc["steps"][0])
    assert doc["runs"] >= 6 and isinstance(doc["skipped"], list)
    assert {"path": "kernel.py", "added": 3, "removed": 0} in doc["files"]
    assert {"sync", "load-in-loop"} <= {h["kind"] for h in doc["hints"]}
    assert "stashing uncommitted changes" in res.stderr and "restored main" in res.stderr
    # Branch, commit, unstaged and staged changes are back; no stash is left behind.
    assert r.head_branch() == "main" and git(r.path, "rev-parse", "HEAD") == head
    assert (r.path / "n.txt").read_text() == "my unsaved edit\n"
    assert git(r.path, "diff", "--cached", "--name-only") == "speed.txt"
    assert git(r.path, "stash", "list") == ""


def test_dirty_tree_without_consent_is_refused_untouched(tmp_path):
    r = make_repo(tmp_path, n=4, culprit=2)
    (r.path / "n.txt").write_text("edit\n")
    res = perfq(r.path, "bisect", r.commits[0], "--history", str(tmp_path / "h.duckdb"), "--", PY, "bench.py")
    assert res.returncode == EXIT_ERROR
    assert res.stderr.strip().splitlines()[-1].startswith("error: ") and "--yes" in res.stderr
    assert (r.path / "n.txt").read_text() == "edit\n" and r.head_branch() == "main"


def test_detached_head_is_restored_and_bad_defaults_to_head(tmp_path):
    r = make_repo(tmp_path, n=12, culprit=7)
    git(r.path, "checkout", "-q", "--detach", r.commits[10])
    code, out, err, exc = invoke(r.path, "bisect", r.commits[2], "--format", "json", "--history",
                                 str(tmp_path / "h.duckdb"), "--", PY, "bench.py")
    assert code == 0, (err, exc)
    doc = json.loads(out)
    assert doc["range"]["bad"] == r.commits[10] and doc["range"]["commits"] == 8
    assert doc["first_bad"]["commit"] == r.culprit
    assert git(r.path, "rev-parse", "HEAD") == r.commits[10]
    assert subprocess.run(["git", "symbolic-ref", "-q", "HEAD"], cwd=r.path).returncode != 0


def test_broken_commits_are_skipped(tmp_path):
    r = make_repo(tmp_path, n=16, culprit=12, broken=(8, 9))
    code, out, err, exc = invoke(r.path, "bisect", r.commits[0], "--format", "json", "--history",
                                 str(tmp_path / "h.duckdb"), "--", PY, "bench.py")
    assert code == 0, (err, exc)
    doc = json.loads(out)
    assert doc["first_bad"]["commit"] == r.culprit
    assert r.commits[8] in doc["skipped"]
    assert any(s["verdict"] == "skip" and s["commit"] == r.commits[8] for s in doc["steps"])
    assert "broken build" in err


def test_merge_first_parent_then_all_parents_descends(tmp_path):
    r = make_repo(tmp_path, n=10, merge_at=6, culprit_on_side=True)
    hist = str(tmp_path / "h.duckdb")
    code, out, err, exc = invoke(r.path, "bisect", r.commits[0], "--format", "json", "--history", hist,
                                 "--", PY, "bench.py")
    assert code == 0, (err, exc)
    doc = json.loads(out)
    assert doc["first_bad"]["commit"] == r.merge  # first-parent: the merge brought it in
    assert not set(r.side) & {s["commit"] for s in doc["steps"]}
    code, out, err, exc = invoke(r.path, "bisect", r.commits[0], "--all-parents", "--format", "json",
                                 "--history", hist, "--", PY, "bench.py")
    assert code == 0, (err, exc)
    doc = json.loads(out)
    assert doc["first_bad"]["commit"] == r.culprit == r.side[1]
    assert doc["via_merge"] == r.merge and doc["last_good"]["commit"] == r.side[0]


def test_interrupt_restores_then_resume_continues(tmp_path):
    r = make_repo(tmp_path, n=16, culprit=11)
    (r.path / "n.txt").write_text("dirty\n")
    env = {"BENCH_INTERRUPT_AT": r.commits[8], "BENCH_INTERRUPT_MARKER": str(tmp_path / "marker")}
    res = perfq(r.path, "bisect", r.commits[0], "--yes", "--", PY, "bench.py", env=env)
    assert (tmp_path / "marker").exists()
    assert res.returncode == 130, res.stderr
    assert "--resume" in res.stderr.strip().splitlines()[-1]
    assert r.head_branch() == "main" and (r.path / "n.txt").read_text() == "dirty\n"
    assert git(r.path, "stash", "list") == ""
    hint = perfq(r.path, "bisect", "HEAD", "HEAD", "--", PY, "bench.py")
    assert "an interrupted session exists" in hint.stderr and hint.returncode == EXIT_ERROR
    res = perfq(r.path, "bisect", "--resume", "--yes", "--format", "json", env=env)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["first_bad"]["commit"] == r.culprit
    assert "replayed from the stored session" in res.stderr
    assert r.head_branch() == "main" and (r.path / "n.txt").read_text() == "dirty\n"
    # The session is finished: nothing left to resume.
    res = perfq(r.path, "bisect", "--resume")
    assert res.returncode == EXIT_ERROR and "no interrupted bisect session" in res.stderr


def test_text_and_markdown_reports(tmp_path):
    r = make_repo(tmp_path, n=6, culprit=3)
    hist = str(tmp_path / "h.duckdb")
    code, out, err, exc = invoke(r.path, "bisect", r.commits[0], "--history", hist, "--", PY, "bench.py")
    assert code == 0, (err, exc)
    assert f"first bad commit: {r.culprit}" in out and "c3: change 3" in out
    assert "sync:" in out and "kernel.py" in out and "lower is better (inferred from the unit ms)" in out
    # Everything after `--` belongs to the benchmark, even options perfq also has.
    code, out, err, exc = invoke(r.path, "bisect", r.commits[0], "--format", "markdown", "--history", hist,
                                 "--", PY, "bench.py", "--format", "json", "--runs", "9")
    assert code == 0 and out.startswith("## perfq bisect") and f"`{r.culprit}`" in out
    assert "| phase | commit | verdict | values |" in out


def test_noise_sized_difference_stops(tmp_path):
    r = make_repo(tmp_path, n=6, culprit=3, slow=10.1)
    res = perfq(r.path, "bisect", r.commits[0], "--format", "json", "--history", str(tmp_path / "h.duckdb"),
                "--", PY, "bench.py")
    assert res.returncode == EXIT_GATE
    doc = json.loads(res.stdout)
    assert doc["status"] == "noise" and "possibly noise" in doc["message"] and doc["first_bad"] is None


@pytest.mark.parametrize("case", ["not-git", "unknown", "same", "swapped", "no-command"])
def test_errors_are_one_line(tmp_path, case):
    r = make_repo(tmp_path, n=3, culprit=2)
    where, args = r.path, [r.commits[0], "--", PY, "bench.py"]
    if case == "not-git":
        where = tmp_path / "plain"
        where.mkdir()
    elif case == "unknown":
        args = ["no-such-ref", "--", PY, "bench.py"]
    elif case == "same":
        args = ["HEAD", "HEAD", "--", PY, "bench.py"]
    elif case == "swapped":
        args = ["HEAD", r.commits[0], "--", PY, "bench.py"]
    elif case == "no-command":
        args = [r.commits[0]]
    res = perfq(where, "bisect", *args, "--history", str(tmp_path / "h.duckdb"))
    assert res.returncode == EXIT_ERROR
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in res.stderr
    expected = {"not-git": "not inside a git repository", "unknown": "unknown commit 'no-such-ref'",
                "same": "empty range", "swapped": "empty range", "no-command": "after `--`"}[case]
    assert expected in lines[0]
    assert r.head_branch() == "main"


def _fake_affected(touching: set[str], calls: list[str]):
    def affected_for_range(repo: Path, rev_range: str, db: Path | None = None) -> AffectedDoc:
        calls.append(rev_range)
        names = set(git(repo, "diff", "--name-only", *rev_range.split("..")).split())
        hit = bool(names & touching)
        return affected_doc((selected("bench"),) if hit else ())

    return affected_for_range


def test_prune_runs_only_commits_that_can_reach_the_benchmark(tmp_path, monkeypatch):
    r = make_repo(tmp_path, n=16, culprit=11)
    calls: list[str] = []
    fake = _fake_affected({"speed.txt", "kernel.py"}, calls)
    monkeypatch.setattr("perfq.bisect.driver.affected_for_range", fake)
    hist = str(tmp_path / "h.duckdb")
    code, out, err, exc = invoke(r.path, "bisect", r.commits[0], "--prune", "--format", "json", "--history",
                                 hist, "--", PY, "bench.py")
    assert code == 0, (err, exc)
    doc = json.loads(out)
    assert doc["first_bad"]["commit"] == r.culprit
    assert doc["pruned"]["commits"] == 14 and doc["pruned"]["runs_saved_estimate"] > 0
    tested = {s["commit"] for s in doc["steps"]}
    assert tested <= {r.commits[0], r.culprit, r.commits[-1]}
    assert len(calls) == 16
    code, out2, err, exc = invoke(r.path, "bisect", r.commits[0], "--format", "json", "--history", hist,
                                  "--", PY, "bench.py")
    assert json.loads(out2)["runs"] > doc["runs"]


def test_prune_without_an_index_is_a_clear_error(tmp_path, monkeypatch):
    r = make_repo(tmp_path, n=3, culprit=2)

    def no_index(repo, rev_range, db=None):
        raise PerfqError("no index at /x/index.duckdb")

    monkeypatch.setattr("perfq.bisect.driver.affected_for_range", no_index)
    code, out, err, exc = invoke(r.path, "bisect", r.commits[0], "--prune", "--history",
                                 str(tmp_path / "h.duckdb"), "--", PY, "bench.py")
    assert isinstance(exc, PerfqError) and "perfq index" in str(exc)
    assert r.head_branch() == "main"


def test_operator_benchmark_option(tmp_path):
    add_test = ("from pathlib import Path\n"
                "s = float((Path(__file__).resolve().parents[3] / 'speed.txt').read_text())\n"
                "for k in (1, 2):\n"
                "    print(f'# Name: add_{k}\\nForward Execution Time (us) : {s * k:.3f}')\n")
    r = make_repo(tmp_path, n=8, culprit=5, files={"benchmarks/operator_benchmark/pt/add_test.py": add_test})
    code, out, err, exc = invoke(r.path, "bisect", r.commits[0], "--benchmark", "add_test", "--format",
                                 "json", "--history", str(tmp_path / "h.duckdb"))
    assert code == 0, (err, exc)
    doc = json.loads(out)
    assert doc["first_bad"]["commit"] == r.culprit
    assert doc["baseline"]["good"] == pytest.approx(30.0)  # 10 us + 20 us: summed over the tests
    assert doc["baseline"]["bad"] == pytest.approx(39.0)
    code, out, err, exc = invoke(r.path, "bisect", r.commits[0], "--benchmark", "add_test", "--test-name",
                                 "add_2", "--format", "json", "--history", str(tmp_path / "h.duckdb"))
    assert code == 0, (err, exc)
    assert json.loads(out)["baseline"]["good"] == pytest.approx(10.0)  # the runner was given one test


def test_build_step_that_edits_tracked_files_and_untracked_files_survive(tmp_path):
    r = make_repo(tmp_path, n=10, culprit=6, broken=(3,))
    (r.path / "untracked_notes.txt").write_text("keep me\n")
    code, out, err, exc = invoke(r.path, "bisect", r.commits[0], "--build", "sh -c 'echo built >> n.txt'",
                                 "--format", "json", "--history", str(tmp_path / "h.duckdb"),
                                 "--", PY, "bench.py")
    assert code == 0, (err, exc)
    doc = json.loads(out)
    assert doc["first_bad"]["commit"] == r.culprit
    assert "building" in err
    assert (r.path / "untracked_notes.txt").read_text() == "keep me\n"
    assert git(r.path, "status", "--porcelain", "--untracked-files=no") == ""
    assert r.head_branch() == "main"


def test_failing_build_skips_the_commit(tmp_path):
    r = make_repo(tmp_path, n=8, culprit=5)
    build = f"sh -c 'test $(git rev-parse HEAD) != {r.commits[4]}'"
    code, out, err, exc = invoke(r.path, "bisect", r.commits[0], "--build", build, "--format", "json",
                                 "--history", str(tmp_path / "h.duckdb"), "--", PY, "bench.py")
    assert code == 0, (err, exc)
    doc = json.loads(out)
    assert doc["skipped"] == [r.commits[4]] and "build failed" in err
    assert doc["status"] == "ambiguous" and doc["suspects"] == [r.commits[4], r.culprit]


def test_a_benchmark_that_deletes_tracked_files_finds_them_restored_at_each_step(tmp_path):
    """Issue 37: a benchmark deleting a tracked file (here the speed.txt it reads) left it deleted for
    every later step (each then failed); the tracked files are restored before each step, with a warning."""
    r = make_repo(tmp_path, n=16, culprit=11)
    deleting = "exec(open('bench.py').read()); import os; os.remove('speed.txt')"
    res = perfq(r.path, "bisect", r.commits[0], "--format", "json", "--history", str(tmp_path / "h.duckdb"),
                "--", PY, "-c", deleting)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["first_bad"]["commit"] == r.culprit
    assert "changed 1 tracked file(s) (speed.txt): restored as committed before this step" in res.stderr
    assert (r.path / "speed.txt").exists() and r.head_branch() == "main"
