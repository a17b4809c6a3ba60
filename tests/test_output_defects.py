"""Output defects of issues 30 and 33, each reproduced: enum reprs and exponents in the PR comment,
the progress bar at 80 columns, scipy's warning on stderr, merged history sides, the torch probe
shadowed by a PyTorch tree, batches that store nothing for minutes, hostile names in markdown,
HTML and terminal tables, negative times, non-standard JSON, a missing git, a closed stdout."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import warnings
from importlib.util import find_spec
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from markdown_it import MarkdownIt
from rich.console import Console

from common.render import fixed, md_code, md_text, plain, print_json
from perfq.run import progress
from perfq.run.compare import TestKey, Verdict, compare_samples
from perfq.run.execute import Job, Tick, TickKind, batch_jobs
from perfq.run.opbench import OpBenchSpec
from perfq.run.report import (
    ComparisonDocument,
    SideInfo,
    SideStatus,
    Summary,
    TestRow,
    comparison_document,
    render_markdown,
)
from perfq.run.runs import Run
from perfq.run.trend import trends_from_rows
from perfq.run.views import print_comparison
from perfq.terminal import Name
from tests.conftest import git, run_perfq
from tests.run_fakebench import make_bench_root

PY = sys.executable
HOSTILE_FILE = "x<img src=x onerror=alert(1)>_test"
HOSTILE_TEST = "t|x\n## Owned\n<script>alert(1)</script>`tick`"
ANSI_TEST = "red\x1b[31mRED\x1b[0m\x1b]8;;http://evil\x07link\x1b]8;;\x07\x07bell"


def _side(status: SideStatus = SideStatus.complete, commit: str = "c" * 40, env: dict | None = None) -> SideInfo:
    return SideInfo("main", commit, "2.13", "py", "host", "cpu", ("id",), status, 5, (), env or {})


def _doc(*rows: TestRow, problems: tuple[str, ...] = ()) -> ComparisonDocument:
    return ComparisonDocument("pr", _side(), _side(), Summary(len(rows), 0, 0, 0), rows, (), problems)


def _row(test: str = "Softmax_N1_cpu", bench: str = "softmax_test", base: float = 63130.0,
         head: float = 90210.5) -> TestRow:
    return TestRow(bench, test, "eager", "cpu", base, head, head / base - 1, (0.3, 0.5), 0.01, Verdict.regression,
                   "forward_time", "us", 5, 5, 0.05, base_center=base, head_center=head)  # the shown centers


def _html(markdown: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(markdown)


# --- the PR comment: values, not reprs; fixed notation ------------------------------------------------


def test_markdown_shows_status_values_and_fixed_medians():
    md = render_markdown(_doc(_row()))
    assert "SideStatus" not in md and "| status | complete | complete |" in md
    assert "63,130 us" in md and "90,210 us" in md and "e+0" not in md


@pytest.mark.parametrize(("value", "text"), [(63130.0, "63,130 us"), (181.2, "181.2 us"), (14.912, "14.91 us"),
                                             (0.012345, "0.01235 us"), (1.5e7, "15,000,000 us"), (0.0, "0 us"),
                                             (40.0, "40 us"), (14.9, "14.9 us")])
def test_fixed_notation_never_uses_an_exponent(value, text):
    assert fixed(value, "us") == text
    assert fixed(float("inf")) == fixed(None) == "n/a"


def test_terminal_table_medians_in_fixed_notation():
    con = Console(file=io.StringIO(), width=80, color_system=None)
    print_comparison(con, _doc(_row()))
    out = con.file.getvalue()
    assert "63,130" in out and "e+04" not in out


# --- the markdown's commit is the one that ran ----------------------------------------------------------


def test_markdown_commit_is_the_recorded_git_commit_and_a_mismatch_is_said():
    ran, named = "a" * 40, "b" * 40
    runs = [Run(label="L", side=side, ref="HEAD~1" if side == "base" else "", commit_sha=named if side == "base"
                else ran, status="complete", env=json.dumps({"git_commit": ran})) for side in ("base", "head")]
    k = TestKey("b_test", "t", "eager", "cpu", "forward_time", "us")
    doc = comparison_document("L", runs[:1], runs[1:], compare_samples([(k, 1.0)] * 5, [(k, 1.0)] * 5))
    md = render_markdown(doc)
    assert f"| commit | {ran} | {ran} |" in md
    assert doc.base.commit == doc.base.env["git_commit"] == ran
    assert doc.warnings and "HEAD~1" in doc.warnings[0] and named[:12] in doc.warnings[0]
    assert doc.to_json()["warnings"] == list(doc.warnings) and not doc.gate_fails()


# --- scipy's ks_2samp warning ----------------------------------------------------------------------------


@pytest.mark.parametrize("head_shift", [0.5, 0.0])
def test_comparison_sends_no_scipy_warning_to_stderr(head_shift):
    """Large samples a hair apart (where scipy's exact KS used to give up and warn) and samples
    identical on both sides (zero variance): the comparison warns about nothing, and decides."""
    base = np.arange(1.0, 1001.0) if head_shift else np.full(20, 100.0)
    head = base + head_shift
    k = TestKey("b_test", "t", "eager", "cpu", "forward_time", "us")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = compare_samples([(k, v) for v in base], [(k, v) for v in head])
    t = result.tests[0]
    # 1..1000 spreads the log-times so widely that R stays above the 5% minimum effect: undecided, not `same`
    assert t.verdict is (Verdict.unknown if head_shift else Verdict.same) and t.reason
    assert (t.resolution > t.min_effect) == bool(head_shift)


# --- the progress bar and the CI lines ---------------------------------------------------------------------


def _members(n: int) -> Job:
    members = tuple(Job(f"{name}_test", spec=OpBenchSpec(name=name))
                    for name in ("softmax", "layernorm", "add", "sum", "cat", "gelu")[:n])
    return Job("+".join(m.benchmark for m in members), spec=members[0].spec, members=members)


def test_bar_says_elapsed_and_left_and_fits_80_columns(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(progress, "console", lambda stderr=False: Console(file=out, width=80, force_terminal=True,
                                                                          color_system=None))
    job = _members(6)
    with progress.RunFeedback(total=240, rounds=5, interactive=True) as feedback:
        for r in range(3):
            feedback(Tick(TickKind.start, job, "base", r))
            feedback(Tick(TickKind.done, job, "base", r, units=1, seconds=1.0, samples=34, error="boom"))
        feedback(Tick(TickKind.start, job, "head", 3))
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue()).replace("\r", "\n")
    bar = [line for line in text.splitlines() if "3/240" in line][-1]
    assert len(bar) <= 80, bar
    assert re.search(r"\d:\d\d:\d\d elapsed, (\d:\d\d:\d\d|-:--:--) left", bar), bar  # both times, both named
    assert "3 failed" in bar and "round 4/5" in bar


def test_ci_lines_print_brackets_without_rich_escapes(monkeypatch):
    monkeypatch.setattr(progress, "HEARTBEAT", 0.0)
    monkeypatch.setattr(progress, "POLL", 0.02)
    out = io.StringIO()
    job = _members(2)
    with progress.RunFeedback(total=4, rounds=2, interactive=False, stream=out) as feedback:
        feedback(Tick(TickKind.start, job, "base", 0))
        while "still running" not in out.getvalue():
            pass
        feedback(Tick(TickKind.done, job, "base", 0, units=1, seconds=0.1, samples=3))
    text = out.getvalue()
    assert "\\[" not in text and "2 files [eager]" in text


# --- history: a trend per side -----------------------------------------------------------------------------


def test_history_keeps_base_and_head_in_separate_trends():
    rows = []
    for i in range(8):  # a PR label's runs: base at 100 us, head at 130 us, one run each per day
        for side, value in (("base", 100.0), ("head", 130.0)):
            rows.append(SimpleNamespace(label=f"pr-{i}", side=side, ref="", started_at=f"2026-01-{i + 1:02d}T00:0"
                                        f"{int(side == 'head')}", test="t", mode="eager", device="cpu",
                                        metric="forward_time", unit="us", median=value, n=5))
    trends = trends_from_rows(rows)
    assert [(t.side, [p.median for p in t.points]) for t in trends] == [("base", [100.0] * 8), ("head", [130.0] * 8)]
    assert not any(t.steps for t in trends)  # merged, the series zigzags 100/130 and shows steps


# --- the machine probe from a PyTorch tree ------------------------------------------------------------------


@pytest.mark.skipif(find_spec("torch") is None, reason="torch is not installed")
def test_torch_probe_is_not_shadowed_by_a_torch_folder_in_the_working_directory(tmp_path, monkeypatch):
    from perfq.run import machine

    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise ImportError('the source tree, not the installed torch')\n")
    monkeypatch.chdir(tmp_path)
    machine._probe.cache_clear()
    info = machine.interpreter_info(PY)
    assert "PyTorch built with" in info["torch_config"], info["torch_config"]


# --- batches store samples every few files --------------------------------------------------------------------


def test_a_37_file_batch_is_split_so_samples_are_stored_every_few_files():
    jobs = [Job(f"op{i}_test", spec=OpBenchSpec(name=f"op{i}_test")) for i in range(37)]
    batches = batch_jobs(jobs)
    sizes = [len(b.members) or 1 for b in batches]
    assert sum(sizes) == 37 and max(sizes) <= 8  # one process per batch: samples stored after each
    assert [m.benchmark for b in batches for m in (b.members or (b,))] == [j.benchmark for j in jobs]


# --- untrusted names: markdown, HTML, terminal ---------------------------------------------------------------


def test_shared_escapers_make_hostile_strings_inert():
    assert md_text("a | b <img src=x> ## c `d`") == "a \\| b &lt;img src=x&gt; \\#\\# c \\`d\\`"
    assert md_code("a`b|c") == "``a`b\\|c``" and md_code("x\ny") == "`x y`"
    assert plain("a\x1b[31mb\x1b[0m\x07c\nd") == "abc d"
    html = _html(f"| {md_text(HOSTILE_TEST)} | {md_code(HOSTILE_FILE)} |\n|---|---|\n")
    assert "<img" not in html and "<script" not in html and "<h2" not in html


def test_compare_markdown_escapes_hostile_names():
    md = render_markdown(_doc(_row(HOSTILE_TEST, HOSTILE_FILE), problems=(f"1 benchmark(s) failed: {HOSTILE_FILE}",)))
    html = _html(md)
    assert "<img" not in html and "<script" not in html and "<h2" not in html
    table = [line for line in md.splitlines() if line.startswith("| regression")]
    assert len(table) == 1 and len(re.findall(r"(?<!\\)\|", table[0])) == 11  # 10 cells, no extra pipe


def test_affected_markdown_escapes_hostile_names():
    from perfq.cli.render_affected import markdown
    from query.document import AffectedDoc, Confidence, Reason, SelectedBenchmark, Source, Unmapped
    from query.model import ChainStep, StepKind

    chain = (ChainStep(StepKind.FUNCTION, "f <b>bold</b>"), ChainStep(StepKind.BENCHMARK, HOSTILE_FILE))
    bench = SelectedBenchmark(HOSTILE_FILE, f"pt/{HOSTILE_FILE}.py", (HOSTILE_TEST,), (), ("add",), ("eager",),
                              ("cpu",), Confidence.high, Source.static, (Reason("f", chain),))
    unmapped = Unmapped(f"{HOSTILE_FILE}.cpp", "## x", (1,), "reason | <img src=y>")
    doc = AffectedDoc("a" * 40, "b" * 40, False, False, {}, (), (), (bench,), (), ("add",), ("<img src=z>",),
                      (unmapped,), (), ())
    html = _html(markdown(doc))
    assert "<img" not in html and "<b>" not in html and "<h2" not in html


def test_coverage_html_and_markdown_escape_hostile_names():
    from perfq.coverage.render import to_html, to_markdown
    from perfq.coverage.report import CoverageFacts, Overload, build_report

    facts = CoverageFacts()
    facts.ops["add.Tensor"] = Overload("add.Tensor", "add", "Tensor", "aten", "add.Tensor(...)", ("CPU",), ())
    facts.bench_files[HOSTILE_FILE] = f"pt/{HOSTILE_FILE}.py"
    facts.bench_ops[HOSTILE_FILE] = {"add.Tensor"}
    report = build_report(facts, None)
    assert "<img" not in to_html(report) and "<img" not in _html(to_markdown(report))


def test_terminal_tables_strip_escape_sequences():
    con = Console(file=io.StringIO(), width=80, color_system=None)
    print_comparison(con, _doc(_row(ANSI_TEST), _row("plain_test")))
    out = con.file.getvalue()
    assert "\x1b" not in out and "\x07" not in out and "redRED" in out.replace("\n", "").replace(" ", "")


# --- names at 80 columns -------------------------------------------------------------------------------------


def test_names_wrap_after_separators_never_mid_word():
    long = "Softmax_N1_C3_H256_W256_cpu_channels_last_with_a_very_long_configuration_suffix_bwdall"
    con = Console(file=io.StringIO(), width=80, color_system=None)
    print_comparison(con, _doc(_row(long)))
    lines = con.file.getvalue().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("verdict"))
    start, end = lines[header].index("test"), lines[header].index("base")
    rows = [line for line in lines[header + 1:] if line[:start].strip() in ("", "regression")
            and not line.startswith(("base:", "head:"))]
    pieces = [line[start:end].strip() for line in rows if line[start:end].strip()]
    assert "".join(pieces) == long and len(pieces) > 1
    assert all(piece.endswith("_") for piece in pieces[:-1]), pieces  # each line ends at a separator
    assert Name("a_b").lines(1) == ["a_", "b"]


def test_help_choices_are_not_cut_mid_word():
    for command in ("run", "compare", "coverage", "affected"):
        res = run_perfq(Path.cwd(), command, "--help", env={"COLUMNS": "80"})
        assert res.returncode == 0, res.stderr
        assert not re.search(r"<[a-z|-]+\s*│", res.stdout), command  # a choice list cut at the column edge
        assert "FORMAT" in res.stdout


# --- negative times, non-standard JSON -------------------------------------------------------------------------


def test_negative_times_fail_the_side_instead_of_counting_as_an_improvement(tmp_path, perfq):
    root = make_bench_root(tmp_path, names=("fake_test",))
    git(tmp_path, "init", "-q")
    common = ["--bench-root", str(root), "--history", str(tmp_path / "h.duckdb"), "--repo", str(tmp_path)]
    res = perfq(tmp_path, "run", "-l", "neg", "--ab", "--base-python", PY, "--head-python", PY, "--bench", "fake",
                "--repeat", "3", "--head-env", "FAKE_SLOW=-1", "--format", "json", *common)
    assert res.returncode == 3, res.stderr
    doc = json.loads(res.stdout)["comparison"]
    assert doc["summary"]["improvement"] == 0 and doc["summary"]["failed"] > 0
    assert "negative time" in doc["head"]["failures"][0]["stderr_tail"]


def test_json_output_is_standard_json(capsys):
    print_json({"change": float("inf"), "ci": [float("-inf"), float("nan")], "ok": 1.5})
    text = capsys.readouterr().out
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}")) == {
        "change": None, "ci": [None, None], "ok": 1.5}


# --- git missing, closed or full stdout --------------------------------------------------------------------------


def test_missing_git_is_said_not_a_missing_repository(tmp_path):
    git(tmp_path, "init", "-q")
    empty = tmp_path / "bin"
    empty.mkdir()
    res = subprocess.run([PY, "-m", "perfq", "affected", "HEAD"], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PATH": str(empty)}, timeout=120)
    assert res.returncode == 4
    assert res.stderr.strip() == "error: git is not installed or not on PATH"


def test_closed_stdout_exits_quietly_with_the_broken_pipe_status():
    proc = subprocess.Popen([PY, "-m", "perfq", "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader went away before perfq wrote (`perfq ... | head -c1`)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141, err
    assert err == b""


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_full_stdout_is_one_line_and_exit_4():
    with open("/dev/full", "w") as full:
        res = subprocess.run([PY, "-m", "perfq", "--help"], stdout=full, stderr=subprocess.PIPE, text=True,
                             timeout=120)
    assert res.returncode == 4
    assert res.stderr.strip() == "error: cannot write the output: No space left on device"


def test_affected_table_wraps_names_at_separators(monkeypatch, capsys):
    from perfq.cli.render_affected import table
    from query.document import AffectedDoc, Confidence, Reason, SelectedBenchmark, Source
    from query.model import ChainStep, StepKind

    long = "torch.nn.functional.fancy_softmax_with_channels_last_memory_format"
    chain = (ChainStep(StepKind.FUNCTION, "inner_loop<scalar_t>"), ChainStep(StepKind.OP, "softmax_op.out"),
             ChainStep(StepKind.FUNCTION, long), ChainStep(StepKind.BENCHMARK, "softmax_op_test"))
    bench = SelectedBenchmark("softmax_op_test", "pt/softmax_op_test.py", ("SoftmaxOpBenchmark",), (),
                              ("softmax_op",), ("eager",), ("cpu",), Confidence.high, Source.static,
                              (Reason("inner_loop", chain),))
    doc = AffectedDoc("a" * 40, "b" * 40, False, False, {}, (), (), (bench,), (), ("softmax_op",), (), (), (), ())
    monkeypatch.setenv("COLUMNS", "80")
    table(doc)
    text = capsys.readouterr().out
    assert max(len(line) for line in text.splitlines()) <= 80
    cells = " ".join(line.split("│")[4].strip() for line in text.splitlines() if line.count("│") == 5)
    for word in re.split(r"[._]", long):
        assert word in cells.split() or re.search(rf"[._ ]{word}[._ ]|^{word}[._]|[._ ]{word}$", cells), word


# --- docs/bisect.md gives the real exit codes --------------------------------------------------------------


def test_bisect_exit_codes_are_the_documented_ones(tmp_path):
    from perfq.bisect.step import STEP_BAD, STEP_GOOD, STEP_SKIP
    from perfq.options import EXIT_GATE

    git(tmp_path, "init", "-q")
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "one")
    doc = (Path(__file__).parents[1] / "docs" / "bisect.md").read_text()
    codes = {
        "empty range": run_perfq(tmp_path, "bisect", "HEAD", "HEAD", "--", "true").returncode,
        "step without values": run_perfq(tmp_path, "bisect-step", "--", "true").returncode,
        "step unknown option": run_perfq(tmp_path, "bisect-step", "--nope").returncode,
    }
    assert codes == {"empty range": 4, "step without values": 128, "step unknown option": 2}
    rows = set(re.findall(r"^\| (\d+) \|", doc, flags=re.M))
    assert {str(c) for c in (*codes.values(), EXIT_GATE, STEP_GOOD, STEP_BAD, STEP_SKIP, 130)} <= rows
    assert "1 when the bisection stopped" not in doc
