"""`perfq run` feedback and documents: plain progress lines in CI, a heartbeat, the bar's totals,
--format for run and import, and the machine/torch environment stored with every run."""

from __future__ import annotations

import io
import json
import sys
import time

import jsonschema

from common.documents import json_schema
from perfq.options import EXIT_GATE
from perfq.run import progress
from perfq.run.compare import Settings
from perfq.run.execute import Job, Tick, TickKind
from perfq.run.run_report import ImportDocument, RunDocument
from perfq.run.store import runs_for_label
from tests.conftest import git
from tests.run_fakebench import ALL_TESTS_SHORT, make_bench_root

PY = sys.executable


def _common(tmp_path, root):
    return ["--bench-root", str(root), "--history", str(tmp_path / "h.duckdb"), "--repo", str(tmp_path)]


def test_ci_log_gets_one_line_per_finished_invocation(tmp_path, perfq):
    root = make_bench_root(tmp_path, names=("fake_test", "other_test"))
    res = perfq(tmp_path, "run", "-l", "ci", "--ab", "--base-python", PY, "--head-python", PY, "--bench", "fake",
                "--bench", "other", "--no-batch", "--repeat", "3", "--head-env", "FAKE_FAIL=1",
                *_common(tmp_path, root), env={"CI": "true"})
    assert res.returncode == EXIT_GATE, res.stderr  # the head side's crashes fail the run's gate
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("perfq run: [")]
    # 2 files x 2 sides x 3 rounds planned; head fails in round 1 and its files are left out after that
    assert len(lines) == 2 * 3 + 2
    assert lines[0].startswith("perfq run: [1/12 8%] round 1/3 base fake_test [eager, all tests]: 4 samples in")
    # a whole file runs through perfq's runner wrapper (tag fallback), which names the exception
    assert any("round 1/3 head other_test" in ln and "FAILED" in ln and "fake kernel exploded" in ln for ln in lines)
    assert lines[-1].startswith("perfq run: [11/12 91%] round 3/3 base other_test") and "left" in lines[-1]


def test_heartbeat_speaks_when_an_invocation_is_long(monkeypatch):
    monkeypatch.setattr(progress, "HEARTBEAT", 0.2)
    monkeypatch.setattr(progress, "POLL", 0.05)
    out = io.StringIO()
    job = Job("slow_test")
    with progress.RunFeedback(total=4, rounds=2, interactive=False, stream=out) as feedback:
        feedback(Tick(TickKind.start, job, "base", 0))
        time.sleep(0.6)
        feedback(Tick(TickKind.done, job, "base", 0, units=1, seconds=0.6, samples=3))
    text = out.getvalue()
    assert "perfq run: still running: round 1/2 · base · slow_test" in text
    assert "[1/4 25%] round 1/2 base slow_test: 3 samples in 0.6 s" in text


def test_bar_counts_adaptive_rounds():
    job = Job("a_test")
    with progress.RunFeedback(total=4, rounds=2, interactive=True) as feedback:
        for r in range(2):
            for side in ("base", "head"):
                feedback(Tick(TickKind.start, job, side, r))
                feedback(Tick(TickKind.done, job, side, r, units=1, samples=2))
        feedback(Tick(TickKind.adaptive, None, round=2, units=2))
        (task,) = feedback._bar.tasks
        assert (task.completed, task.total, feedback.rounds) == (4, 6, 3)
        assert feedback.remaining() is not None


def test_run_and_import_formats_and_environment(tmp_path, cli):
    root = make_bench_root(tmp_path)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "benchmarks")
    out = tmp_path / "r.json"
    res = cli(tmp_path, "run", "-l", "env", "--ab", "--base-python", PY, "--head-python", PY, "--bench", "fake",
              "--head-env", "FAKE_SLOW=2", "--out", str(out), "--format", "json", *_common(tmp_path, root))
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    jsonschema.validate(doc, json_schema(RunDocument))
    # deterministic timings: every test's 2x is clear from the first rounds, but a direction needs
    # direction_samples a side (3 samples agree by chance on a busy machine): decided then
    rounds = Settings().direction_samples
    assert [(r["side"], r["samples"]) for r in doc["runs"]] == [("base", rounds * 4), ("head", rounds * 4)]
    assert doc["comparison"]["summary"]["regression"] == len(ALL_TESTS_SHORT)
    base, head = runs_for_label(tmp_path / "h.duckdb", "env")
    env = json.loads(head.env)
    for key in ("cpu_model", "logical_cpus", "physical_cores", "smt", "governor", "load_average", "memory_total",
                "torch_version", "python_version"):
        assert env[key], key
    assert env["env FAKE_SLOW"] == "2" and env["env OMP_NUM_THREADS"] == "1"  # the defaults: one thread
    assert "PyTorch built with" in env["torch_config"]
    assert env["git_commit"] == git(tmp_path, "rev-parse", "HEAD").strip()
    md = cli(tmp_path, "compare", "env", "--format", "markdown", *_common(tmp_path, root)[2:])
    assert "| env FAKE_SLOW | - | 2 |" in md.stdout  # what differs between the sides is shown
    assert "<summary>Full environment</summary>" in md.stdout
    one = cli(tmp_path, "run", "-l", "one", "--side", "base", "--bench", "fake", "--repeat", "2", "--format",
              "markdown", *_common(tmp_path, root))
    assert one.returncode == 0 and one.stdout.startswith("**perfq run `one`**") and "| base |" in one.stdout
    imported = cli(tmp_path, "import", str(out), "--history", str(tmp_path / "other.duckdb"), "--format", "json")
    got = json.loads(imported.stdout)
    jsonschema.validate(got, json_schema(ImportDocument))
    assert (got["files"], got["runs_added"], got["samples_added"]) == (1, 2, 2 * rounds * 4)
    again = cli(tmp_path, "import", str(out), "--history", str(tmp_path / "other.duckdb"))
    assert "0 new run(s) of 2" in again.stdout
    assert json.loads(runs_for_label(tmp_path / "other.duckdb", "env")[1].env)["env FAKE_SLOW"] == "2"
