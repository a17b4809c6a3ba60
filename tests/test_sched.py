"""Real-time scheduling of benchmark processes (perfq.common.sched, `perfq run --priority`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import duckdb
import pytest

from perfq.common import proc, sched
from perfq.errors import PerfqError
from perfq.run import execute as runner
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
    assert runner.realtime_scheduling(sched.Priority.auto, notes) is False
    assert len(notes) == 1 and notes[0].startswith("benchmarks ran at normal priority") and "prlimit" in notes[0]
    with pytest.raises(PerfqError, match="^--priority realtime: real-time scheduling is not permitted here"):
        runner.realtime_scheduling(sched.Priority.realtime, [])
    assert runner.realtime_scheduling(sched.Priority.normal, []) is False


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
    assert "note: benchmarks ran at normal priority" in auto.stderr
    con = duckdb.connect(str(tmp_path / "h.duckdb"), read_only=True)
    (env,) = con.execute("SELECT env FROM runs").fetchone()
    con.close()
    assert json.loads(env)["scheduling"] == "normal (SCHED_OTHER)"
