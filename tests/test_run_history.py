"""Results with memory: step detection in a trend, `perfq history` over nightly runs, and
`perfq compare --baseline` against a stored run."""

from __future__ import annotations

import json
import random
import sys

import jsonschema
import pytest

from common.documents import json_schema
from perfq.options import EXIT_ERROR, EXIT_GATE
from perfq.run.report import HistoryDocument
from perfq.run.trend import Point, find_steps, sparkline, trend
from tests.run_fakebench import ALL_TESTS_SHORT, make_bench_root

PY = sys.executable


def test_one_step_in_noise_is_found_where_it_is():
    rng = random.Random(7)
    values = [100 * (1 + rng.gauss(0, 0.01)) for _ in range(12)] + [125 * (1 + rng.gauss(0, 0.01)) for _ in range(9)]
    assert [i for i, _ in find_steps(values)] == [12]


def test_two_steps_and_no_step():
    rng = random.Random(3)
    levels = [100] * 8 + [130] * 8 + [90] * 8
    values = [v * (1 + rng.gauss(0, 0.01)) for v in levels]
    assert [i for i, _ in find_steps(values)] == [8, 16]
    flat = [100 * (1 + rng.gauss(0, 0.03)) for _ in range(30)]
    assert find_steps(flat) == []


def test_one_wild_run_is_not_a_step_and_small_shifts_are_ignored():
    values = [100.0] * 10 + [400.0] + [100.0] * 10  # one run on a busy machine
    assert find_steps(values) == []
    assert find_steps([100.0] * 10 + [102.0] * 10) == []  # 2% < min effect 5%
    assert [i for i, _ in find_steps([100.0] * 10 + [102.0] * 10, min_effect=0.01)] == [10]


def test_trend_reports_the_step_with_its_run():
    points = [Point(f"nightly-{i}", "head", f"c{i}", f"2024-06-{i + 1:02d}", 10.0 if i < 5 else 13.0, 5)
              for i in range(10)]
    tr = trend(("t", "eager", "cpu", "forward_time", "us"), points)
    (step,) = tr.steps
    assert (step.index, step.label, step.ref, step.before, step.after) == (5, "nightly-5", "c5", 10.0, 13.0)
    assert step.change == pytest.approx(0.3)
    assert sparkline([1, 1, 2, 2]) == "▁▁██" and sparkline([5, 5]) == "▄▄"


@pytest.fixture(scope="module")
def nightly(tmp_path_factory):
    """Eight nightly head runs of the fake benchmark; the fifth got 30% slower."""
    tmp = tmp_path_factory.mktemp("nightly")
    root = make_bench_root(tmp)
    mp = pytest.MonkeyPatch()
    from perfq.cli import main

    common = ["--bench-root", str(root), "--history", str(tmp / "h.duckdb"), "--repo", str(tmp)]
    for i in range(8):
        mp.setenv("FAKE_SLOW", "1" if i < 4 else "1.3")
        mp.setenv("FAKE_NOISE", "0.01")
        # 6 samples of 1% noise: a compare against one of them reaches its resolution (3%) on every test
        main(["run", "-l", f"nightly-{i}", "--side", "head", "--bench", "fake", "--repeat", "6", *common])
    mp.undo()
    return tmp, root, common


def test_history_shows_the_step_of_the_nightly_runs(nightly, cli, monkeypatch):
    tmp, _, common = nightly
    res = cli(tmp, "history", "fake", "--label", "nightly-*", "--format", "json", *common[2:])
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    jsonschema.validate(doc, json_schema(HistoryDocument))
    assert {t["test"] for t in doc["trends"]} == ALL_TESTS_SHORT
    for t in doc["trends"]:
        assert len(t["points"]) == 8
        (step,) = t["steps"]
        assert step["label"] == "nightly-4" and step["change"] == pytest.approx(0.3, abs=0.05)
    monkeypatch.setenv("COLUMNS", "80")
    table = cli(tmp, "history", "fake", *common[2:])
    text = " ".join(table.stdout.split())
    assert "4 test(s) over 8 run(s)" in text and "4 with a step" in text and "at nightly-4" in text
    assert max(len(line) for line in table.stdout.splitlines()) <= 80
    none = cli(tmp, "history", "fake", "--label", "weekly-*", *common[2:])
    assert none.returncode == EXIT_ERROR and "matching the filters" in none.stderr


def test_compare_against_a_stored_baseline(nightly, cli, monkeypatch):
    tmp, root, common = nightly
    monkeypatch.setenv("FAKE_SLOW", "1.3")
    pr = cli(tmp, "run", "-l", "pr", "--side", "head", "--bench", "fake", "--repeat", "5", *common)
    assert pr.returncode == 0, pr.stderr
    slower = cli(tmp, "compare", "pr", "--baseline", "nightly-0", "--format", "json", *common[2:])
    doc = json.loads(slower.stdout)
    assert doc["label"] == "pr:head vs nightly-0:head"
    assert doc["summary"]["regression"] == len(ALL_TESTS_SHORT)
    same = cli(tmp, "compare", "pr", "--baseline", "nightly-7:head", "--format", "json", *common[2:])
    assert json.loads(same.stdout)["summary"]["regression"] == 0
    gate = cli(tmp, "compare", "pr", "--baseline", "nightly-0", "--fail-on-regression", *common[2:])
    assert gate.returncode == EXIT_GATE
    for bad, message in (("nightly-0:base", "has no base run"), ("nope", "no runs labelled 'nope'"),
                         ("nightly-0:sideways", "expected base or head")):
        res = cli(tmp, "compare", "pr", "--baseline", bad, *common[2:])
        assert res.returncode == EXIT_ERROR and message in res.stderr, res.stderr


def test_compare_against_a_baseline_lists_the_tests_in_one_run_apart(nightly, cli):
    """Tests measured in only one of the two runs are not `unknown`: they are listed apart, by side."""
    tmp, _, common = nightly
    pr = cli(tmp, "run", "-l", "pr-one", "--side", "head", "--bench", "fake", "--test", "add_M8_cpu",
             "--repeat", "5", "--priority", "normal", *common)
    assert pr.returncode == 0, pr.stderr
    res = cli(tmp, "compare", "pr-one", "--baseline", "nightly-7", "--format", "json", *common[2:])
    doc = json.loads(res.stdout)
    assert [t["test"] for t in doc["tests"]] == ["add_M8_cpu"] and doc["summary"]["unknown"] == 0
    assert sorted(doc["only_base"]) == sorted(f"fake_test/{t}" for t in ALL_TESTS_SHORT - {"add_M8_cpu"})
    assert doc["only_head"] == [] and not doc["problems"]
    md = cli(tmp, "compare", "pr-one", "--baseline", "nightly-7", "--format", "markdown", *common[2:]).stdout
    assert f"Not compared, only in the baseline ({len(ALL_TESTS_SHORT) - 1})" in md
    table = cli(tmp, "compare", "pr-one", "--baseline", "nightly-7", *common[2:]).stdout
    assert f"not compared, only in the baseline ({len(ALL_TESTS_SHORT) - 1}): " in " ".join(table.split())
