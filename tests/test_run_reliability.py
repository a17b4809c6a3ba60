"""Faults around `perfq run` and the results history: readers during a run, bad bytes, crashed sides,
unwritable outputs. Each test reproduces the fault with real processes where it matters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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


def _run_args(root: Path, tmp: Path, label: str, *extra: str) -> list[str]:
    return ["run", "--label", label, "--bench", "fake", "--bench-root", str(root), "--repeat", "5",
            "--history", str(tmp / "h.duckdb"), "--repo", str(tmp), *extra]


def _ab(*extra: str) -> list[str]:
    return ["--ab", "--base-python", PY, "--head-python", PY, *extra]


def _stored_statuses(hist: Path) -> set[str]:
    con = duckdb.connect(str(hist), read_only=True)
    try:
        return {r[0] for r in con.execute("SELECT status FROM runs").fetchall()}
    finally:
        con.close()


def test_invalid_utf8_in_benchmark_output_is_measured_not_a_crash(tmp_path, perfq):
    root = make_bench_root(tmp_path)
    res = perfq(tmp_path, *_run_args(root, tmp_path, "bytes", *_ab()), env={"FAKE_BAD_BYTES": "1", "CI": "true"})
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr and "UnicodeDecodeError" not in res.stderr
    con = duckdb.connect(str(tmp_path / "h.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM samples").fetchone()[0] == 2 * 5 * len(ALL_TESTS_SHORT)
    finally:
        con.close()
    assert _stored_statuses(tmp_path / "h.duckdb") == {"complete"}


def test_a_crashed_side_fails_the_gate_in_every_format(tmp_path, cli):
    root = make_bench_root(tmp_path)
    hist = ["--history", str(tmp_path / "h.duckdb"), "--repo", str(tmp_path)]
    res = cli(tmp_path, *_run_args(root, tmp_path, "crash", *_ab("--head-env", "FAKE_FAIL=1")))
    assert res.returncode == 3 and "fake kernel exploded" in res.stderr + res.stdout
    doc = json.loads(cli(tmp_path, "compare", "crash", "--format", "json", *hist).stdout)
    assert doc["summary"]["failed"] == len(ALL_TESTS_SHORT) and doc["summary"]["regression"] == 0
    assert {t["verdict"] for t in doc["tests"]} == {"failed"}
    assert any("fake_test" in p and "head" in p for p in doc["problems"])
    md = cli(tmp_path, "compare", "crash", "--format", "markdown", *hist).stdout
    assert md.startswith(":red_circle:") and "failed on the head side" in md and "fake kernel exploded" in md
    table = cli(tmp_path, "compare", "crash", *hist)
    assert table.returncode == 0 and "failed on head" in table.stdout and "fake_test" in table.stdout
    assert cli(tmp_path, "compare", "crash", "--fail-on-regression", *hist).returncode == 3


def test_every_benchmark_crashing_is_not_green(tmp_path, cli):
    root = make_bench_root(tmp_path)
    hist = ["--history", str(tmp_path / "h.duckdb"), "--repo", str(tmp_path)]
    res = cli(tmp_path, *_run_args(root, tmp_path, "all", *_ab("--base-env", "FAKE_FAIL=1", "--head-env",
                                                                 "FAKE_FAIL=1")))
    assert res.returncode == 3
    doc = json.loads(cli(tmp_path, "compare", "all", "--format", "json", *hist).stdout)
    assert doc["tests"] == [] and len(doc["problems"]) == 2
    assert cli(tmp_path, "compare", "all", "--format", "markdown", *hist).stdout.startswith(":red_circle:")
    assert cli(tmp_path, "compare", "all", "--fail-on-regression", *hist).returncode == 3


def test_a_missing_side_fails_the_gate_and_a_clean_comparison_passes(tmp_path, cli):
    root = make_bench_root(tmp_path)
    hist = ["--history", str(tmp_path / "h.duckdb"), "--repo", str(tmp_path)]
    assert cli(tmp_path, *_run_args(root, tmp_path, "half", "--side", "base")).returncode == 0
    doc = json.loads(cli(tmp_path, "compare", "half", "--format", "json", *hist).stdout)
    assert doc["head"]["status"] == "missing" and {t["verdict"] for t in doc["tests"]} == {"failed"}
    assert any("head side has no run" in p for p in doc["problems"])
    assert cli(tmp_path, "compare", "half", "--fail-on-regression", *hist).returncode == 3
    assert cli(tmp_path, *_run_args(root, tmp_path, "clean", *_ab())).returncode == 0
    clean = cli(tmp_path, "compare", "clean", "--fail-on-regression", "--format", "json", *hist)
    assert clean.returncode == 0 and json.loads(clean.stdout)["problems"] == []


def test_nan_output_is_a_failed_invocation_not_a_sample(tmp_path, cli):
    root = make_bench_root(tmp_path)
    hist = ["--history", str(tmp_path / "h.duckdb"), "--repo", str(tmp_path)]
    res = cli(tmp_path, *_run_args(root, tmp_path, "nan", *_ab("--head-env", "FAKE_NAN=1")))
    assert res.returncode == 3
    doc = json.loads(cli(tmp_path, "compare", "nan", "--format", "json", *hist).stdout)
    assert doc["head"]["samples"] == 0 and doc["summary"]["failed"] == len(ALL_TESTS_SHORT)
    assert doc["head"]["failures"][0]["stderr_tail"].startswith("no measurement found")


def test_unwritable_out_is_one_line_and_leaves_no_run_running(tmp_path, perfq):
    root = make_bench_root(tmp_path)
    for out in (tmp_path / "no" / "such" / "dir" / "r.json", tmp_path):  # a missing directory; a directory
        res = perfq(tmp_path, *_run_args(root, tmp_path, "out", "--side", "base", "--out", str(out)),
                    env={"CI": "true"})
        assert res.returncode != 0 and "Traceback" not in res.stderr
        said = [line for line in res.stderr.strip().splitlines() if not line.startswith("priority: ")]
        assert len(said) == 1 and "cannot write the result file" in said[0]  # one line besides the priority's
    assert _stored_statuses(tmp_path / "h.duckdb") == {"incomplete"}


def test_an_error_mid_run_finalises_the_runs(tmp_path):
    from perfq.run import execute as runner
    from perfq.run.jobs import opbench_job
    from perfq.run.opbench import OpBenchSpec
    from perfq.run.store import runs_for_label

    root = make_bench_root(tmp_path)
    plan = runner.RunSpec(label="E", jobs=[opbench_job(root, "fake_test", "eager", OpBenchSpec("", device="cpu"), ())],
                       sides=[runner.SideSetup("base", PY), runner.SideSetup("head", PY)], repeat=3, bench_root=root,
                       repo=tmp_path, history=tmp_path / "h.duckdb")
    calls = []

    def progress(tick):
        calls.append(tick.kind)
        if calls.count(runner.TickKind.done) == 3:
            raise RuntimeError("a bug in a progress bar")

    try:
        runner.execute(plan, progress)
    except RuntimeError:
        pass
    else:
        raise AssertionError("the error must propagate")
    stored = runs_for_label(tmp_path / "h.duckdb", "E")
    assert [r.status for r in stored] == ["incomplete", "incomplete"]
    assert "a bug in a progress bar" in stored[0].notes and stored[0].samples
