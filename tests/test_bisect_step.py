"""`perfq bisect-step` as a `git bisect run` script: 0 good, 1 bad, 125 skip."""

from __future__ import annotations

import subprocess
import sys

from tests.bisect_fixture import git, make_repo
from tests.conftest import run_perfq

PY = sys.executable


def step(repo, *args: str) -> subprocess.CompletedProcess:
    return run_perfq(repo, "bisect-step", *args, timeout=60)


def test_exit_codes_at_good_bad_and_broken_commits(tmp_path):
    r = make_repo(tmp_path, n=6, culprit=4, broken=(2,))
    cmd = ["--good-value", "10", "--bad-value", "13", "--", PY, "bench.py"]
    git(r.path, "checkout", "-q", r.commits[1])
    assert step(r.path, *cmd).returncode == 0
    git(r.path, "checkout", "-q", r.commits[5])
    res = step(r.path, *cmd)
    assert res.returncode == 1 and "bad" in res.stderr
    git(r.path, "checkout", "-q", r.commits[2])
    res = step(r.path, *cmd)
    assert res.returncode == 125 and "benchmark failed" in res.stderr
    # An absolute threshold with the polarity inferred from the unit (ms: lower is better).
    git(r.path, "checkout", "-q", r.commits[5])
    assert step(r.path, "--threshold-value", "11.5", "--", PY, "bench.py").returncode == 1
    # A value right at the threshold stays ambiguous after the extra runs: skip, not a guess.
    res = step(r.path, "--good-value", "10", "--bad-value", "20", "--", PY, "bench.py")
    assert res.returncode == 125 and "ambiguous" in res.stderr


def test_usage_error_aborts_git_bisect(tmp_path):
    r = make_repo(tmp_path, n=2, culprit=2)
    res = step(r.path, "--", PY, "bench.py")
    assert res.returncode == 128 and "--good-value" in res.stderr


def test_drives_git_bisect_run_to_the_culprit(tmp_path):
    r = make_repo(tmp_path, n=12, culprit=7, broken=(3,))
    git(r.path, "bisect", "start", r.commits[-1], r.commits[0])
    run = subprocess.run(["git", "bisect", "run", PY, "-m", "perfq", "bisect-step", "--good-value", "10",
                          "--bad-value", "13", "--", PY, "bench.py"], cwd=r.path, capture_output=True,
                         text=True, timeout=120)
    git(r.path, "bisect", "reset")
    assert f"{r.culprit} is the first bad commit" in run.stdout, run.stdout + run.stderr
    assert r.head_branch() == "main"
