"""Issue 38: a broken side fails before the first round, the run says its priority, the budget is the
whole run's wall time (``--all``: none), and contention is recorded per invocation."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import duckdb

from common.proc import ChildUsage
from perfq.run import execute as runner
from perfq.run.compare import TestKey, compare_samples
from perfq.run.machine import Contention, MachineSnapshot
from perfq.run.report import comparison_document, render_markdown
from perfq.run.runs import Run
from tests.conftest import run_perfq
from tests.run_fakebench import make_bench_root
from tests.test_run_exec import PY, plan_for

NOISY = [("FAKE_NOISE", "0.4"), ("FAKE_NOISY_TESTS", "add_M8_cpu")]


def broken_torch(tmp: Path) -> Path:
    """A directory whose ``torch`` fails to import like a CUDA wheel without its libraries."""
    pkg = tmp / "broken" / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        'raise ImportError("libcudnn.so.9: cannot open shared object file: No such file or directory")\n')
    return pkg.parent


def test_a_side_whose_torch_does_not_import_fails_before_the_first_round(tmp_path):
    root = make_bench_root(tmp_path)
    hist = tmp_path / "h.duckdb"
    res = run_perfq(tmp_path, "run", "-l", "L", "--ab", "--bench", "fake", "--bench-root", str(root),
                    "--base-python", PY, "--head-python", PY, "--head-env", f"PYTHONPATH={broken_torch(tmp_path)}",
                    "--priority", "normal", "--history", str(hist), "--repo", str(tmp_path))
    assert res.returncode == 4, res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "the head side cannot run its benchmarks" in errors[0]
    assert "libcudnn.so.9" in errors[0] and "Traceback" not in res.stderr
    assert not hist.exists()  # no round ran: nothing was measured, nothing stored


def test_every_run_prints_its_priority_and_why(tmp_path):
    root = make_bench_root(tmp_path)
    res = run_perfq(tmp_path, "run", "-l", "L", "--side", "head", "--bench", "fake", "--bench-root", str(root),
                    "--repeat", "1", "--priority", "normal", "--history", str(tmp_path / "h.duckdb"),
                    "--repo", str(tmp_path))
    assert res.returncode == 0, res.stderr
    lines = [line for line in res.stderr.splitlines() if line.startswith("priority:")]
    assert lines == ["priority: normal (SCHED_OTHER, --priority normal), so other load on this machine adds noise"]


def test_the_budget_counts_from_the_commands_start(tmp_path):
    """Time spent before the rounds (preparing the sides) is the budget's: 100 s gone of 50 s, not even the
    first rounds run (they are the budget's too)."""
    root = make_bench_root(tmp_path)
    plan = plan_for(tmp_path, root, base_env=NOISY, head_env=NOISY, adaptive=True, max_repeat=6,
                    budget_seconds=50.0, started=time.monotonic() - 100.0)
    base, head = runner.execute(plan)
    assert base.samples == head.samples == [] and base.status == "complete"
    assert "time budget of 50 s reached" in base.notes


def test_the_budget_clock_starts_with_the_process():
    """perfq's own start-up (its imports: seconds on a busy machine) is the budget's: the clock goes back to
    the process's start."""
    code = "import time; time.sleep(1.5); from common.lifetime import process_age; print(process_age())"
    age = float(subprocess.run([PY, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert 1.5 <= age < 60


def test_no_budget_samples_to_the_ceiling(tmp_path):
    """``--all`` (no budget): adaptive rounds are not cut by a second, hidden default."""
    root = make_bench_root(tmp_path)
    plan = plan_for(tmp_path, root, base_env=NOISY, head_env=NOISY, adaptive=True, max_repeat=5,
                    budget_seconds=None, started=time.monotonic() - 10_000.0)
    base, _ = runner.execute(plan)
    assert sum(s.test == "add_M8_cpu" for s in base.samples) == 5 and "budget" not in base.notes


def test_each_invocation_records_the_machine_and_its_own_rusage(tmp_path):
    root = make_bench_root(tmp_path)
    base, head = runner.execute(plan_for(tmp_path, root, repeat=2))
    con = duckdb.connect(str(tmp_path / "h.duckdb"), read_only=True)
    stored = [json.loads(m) for (m,) in con.execute("SELECT machine FROM invocations ORDER BY started_at").fetchall()]
    env = {side: json.loads(e) for side, e in con.execute("SELECT side, env FROM runs").fetchall()}
    con.close()
    assert len(stored) == 4
    for record in stored:
        assert record["minor_faults"] > 0 and 0 < record["child_cpu"] <= 1.5 and record["wall_s"] > 0
        assert {"cpu_pressure", "memory_pressure", "io_pressure", "steal", "run_queue", "involuntary_switches",
                "voluntary_switches", "major_faults", "contended"} <= set(record)
    for run in (base, head):
        assert env[run.side]["contended"].startswith(f"{runner.contended_share(run)[0]} of 2 invocations (")
    assert "base: " in base.notes and "invocations contended" in base.notes


def snap(at: float, stall_us: tuple[int, int, int], steal: int = 0, jiffies: int = 0, running: int = 1):
    return MachineSnapshot(at, stall_us, steal, jiffies, running)


def test_contention_is_the_share_of_the_invocations_wall():
    usage = ChildUsage(user_s=1.5, system_s=0.1, major_faults=3, minor_faults=900, voluntary_switches=4,
                       involuntary_switches=250, max_rss_kib=1)
    c = Contention.between(snap(10.0, (0, 0, 0), 0, 0, 5), snap(12.0, (1_000_000, 400_000, 0), 30, 400, 7), usage)
    assert (c.cpu_pressure, c.memory_pressure, c.io_pressure) == (0.5, 0.2, 0.0)
    assert c.steal == 30 / 400 and c.run_queue == 5.0 and c.child_cpu == 0.8 and c.major_faults == 3
    assert c.contended  # memory stalls on 20% of its wall
    calm = Contention.between(snap(0.0, (0, 0, 0), 0, 0), snap(2.0, (2_000_000, 0, 0), 0, 400), usage)
    assert calm.cpu_pressure == 1.0 and not calm.contended  # others waited for a CPU; this one had its own
    starved = Contention.between(snap(0.0, (0, 0, 0)), snap(4.0, (0, 0, 0)), usage)
    assert starved.child_cpu == 0.4 and starved.contended  # it was on a CPU 40% of its wall
    missing = Contention.between(snap(0.0, (-1, -1, -1)), snap(1.0, (-1, -1, -1)), None)
    assert missing.memory_pressure is None and missing.child_cpu is None and not missing.contended


def test_an_unknown_says_the_machine_was_contended():
    k = TestKey("b", "t", "eager", "cpu", "forward_time", "us")
    noisy = compare_samples([(k, v) for v in (10.0, 14.0, 10.5, 15.0)], [(k, v) for v in (10.2, 14.5, 10.1, 15.5)])
    busy, calm = Run(label="L", side="base"), Run(label="L", side="head")
    busy.env = json.dumps({"contended": "12 of 20 invocations (60%)"})
    calm.env = json.dumps({"contended": "1 of 20 invocations (5%)"})
    (row,) = comparison_document("L", [busy], [calm], noisy).tests
    assert row.verdict == "unknown" and row.reason.startswith("the machine was contended (base: 12 of 20")
    (quiet,) = comparison_document("L", [calm], [calm], noisy).tests
    assert "contended" not in quiet.reason
    md = render_markdown(comparison_document("L", [busy], [calm], noisy))
    assert "| contended | 12 of 20 invocations (60%) | 1 of 20 invocations (5%) |" in md


def test_benchmarks_get_a_fixed_malloc_mmap_threshold_unless_a_side_sets_its_own(tmp_path, monkeypatch):
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    root = make_bench_root(tmp_path)
    seen = {side: tmp_path / f"{side}.malloc" for side in ("base", "head")}
    plan = plan_for(tmp_path, root, repeat=1, base_env=[("FAKE_MALLOC_FILE", str(seen["base"]))],
                    head_env=[("FAKE_MALLOC_FILE", str(seen["head"])), ("MALLOC_MMAP_THRESHOLD_", "131072")])
    base, head = runner.execute(plan)
    assert seen["base"].read_text().split() == ["33554432"] and seen["head"].read_text().split() == ["131072"]
    assert json.loads(base.env)["env MALLOC_MMAP_THRESHOLD_"] == "33554432"  # recorded with the run
    assert json.loads(head.env)["env MALLOC_MMAP_THRESHOLD_"] == "131072"
