"""Issue 38: a broken side fails before the first round, the run says its priority, the budget is the
whole run's wall time (``--all``: none), and contention is recorded per invocation."""

from __future__ import annotations

import time
from pathlib import Path

from perfq.run import execute as runner
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
    """Time spent before the rounds (preparing the sides) is the budget's: 100 s gone of 50 s, no adaptive round."""
    root = make_bench_root(tmp_path)
    plan = plan_for(tmp_path, root, base_env=NOISY, head_env=NOISY, adaptive=True, max_repeat=6,
                    budget_seconds=50.0, started=time.monotonic() - 100.0)
    base, _ = runner.execute(plan)
    assert sum(s.test == "add_M8_cpu" for s in base.samples) == 3
    assert "time budget of 50 s reached" in base.notes


def test_no_budget_samples_to_the_ceiling(tmp_path):
    """``--all`` (no budget): adaptive rounds are not cut by a second, hidden default."""
    root = make_bench_root(tmp_path)
    plan = plan_for(tmp_path, root, base_env=NOISY, head_env=NOISY, adaptive=True, max_repeat=5,
                    budget_seconds=None, started=time.monotonic() - 10_000.0)
    base, _ = runner.execute(plan)
    assert sum(s.test == "add_M8_cpu" for s in base.samples) == 5 and "budget" not in base.notes
