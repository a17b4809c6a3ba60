"""`perfq bisect` survives its own death: after kill -9 mid-bisect, `--resume` returns to the original
branch and re-applies the autostash; a refused bisect leaves no session; `--build` is an argv."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import duckdb

from perfq.options import EXIT_ERROR
from tests.bisect_fixture import BENCH, git, make_repo
from tests.conftest import run_perfq as perfq

PY = sys.executable
# the fixture's benchmark, but it kills perfq (its parent) with SIGKILL at one commit, once
KILLER = BENCH.replace("os.kill(os.getppid(), signal.SIGINT)", "os.kill(os.getppid(), signal.SIGKILL)")


def _dirty(repo: Path) -> None:
    (repo / "n.txt").write_text("my unsaved edit\n")
    (repo / "speed.txt").write_text("10.0\n# staged note\n")
    git(repo, "add", "speed.txt")


def _assert_restored(repo: Path, head: str) -> None:
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "main"
    assert git(repo, "rev-parse", "HEAD") == head
    assert (repo / "n.txt").read_text() == "my unsaved edit\n"
    assert git(repo, "diff", "--cached", "--name-only") == "speed.txt"
    assert git(repo, "stash", "list") == ""


def test_resume_after_kill_9_restores_branch_and_autostash(tmp_path: Path):
    r = make_repo(tmp_path, n=16, culprit=11)
    head = git(r.path, "rev-parse", "HEAD")
    _dirty(r.path)
    killer = tmp_path / "killer.py"  # outside the repo: the same at every commit
    killer.write_text(KILLER)
    env = {"BENCH_INTERRUPT_AT": r.commits[8], "BENCH_INTERRUPT_MARKER": str(tmp_path / "marker")}
    history = str(tmp_path / "h.duckdb")
    crashed = perfq(r.path, "bisect", r.commits[0], "--yes", "--history", history, "--", PY, str(killer), env=env)
    assert crashed.returncode == -9 and (tmp_path / "marker").exists(), crashed.stderr
    # what kill -9 leaves: a detached checkout of some tested commit, the user's changes in the stash
    assert git(r.path, "rev-parse", "--abbrev-ref", "HEAD") == "HEAD"
    assert "perfq bisect autostash" in git(r.path, "stash", "list")

    res = perfq(r.path, "bisect", "--resume", "--yes", "--format", "json", "--history", history, env=env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["first_bad"]["commit"] == r.culprit
    assert "replayed from the stored session" in res.stderr
    _assert_restored(r.path, head)


def test_resume_after_kill_9_from_a_detached_head(tmp_path: Path):
    r = make_repo(tmp_path, n=12, culprit=7)
    git(r.path, "checkout", "-q", "--detach", r.commits[-1])
    killer = tmp_path / "killer.py"
    killer.write_text(KILLER)
    env = {"BENCH_INTERRUPT_AT": r.commits[6], "BENCH_INTERRUPT_MARKER": str(tmp_path / "marker")}
    history = str(tmp_path / "h.duckdb")
    assert perfq(r.path, "bisect", r.commits[0], "--history", history, "--", PY, str(killer), env=env).returncode == -9
    res = perfq(r.path, "bisect", "--resume", "--history", history, env=env)
    assert res.returncode == 0, res.stderr
    assert git(r.path, "rev-parse", "HEAD") == r.commits[-1]
    assert git(r.path, "rev-parse", "--abbrev-ref", "HEAD") == "HEAD"


def test_a_refused_bisect_leaves_no_session(tmp_path: Path):
    r = make_repo(tmp_path, n=4, culprit=2)
    (r.path / "n.txt").write_text("edit\n")
    history = str(tmp_path / "h.duckdb")
    refused = perfq(r.path, "bisect", r.commits[0], "--history", history, "--", PY, "bench.py")
    assert refused.returncode == EXIT_ERROR and "--yes" in refused.stderr
    resume = perfq(r.path, "bisect", "--resume", "--history", history)
    assert resume.returncode == EXIT_ERROR and "no interrupted bisect session" in resume.stderr
    git(r.path, "checkout", "-q", "n.txt")
    fresh = perfq(r.path, "bisect", r.commits[0], "--history", history, "--", PY, "bench.py")
    assert fresh.returncode == 0, fresh.stderr
    assert "an interrupted session exists" not in fresh.stderr


def test_build_is_an_argv_never_a_shell(tmp_path: Path):
    r = make_repo(tmp_path, n=6, culprit=3)
    builder = tmp_path / "build.py"
    builder.write_text("import sys\nopen(sys.argv[1], 'a').write(repr(sys.argv[2:]) + '\\n')\n")
    log = tmp_path / "build.log"
    history = tmp_path / "h.duckdb"
    build = f"{PY} {builder} {log} '$HOME' 'two words' `id`"
    res = perfq(r.path, "bisect", r.commits[0], "--build", build, "--history", str(history), "--", PY, "bench.py")
    assert res.returncode == 0, res.stderr
    lines = log.read_text().splitlines()
    assert lines and set(lines) == {repr(["$HOME", "two words", "`id`"])}  # nothing expanded by a shell
    con = duckdb.connect(str(history), read_only=True)
    stored = con.execute("SELECT build FROM bisect_sessions").fetchone()[0]
    con.close()
    assert json.loads(stored) == [PY, str(builder), str(log), "$HOME", "two words", "`id`"]


def test_shell_operators_in_build_are_a_one_line_error(tmp_path: Path, cli):
    r = make_repo(tmp_path, n=4, culprit=2)
    for build in ("make && make install", "echo built >> n.txt", "test $(git rev-parse HEAD) != x", "a | b"):
        res = cli(r.path, "bisect", r.commits[0], "--build", build, "--history", str(tmp_path / "h.duckdb"),
                  "--", PY, "bench.py")
        assert res.returncode == EXIT_ERROR, (build, res.stderr)
        assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1 and "sh -c" in res.stderr
    unbalanced = cli(r.path, "bisect", r.commits[0], "--build", "echo 'open", "--", PY, "bench.py")
    assert unbalanced.returncode == EXIT_ERROR and unbalanced.stderr.count("\n") == 1
