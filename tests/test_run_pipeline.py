"""`perfq run` as an importable pipeline (plan -> sample -> decide -> store -> report), and its CLI kept short."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from common.errors import PerfqError
from perfq.cli import app
from perfq.options import EXIT_GATE, EXIT_OK, Format
from perfq.run.jobs import SideOptions
from perfq.run.pipeline import RunRequest, checked_rounds, plan_run, run_benchmarks
from perfq.run.report import Verdict
from perfq.run.results import import_files
from perfq.run.store import runs_for_label
from tests.run_fakebench import ALL_TESTS_SHORT, make_bench_root

PY = sys.executable
CLI_MODULE = Path(__file__).resolve().parents[1] / "perfq" / "run" / "cli.py"


def ab_request(tmp: Path, **kw) -> RunRequest:
    return RunRequest(label=kw.pop("label", "L"), ab=True, sides=SideOptions(base_python=PY, head_python=PY),
                      benches=("fake",), bench_root=make_bench_root(tmp), repeat=5, adaptive=False,
                      repo=tmp, history=tmp / "h.duckdb", **kw)


def test_the_pipeline_is_called_from_python_and_decides_the_gate(tmp_path, capsys):
    request = ab_request(tmp_path, head_env=("FAKE_SLOW=1.5",), fmt=Format.json, fail_on_regression=True)
    outcome = run_benchmarks(request)
    assert [r.side for r in outcome.runs] == ["base", "head"]
    assert {t.test for t in outcome.comparison.tests} == ALL_TESTS_SHORT
    assert {t.verdict for t in outcome.comparison.tests} == {Verdict.regression}
    assert outcome.exit_code == EXIT_GATE  # the CLI raises typer.Exit with it; the function never exits
    printed = json.loads(capsys.readouterr().out)  # report: the run's summary document on stdout
    assert printed["label"] == "L" and [r["side"] for r in printed["runs"]] == ["base", "head"]
    assert {r.id for r in runs_for_label(tmp_path / "h.duckdb", "L")} == {r.id for r in outcome.runs}


def test_one_side_without_the_gate_exits_ok_and_decides_nothing(tmp_path):
    request = RunRequest(label="one", side="head", benches=("fake",), bench_root=make_bench_root(tmp_path),
                         repeat=1, repo=tmp_path, history=tmp_path / "h.duckdb", tests=("add_M8_cpu",))
    outcome = run_benchmarks(request)
    assert outcome.comparison is None and outcome.exit_code == EXIT_OK
    assert [(s.test, s.value) for s in outcome.runs[0].samples] == [("add_M8_cpu", 10.0)]


def test_nothing_selected_plans_no_jobs_and_stores_an_empty_result_file(tmp_path):
    out = tmp_path / "empty.json"
    request = RunRequest(label="c", side="base", benches=("fake",), mode="compile",
                         bench_root=make_bench_root(tmp_path), repo=tmp_path, history=tmp_path / "h.duckdb", out=out)
    assert plan_run(request).jobs == []
    outcome = run_benchmarks(request)
    assert outcome.runs == () and outcome.exit_code == EXIT_OK
    assert out.is_file() and import_files(tmp_path / "merged.duckdb", [out]).runs_seen == 0
    assert not (tmp_path / "h.duckdb").exists()  # nothing sampled, nothing stored


@pytest.mark.parametrize(("change", "message"), [
    ({"side": "head"}, "exactly one of --side"),
    ({"benches": ()}, "--affected REF or at least one --bench"),
    ({"run_all": True}, "go with --affected"),
    ({"budget": "soon"}, "--budget"),
])
def test_a_request_is_checked_before_anything_runs(tmp_path, change, message):
    request = RunRequest(label="x", ab=True, benches=("fake",), repo=tmp_path)
    fields = {**request.__dict__, **change}
    with pytest.raises(PerfqError, match=message):
        checked_rounds(RunRequest(**fields))


def test_adaptive_sampling_is_the_default_with_both_sides_only(tmp_path):
    both = checked_rounds(RunRequest(label="x", ab=True, benches=("fake",)))
    one = checked_rounds(RunRequest(label="x", side="head", benches=("fake",)))
    assert both.adaptive and not one.adaptive
    assert checked_rounds(RunRequest(label="x", side="head", benches=("fake",), repeat=7)).repeat == 7


def test_the_command_line_becomes_the_request(tmp_path):
    where = ["--repo", str(tmp_path), "--history", str(tmp_path / "h.duckdb")]
    res = CliRunner().invoke(app, ["run", "-l", "cli", "--side", "head", "--bench", "fake", "--bench-root",
                                   str(make_bench_root(tmp_path)), "--repeat", "1", "--test", "mul_M8_cpu",
                                   "--format", "json", *where])
    assert res.exit_code == 0, res.output
    stored = runs_for_label(tmp_path / "h.duckdb", "cli")
    assert [(r.side, [s.test for s in r.samples]) for r in stored] == [("head", ["mul_M8_cpu"])]
    assert stored[0].command.startswith("perfq ")


def test_no_function_of_the_run_cli_is_over_40_lines():
    tree = ast.parse(CLI_MODULE.read_text())
    long = {node.name: node.end_lineno - node.lineno + 1 for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno >= 40}
    assert long == {}


def test_the_run_cli_has_one_typer_style():
    """Every option is ``Annotated[type, typer.Option(...)]``; none is a ``= typer.Option(...)`` default."""
    tree = ast.parse(CLI_MODULE.read_text())
    defaults = [node.value for node in ast.walk(tree) if isinstance(node, ast.AnnAssign) and node.value is not None]
    assert not [ast.unparse(d) for d in defaults if "Option" in ast.unparse(d) or "Argument" in ast.unparse(d)]
    fields = [node for node in ast.walk(tree) if isinstance(node, ast.AnnAssign)]
    assert len(fields) > 50 and all("Annotated" in ast.unparse(f.annotation) or ast.unparse(f.annotation) in (
        "RepoOpt", "HistoryOpt") for f in fields)


_SINCE_START = "import time; time.sleep(1.2); from perfq import options; import perfq.cli as c; "


@pytest.mark.parametrize(("entry", "at_least", "below"), [("c.main()", -1.0, 1.0), ("c.run()", 1.2, 60.0)])
def test_the_budget_counts_from_the_program_start_or_from_an_in_process_call(entry, at_least, below):
    """As the program (the console script, ``python -m perfq``), perfq's budget counts from the process's
    start: its own start-up is the budget's. ``perfq.cli.main(argv)`` called in a process that has done
    other work (a test session, a script) counts from the call: counted from that process's start, a 15m
    budget was spent before the first round once a test session was 15 minutes old, and every run in
    it sampled nothing."""
    code = _SINCE_START + "c.main = lambda: print(time.monotonic() - options.command_started()); " + entry
    took = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert at_least <= took < below
