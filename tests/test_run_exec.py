"""perfq run end to end with the fake benchmark: A/B runs, storage, failures, Ctrl-C, adaptive,
export/import idempotence and the CLI commands."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import duckdb
import jsonschema
import pytest
from typer.testing import CliRunner

from common.documents import json_schema
from perfq.cli import app
from perfq.run import execute as runner
from perfq.run.compare import Settings, compare_samples
from perfq.run.jobs import opbench_job
from perfq.run.opbench import OpBenchSpec
from perfq.run.report import ComparisonDocument, HistoryDocument
from perfq.run.results import export_runs, import_files
from perfq.run.script_bench import ScriptBench
from perfq.run.store import runs_for_label
from tests.affected_docs import affected_doc, canary, selected
from tests.run_fakebench import ALL_TESTS_SHORT, make_bench_root

PY = sys.executable


def plan_for(tmp: Path, root: Path, benches=("fake_test",), base_env=(), head_env=(), repeat=3, **kw):
    tests = kw.pop("tests", ())
    jobs = [opbench_job(root, b, "eager", OpBenchSpec("", device="cpu"), tests) for b in benches]
    sides = [runner.SideSetup("base", PY, tuple(base_env)), runner.SideSetup("head", PY, tuple(head_env))]
    return runner.RunSpec(
        label=kw.pop("label", "L"),
        jobs=jobs,
        sides=sides,
        repeat=repeat,
        bench_root=root,
        repo=tmp,
        history=tmp / "h.duckdb",
        **kw,
    )


def test_ab_run_stores_samples_and_flags_the_slow_side(tmp_path):
    root = make_bench_root(tmp_path)
    # 5 repeats: with 3 per side no rank test can reach p < 0.05, the verdict would be unknown
    plan = plan_for(tmp_path, root, head_env=[("FAKE_SLOW", "1.5")], out=tmp_path / "r.json", repeat=5)
    runs = runner.execute(plan)
    assert [r.side for r in runs] == ["base", "head"] and all(r.status == "complete" for r in runs)
    con = duckdb.connect(str(tmp_path / "h.duckdb"), read_only=True)
    rows = con.execute(
        "SELECT r.side, s.test, count(*), min(s.value), max(s.value), any_value(s.metric) "
        "FROM samples s JOIN runs r ON r.id = s.run_id GROUP BY 1, 2 ORDER BY 1, 2"
    ).fetchall()
    status = con.execute("SELECT DISTINCT status, label FROM runs").fetchall()
    con.close()
    assert status == [("complete", "L")]
    assert {r[1] for r in rows} == ALL_TESTS_SHORT  # tag short: the long test did not run
    assert all(r[2] == 5 for r in rows)
    vals = {(r[0], r[1]): r[3] for r in rows}
    assert vals[("base", "add_M8_cpu")] == 10.0 and vals[("head", "add_M8_cpu")] == 15.0
    assert dict((r[1], r[5]) for r in rows)["add_M8_cpu_bwdall"] == "backward_time"
    from perfq.run.compare import Settings
    from perfq.run.compare_labels import comparison_for_label
    from perfq.run.report import Verdict

    doc = comparison_for_label(tmp_path / "h.duckdb", "L", Settings())
    assert {t.verdict for t in doc.tests} == {Verdict.regression}
    assert all(t.change == pytest.approx(0.5) for t in doc.tests)
    assert doc.base.torch_version == doc.head.torch_version  # whatever this interpreter has
    assert import_files(tmp_path / "copy.duckdb", [tmp_path / "r.json"]).runs_seen == 2


def test_test_filter_runs_only_selected_tests(tmp_path):
    root = make_bench_root(tmp_path)
    runs = runner.execute(plan_for(tmp_path, root, tests=("mul_M8_cpu",), repeat=2))
    assert {s.test for r in runs for s in r.samples} == {"mul_M8_cpu"}
    runs = runner.execute(plan_for(tmp_path, root, tests=("add_M8_cpu", "add_M512_cpu"), repeat=1, label="two"))
    # selected by name: add_M512 runs although it is tagged long (the default tag filter is short)
    assert {s.test for s in runs[0].samples} == {"add_M8_cpu", "add_M512_cpu"}


def test_failing_benchmark_is_recorded_and_run_goes_on(tmp_path):
    root = make_bench_root(tmp_path, names=("fake_test", "other_test"))
    plan = plan_for(tmp_path, root, benches=("fake_test", "other_test"), head_env=[("FAKE_FAIL", "1")])
    # head fails for both files: recorded once each (not retried), base keeps all its samples
    runs = runner.execute(plan)
    base, head = runs
    assert len(base.samples) == 2 * 3 * len(ALL_TESTS_SHORT) and head.samples == []
    assert [f.benchmark for f in head.failures] == ["fake_test", "other_test"]
    assert "fake kernel exploded" in head.failures[0].stderr_tail and head.failures[0].returncode == 1
    stored = runs_for_label(tmp_path / "h.duckdb", "L")
    assert [len(r.failures) for r in stored] == [0, 2] and all(r.status == "complete" for r in stored)


def test_batch_runs_files_in_one_process_and_isolates_a_failing_file(tmp_path):
    root = make_bench_root(tmp_path, names=("fake_test", "other_test", "third_test"))
    plan = plan_for(
        tmp_path,
        root,
        benches=("fake_test", "other_test", "third_test"),
        head_env=[("FAKE_FAIL", "other_test"), ("FAKE_SLOW", "2")],
        batch=True,
        repeat=2,
        tests=("add_M8_cpu", "mul_M8_cpu"),
    )
    seen = []
    base, head = runner.execute(plan, lambda tick: seen.append((tick.kind, tick.job.title if tick.job else "")))
    assert {(s.benchmark, s.test) for s in base.samples} == {
        (b, t) for b in ("fake_test", "other_test", "third_test") for t in ("add_M8_cpu", "mul_M8_cpu")
    }
    assert len(base.samples) == 2 * 3 * 2
    assert {s.benchmark for s in head.samples} == {"fake_test", "third_test"}
    assert {s.value for s in head.samples if s.test == "add_M8_cpu"} == {20.0}
    assert [f.benchmark for f in head.failures] == ["other_test"]  # recorded once, then left out
    assert "fake kernel exploded" in head.failures[0].stderr_tail
    assert head.failures[0].command.split()[1] == "-c"  # it ran inside the batch process
    jobs = {title for kind, title in seen if kind == runner.TickKind.start}
    assert len(jobs) == 1 and "3 files" in jobs.pop()


def test_ctrl_c_keeps_finished_samples_and_marks_incomplete(tmp_path):
    root = make_bench_root(tmp_path)
    plan = plan_for(tmp_path, root, repeat=5)
    calls = {"n": 0}

    def progress(tick):
        if tick.kind == runner.TickKind.done:
            calls["n"] += 1
            if calls["n"] == 3:  # after base, head of round 0, then head of round 1 (it goes first there)
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        runner.execute(plan, progress)
    stored = runs_for_label(tmp_path / "h.duckdb", "L")
    assert [r.status for r in stored] == ["incomplete", "incomplete"]
    assert [len(r.samples) for r in stored] == [len(ALL_TESTS_SHORT), 2 * len(ALL_TESTS_SHORT)]
    assert "interrupted" in stored[0].notes


def test_adaptive_adds_repeats_only_to_unknown_tests(tmp_path):
    root = make_bench_root(tmp_path)
    env = [("FAKE_NOISE", "0.4"), ("FAKE_NOISY_TESTS", "add_M8_cpu")]
    plan = plan_for(tmp_path, root, base_env=env, head_env=env, repeat=3, adaptive=True, max_repeat=7)
    base, _ = runner.execute(plan)
    counts = {}
    for s in base.samples:
        counts[s.test] = counts.get(s.test, 0) + 1
    assert counts["add_M64_cpu"] == counts["mul_M8_cpu"] == 3  # deterministic: "same" after 3 repeats
    assert 3 < counts["add_M8_cpu"] <= 7


SCRIPT = """import os, time
time.sleep(float(os.environ.get("SLEEP", "0")))
count = int(open("count").read()) if os.path.exists("count") else 0
open("count", "w").write(str(count + 1))
print("steady: 100 us")
print(f"noisy: {100 * (0.75 + 0.35 * (count * 0.618034 % 1))} us")
"""


def script_plan(tmp: Path, env=(), **kw) -> runner.RunSpec:
    """An A/A of a script bench: ``steady`` always prints 100 us, ``noisy`` 75-110 us, spread evenly over the
    invocations (golden-ratio steps: a standard deviation of about 10%, never two modes 1.5x apart)."""
    (tmp / "bench.py").write_text(SCRIPT)
    bench = ScriptBench("script", ("{python}", "bench.py"), re.compile(r"^(?P<test>\w+): (?P<value>[0-9.e+-]+) us$",
                                                                         re.MULTILINE))
    sides = [runner.SideSetup("base", PY, tuple(env)), runner.SideSetup("head", PY, tuple(env))]
    return runner.RunSpec(label="S", jobs=[runner.Job("script", script=bench)], sides=sides, repo=tmp,
                       history=tmp / "h.duckdb", **kw)


def counts_of(run) -> dict[str, int]:
    counts: dict[str, int] = {}
    for s in run.samples:
        counts[s.test] = counts.get(s.test, 0) + 1
    return counts


def test_budget_holds_in_the_first_rounds(tmp_path):
    plan = script_plan(tmp_path, env=[("SLEEP", "0.4")], repeat=30, adaptive=True, budget_seconds=2.5)
    runs = runner.new_runs(plan)  # reads each side's torch version: seconds on a busy machine
    plan.started = time.monotonic()  # the budget's clock starts after that
    base, head = runner.execute(plan, runs=runs)
    wall = time.monotonic() - plan.started
    longest = max(i.seconds for r in (base, head) for i in r.invocations)
    assert wall <= plan.budget_seconds + longest + 0.5  # the budget, and at most one invocation's overrun
    assert 1 <= len(base.invocations) < 30 and 1 <= len(head.invocations) < 30
    assert "time budget of 2 s reached: 2 test(s) left undecided" in base.notes  # 2.5 s, as given
    assert base.status == head.status == "complete"


def test_budget_zero_runs_nothing_and_says_so(tmp_path):
    base, head = runner.execute(script_plan(tmp_path, repeat=3, adaptive=True, budget_seconds=0.0))
    assert base.samples == head.samples == [] and "time budget of 0 s reached" in base.notes


def test_an_unknown_test_samples_past_the_ceiling_while_the_budget_lasts(tmp_path):
    settings = Settings(max_samples=3)
    base, head = runner.execute(script_plan(tmp_path, repeat=3, adaptive=True, budget_seconds=600.0,
                                            settings=settings))
    assert counts_of(base)["noisy"] == 3 * runner.EXTENDED_CEILING  # R stays far above 5%: on to the extended ceiling
    by = {t.key.test: t for t in compare_samples(runner.samples_as_pairs(base), runner.samples_as_pairs(head),
                                                 settings).tests}
    assert by["noisy"].verdict == "unknown" and "past the ceiling (3 a side) to 15" in by["noisy"].reason
    assert by["steady"].verdict == "same"  # one script prints both: it ran along


def test_without_a_budget_or_with_max_repeat_the_ceiling_is_fixed(tmp_path):
    settings = Settings(max_samples=3)
    base, _ = runner.execute(script_plan(tmp_path, repeat=3, adaptive=True, settings=settings))
    assert counts_of(base)["noisy"] == 3
    base, _ = runner.execute(script_plan(tmp_path, repeat=3, adaptive=True, budget_seconds=600.0, max_repeat=5,
                                         settings=settings))
    assert counts_of(base)["noisy"] == 5


def test_export_import_is_idempotent_and_merges_machines(tmp_path):
    root = make_bench_root(tmp_path)
    a = tmp_path / "a"
    b = tmp_path / "b"
    a.mkdir()
    b.mkdir()
    # two "CI jobs": base on one machine, head on another, each with its own history + export
    plan_a = plan_for(a, root, repeat=2, out=a / "base.json")
    plan_a.sides = plan_a.sides[:1]
    runner.execute(plan_a)
    plan_b = plan_for(b, root, repeat=2, out=b / "head.json", head_env=[("FAKE_SLOW", "2")])
    plan_b.sides = plan_b.sides[1:]
    runner.execute(plan_b)
    merged = tmp_path / "merged.duckdb"
    first = import_files(merged, [a / "base.json", b / "head.json"])
    assert first.runs_added == 2 and first.samples_added == 4 * len(ALL_TESTS_SHORT)
    again = import_files(merged, [a / "base.json", b / "head.json", b / "h.duckdb"])
    assert again.runs_added == 0 and again.samples_added == 0
    con = duckdb.connect(str(merged), read_only=True)
    assert con.execute("SELECT count(*) FROM samples").fetchone()[0] == 4 * len(ALL_TESTS_SHORT)
    con.close()
    # an incomplete run re-exported later with more samples gains only the missing ones
    (run,) = runs_for_label(a / "h.duckdb", "L")
    run.add_sample(
        9,
        "fake_test",
        type(
            "M",
            (),
            {
                "test": "extra",
                "mode": "eager",
                "device": "cpu",
                "metric": "forward_time",
                "unit": "us",
                "value": 1.0,
            },
        )(),
    )
    export_runs([run], tmp_path / "more.json")
    assert import_files(merged, [tmp_path / "more.json"]).samples_added == 1


def test_cli_run_compare_history_import(tmp_path):
    root = make_bench_root(tmp_path)
    hist = tmp_path / "cli.duckdb"
    cli = CliRunner()
    common = ["--history", str(hist), "--repo", str(tmp_path)]
    res = cli.invoke(
        app,
        [
            "run",
            "--label",
            "pr1",
            "--ab",
            "--base-python",
            PY,
            "--head-python",
            PY,
            "--bench",
            "fake",
            "--bench-root",
            str(root),
            "--repeat",
            "5",
            "--head-env",
            "FAKE_SLOW=0.5",
            "--out",
            str(tmp_path / "o.json"),
            *common,
        ],
    )
    assert res.exit_code == 0, res.output
    res = cli.invoke(app, ["compare", "pr1", "--format", "json", *common])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    jsonschema.validate(doc, json_schema(ComparisonDocument))
    assert {t["verdict"] for t in doc["tests"]} == {"improvement"} and len(doc["tests"]) == len(ALL_TESTS_SHORT)
    res = cli.invoke(app, ["compare", "pr1", "--format", "markdown", *common])
    assert res.stdout.splitlines()[0].count("0 regression(s)") == 1
    res = cli.invoke(app, ["history", "fake_test", "--test", "add_M8_cpu", "--format", "json", *common])
    history_doc = json.loads(res.stdout)
    jsonschema.validate(history_doc, json_schema(HistoryDocument))
    rows = history_doc["rows"]
    assert sorted((r["side"], r["median"], r["n"]) for r in rows) == [("base", 10.0, 5), ("head", 5.0, 5)]
    res = cli.invoke(app, ["import", str(tmp_path / "o.json"), *common])
    assert res.exit_code == 0 and "0 new run(s)" in res.stdout
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    res = cli.invoke(app, ["import", str(bad), *common])
    assert res.exit_code != 0 and isinstance(res.exception, SystemExit) or "bad JSON" in str(res.exception)
    res = cli.invoke(app, ["compare", "nope", *common])
    assert res.exit_code != 0 and "no runs labelled" in str(res.exception)
    res = cli.invoke(
        app,
        ["run", "--label", "x", "--side", "base", "--bench", "missing", "--bench-root", str(root), *common],
    )
    assert "no operator benchmark 'missing'" in str(res.exception)


def test_script_benchmark_from_config(tmp_path):
    (tmp_path / "bench.py").write_text(
        "import os\nf = float(os.environ.get('SLOW', '1'))\n"
        "print(f'gemm_small: {10 * f} us')\nprint(f'gemm_large: {100 * f} us')\n"
    )
    (tmp_path / "perfq.toml").write_text(
        '[tool.perfq.benchmarks.gemm]\ncommand = "{python} bench.py"\n'
        'pattern = "^(?P<test>\\\\w+): (?P<value>[0-9.]+) us$"\n'
    )
    hist = tmp_path / "s.duckdb"
    res = CliRunner().invoke(
        app,
        [
            "run",
            "--label",
            "s",
            "--ab",
            "--base-python",
            PY,
            "--head-python",
            PY,
            "--bench",
            "gemm",
            "--repeat",
            "5",
            "--head-env",
            "SLOW=3",
            "--repo",
            str(tmp_path),
            "--history",
            str(hist),
        ],
    )
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["compare", "s", "--format", "json", "--repo", str(tmp_path), "--history", str(hist)])
    doc = json.loads(res.stdout)
    assert [(t["test"], t["verdict"], round(t["change"], 3)) for t in doc["tests"]] == [
        ("gemm_large", "regression", 2.0),
        ("gemm_small", "regression", 2.0),
    ]


def test_cli_affected_selection_and_unsupported_compile(tmp_path, monkeypatch):
    root = make_bench_root(tmp_path, names=("fake_test", "other_test"))
    calls = []

    def fake_affected(repo, rev_range, db=None):
        calls.append(rev_range)
        # tests: benchmark classes, as perfq affected reports them
        fake = selected("fake_test", "pt/fake_test.py", tests=("FakeBenchmark",), modes=("eager", "compile"))
        return affected_doc((fake,), (canary("core", "other_test", trigger="x"),))

    monkeypatch.setattr("perfq.run.jobs.affected_for_range", fake_affected)
    hist = tmp_path / "a.duckdb"
    common = ["--history", str(hist), "--repo", str(tmp_path), "--bench-root", str(root)]
    res = CliRunner().invoke(
        app, ["run", "--label", "aff", "--side", "head", "--affected", "origin/main", "--repeat", "1", *common]
    )
    assert res.exit_code == 0, res.output
    assert calls == ["origin/main"]
    assert "compile mode not run" in res.output and "--use-compile" in res.output
    (run,) = runs_for_label(hist, "aff")
    # class names are not runner test names: the whole file runs (never a silent empty run)
    assert {(s.benchmark, s.test) for s in run.samples} == {("fake_test", t) for t in ALL_TESTS_SHORT} | {
        ("other_test", t) for t in ALL_TESTS_SHORT
    }
    # a compile-only request on a runner without --use-compile: a note, an empty result file, exit 0
    out = tmp_path / "empty.json"
    res = CliRunner().invoke(
        app,
        ["run", "--label", "c", "--side", "base", "--bench", "fake", "--mode", "compile", "--out", str(out), *common],
    )
    assert res.exit_code == 0 and "nothing to run" in res.output
    assert import_files(tmp_path / "x.duckdb", [out]).runs_seen == 0


def test_sides_alternate_which_runs_first_each_round(tmp_path):
    """A B, B A, A B: an order effect of the second process in a pair falls on both sides alike."""
    root = make_bench_root(tmp_path)
    starts = []
    runner.execute(plan_for(tmp_path, root, repeat=4),
                   lambda tick: starts.append((tick.round, tick.side)) if tick.kind == runner.TickKind.start else None)
    assert starts == [(0, "base"), (0, "head"), (1, "head"), (1, "base"), (2, "base"), (2, "head"),
                      (3, "head"), (3, "base")]
