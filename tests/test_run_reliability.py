"""Faults around `perfq run` and the results history: readers during a run, bad bytes, crashed sides,
unwritable outputs. Each test reproduces the fault with real processes where it matters."""

from __future__ import annotations

import os
import subprocess
import sys

import duckdb

from tests.run_fakebench import ALL_TESTS_SHORT, make_bench_root

PY = sys.executable


def _perfq_argv(*args: str) -> list[str]:
    return [PY, "-m", "perfq", *args]


def test_readers_never_disturb_a_running_perfq_run(tmp_path):
    """`perfq history` and `perfq compare` looping while a real `perfq run --ab` writes: the run finishes."""
    root = make_bench_root(tmp_path)
    hist = tmp_path / "h.duckdb"
    common = ["--history", str(hist), "--repo", str(tmp_path)]
    repeat = 12
    env = {**os.environ, "CI": "true"}
    run = subprocess.Popen(
        _perfq_argv("run", "--label", "C", "--ab", "--bench", "fake", "--bench-root", str(root),
                    "--repeat", str(repeat), "--base-python", PY, "--head-python", PY, *common),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    reads = {"ok": 0, "other": []}
    while run.poll() is None:
        for args in (("history", "fake_test"), ("compare", "C", "--format", "json")):
            res = subprocess.run(_perfq_argv(*args, *common), capture_output=True, text=True, env=env, timeout=120)
            if res.returncode == 0:
                reads["ok"] += 1
            else:
                reads["other"].append(res.stderr.strip())
    out, err = run.communicate()
    assert run.returncode == 0, err
    assert "Traceback" not in err and "locked" not in err
    # readers either read or found nothing stored yet; never a traceback, never a lock error
    assert all("Traceback" not in e and "locked" not in e for e in reads["other"]), reads["other"]
    assert reads["ok"] > 0
    con = duckdb.connect(str(hist), read_only=True)
    try:
        assert con.execute("SELECT DISTINCT status FROM runs").fetchall() == [("complete",)]
        assert con.execute("SELECT count(*) FROM samples").fetchone()[0] == 2 * repeat * len(ALL_TESTS_SHORT)
    finally:
        con.close()
