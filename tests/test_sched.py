"""Real-time scheduling of benchmark processes (common.sched, `perfq run --priority`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from common import proc, sched
from common.errors import PerfqError
from perfq.run import execute as runner
from tests.bisect_fixture import make_repo
from tests.conftest import run_perfq
from tests.run_fakebench import make_bench_root
from tests.test_run_exec import plan_for

PY = sys.executable
PERMITTED = not sched.realtime_problem()
needs_realtime = pytest.mark.skipif(not PERMITTED, reason="real-time scheduling is not permitted here")
# the same machine with CAP_SYS_NICE dropped: what a CI user without privileges has
UNPRIVILEGED = ["setpriv", "--inh-caps=-sys_nice", "--bounding-set=-sys_nice"]
needs_setpriv = pytest.mark.skipif(shutil.which("setpriv") is None or not PERMITTED,
                                   reason="needs setpriv and a privilege to drop")


@needs_realtime
def test_a_realtime_child_runs_under_sched_fifo_and_perfq_stays_normal():
    code = "import os; print(os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)"
    assert proc.run([PY, "-c", code], realtime=True).stdout.split() == [str(os.SCHED_FIFO), str(sched.FIFO_PRIORITY)]
    assert proc.run([PY, "-c", code]).stdout.split() == [str(os.SCHED_OTHER), "0"]
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the probe put perfq back


def test_auto_without_permission_notes_normal_priority_and_realtime_is_an_error(monkeypatch):
    def refuse(*_args):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    notes: list[str] = []
    assert sched.use_realtime(sched.Priority.auto, notes) is False
    assert len(notes) == 1 and notes[0].startswith("benchmarks ran at normal priority") and "prlimit" in notes[0]
    with pytest.raises(PerfqError, match="^--priority realtime: real-time scheduling is not permitted here"):
        sched.use_realtime(sched.Priority.realtime, [])
    assert sched.use_realtime(sched.Priority.normal, []) is False


@needs_realtime
def test_a_realtime_run_schedules_every_benchmark_process_and_records_it(tmp_path):
    root = make_bench_root(tmp_path)
    seen = tmp_path / "sched.txt"
    env = [("FAKE_SCHED_FILE", str(seen))]
    runner.execute(plan_for(tmp_path, root, base_env=env, head_env=env, repeat=2, realtime=True))
    assert seen.read_text().split() == [str(os.SCHED_FIFO)] * 4  # 2 rounds x 2 sides
    con = duckdb.connect(str(tmp_path / "h.duckdb"), read_only=True)
    envs = [json.loads(e) for (e,) in con.execute("SELECT env FROM runs ORDER BY side").fetchall()]
    con.close()
    assert [e["scheduling"] for e in envs] == [f"SCHED_FIFO {sched.FIFO_PRIORITY}"] * 2


@needs_setpriv
def test_without_the_privilege_the_cli_says_so_in_one_line(tmp_path):
    root = make_bench_root(tmp_path)
    argv = [*UNPRIVILEGED, PY, "-m", "perfq", "run", "--label", "x", "--side", "head", "--bench", "fake",
            "--bench-root", str(root), "--repo", str(tmp_path), "--history", str(tmp_path / "h.duckdb")]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    strict = subprocess.run([*argv, "--priority", "realtime"], capture_output=True, text=True, check=False)
    assert strict.returncode == 4 and strict.stderr.count("\n") == 1, strict.stderr
    assert strict.stderr.startswith("error: --priority realtime: real-time scheduling is not permitted here")
    auto = subprocess.run(argv, capture_output=True, text=True, check=False, env={**os.environ, "CI": "true"})
    assert auto.returncode == 0, auto.stderr
    said = auto.stderr.splitlines()
    normal = "priority: normal (SCHED_OTHER, real-time scheduling is not permitted"
    assert sum(line.startswith(normal) for line in said) == 1
    assert not any("ran at normal priority" in line for line in said), auto.stderr  # said once, not twice
    broken = [*argv[: argv.index("--side")], "--ab", "--base-python", str(tmp_path / "no-python"), "--head-python", PY,
              *argv[argv.index("--side") + 2:]]
    refused = subprocess.run(broken, capture_output=True, text=True, check=False)
    assert refused.returncode == 4 and refused.stderr.count("\n") == 1, refused.stderr  # before the rounds: one line
    con = duckdb.connect(str(tmp_path / "h.duckdb"), read_only=True)
    (env,) = con.execute("SELECT env FROM runs").fetchone()
    con.close()
    assert json.loads(env)["scheduling"] == "normal (SCHED_OTHER)"


def _sched_logging(log: Path) -> list[str]:
    """A bisect command that appends its scheduling policy to ``log``, then runs the fixture's bench.py."""
    code = (f"import os, runpy; open({str(log)!r}, 'a').write(f'{{os.sched_getscheduler(0)}}\\n');"
            " runpy.run_path('bench.py')")
    return [PY, "-c", code]


@needs_realtime
@pytest.mark.parametrize("priority", ["realtime", "normal"])
def test_bisect_runs_the_benchmark_under_the_asked_priority(tmp_path, priority):
    repo = make_repo(tmp_path, n=6, culprit=3)
    log = tmp_path / "policies.txt"
    res = run_perfq(repo.path, "bisect", repo.commits[0], "--priority", priority, "--format", "json",
                    "--history", str(tmp_path / "h.duckdb"), "--", *_sched_logging(log))
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["first_bad"]["commit"] == repo.culprit  # the bisection itself is unchanged
    policy = os.SCHED_FIFO if priority == "realtime" else os.SCHED_OTHER
    runs = log.read_text().split()
    assert len(runs) >= 6 and set(runs) == {str(policy)}
    assert ("benchmark runs under SCHED_FIFO 1" in res.stderr) == (priority == "realtime")


@needs_realtime
def test_bisect_step_judges_a_run_under_sched_fifo(tmp_path):
    """The metric is the run's own scheduling policy: above 0.5 (FIFO is 1) means it ran real-time."""
    code = "import os; print('policy', os.sched_getscheduler(0))"
    argv = [PY, "-m", "perfq", "bisect-step", "--threshold-value", "0.5", "--lower-is-better",
            "--metric", r"policy (\d+)", "--runs", "1"]
    for priority, verdict in (("realtime", 1), ("normal", 0)):  # 1: bad (FIFO), 0: good (normal)
        res = subprocess.run([*argv, "--priority", priority, "--", PY, "-c", code], cwd=tmp_path,
                             capture_output=True, text=True, check=False)
        assert res.returncode == verdict, (priority, res.stderr)


@needs_setpriv
def test_bisect_without_the_privilege_notes_normal_priority_or_refuses(tmp_path):
    repo = make_repo(tmp_path, n=3, culprit=2)
    argv = [*UNPRIVILEGED, PY, "-m", "perfq", "bisect", repo.commits[0], "--history", str(tmp_path / "h.duckdb")]
    strict = subprocess.run([*argv, "--priority", "realtime", "--", PY, "bench.py"], cwd=repo.path,
                            capture_output=True, text=True, check=False)
    assert strict.returncode == 4 and strict.stderr.count("\n") == 1, strict.stderr
    assert strict.stderr.startswith("error: --priority realtime: real-time scheduling is not permitted here")
    auto = subprocess.run([*argv, "--", PY, "bench.py"], cwd=repo.path, capture_output=True, text=True, check=False)
    assert auto.returncode == 0, auto.stderr
    assert "note: the benchmark runs ran at normal priority" in auto.stderr
