"""Budgeted test plans (perfq.run.plan): the weighted set cover, the budget cut and its reasons,
configs spread, the canary stand-in, shards balanced by cost, and duration/shard parsing."""

from __future__ import annotations

import json
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.errors import PerfqError
from perfq.options import EXIT_USAGE
from perfq.run.plan import (
    Candidate,
    CostSource,
    LeftOut,
    Pick,
    RunShape,
    check_shard,
    config_of,
    elements_of,
    fit_plan,
    parse_duration,
    shard_of,
    split,
)
from perfq.run.plan_inputs import candidates_from
from schema.index_store import TracedTestOps
from tests.affected_docs import affected_doc, canary, selected
from tests.aten_fixture import commit_all, make_repo, perfq, replace_in

ONE_PASS = RunShape(rounds=1, sides=1, process_start=0.0)


def cand(bench: str, test: str, ops: str, cost: float, canary: bool = False, device: str = "cpu",
         module: str = "m") -> Candidate:
    return Candidate(bench, test, module, frozenset(ops.split()) if ops else frozenset(),
                     config_of(test, device), cost, CostSource.history, canary)


def reasons(plan) -> dict[str, LeftOut]:
    return {g.benchmark: g.reason for g in plan.left_out}


def budget_for(seconds_per_pass: float, shape: RunShape = ONE_PASS) -> float:
    """The budget whose planned share is ``seconds_per_pass`` per round and side."""
    from perfq.run.plan import HEADROOM

    return seconds_per_pass * shape.rounds * shape.sides / HEADROOM


def test_cover_prefers_operators_per_second():
    # one 10 s test covers a b c; two 1 s tests cover a b and c: the cheap pair wins
    pool = [cand("big", "t_all", "a b c", 10.0), cand("ab", "t_ab", "a b", 1.0), cand("c", "t_c", "c", 1.0)]
    plan = fit_plan(pool, ops_reached=4, budget_seconds=budget_for(5.0), shape=ONE_PASS)
    assert {t.test for t in plan.tests} == {"t_ab", "t_c"}
    assert all(t.pick == Pick.covers for t in plan.tests)
    assert (plan.ops_covered, plan.ops_executable, plan.coverage) == (3, 3, 1.0)
    assert reasons(plan) == {"big": LeftOut.redundant}  # covered by the pair, and same configs


def test_budget_cut_states_what_is_left_out_and_why():
    pool = [cand("a", "a_M8", "x", 2.0), cand("b", "b_M8", "y", 2.0), cand("c", "c_M8", "z", 2.0),
            cand("c2", "c_M8", "z", 3.0), cand("gpu", "g_M8_cuda", "w", 0.1, device="cuda")]
    plan = fit_plan(pool, ops_reached=10, budget_seconds=budget_for(4.5), shape=ONE_PASS)
    assert len(plan.tests) == 2 and plan.ops_covered == 2 and plan.ops_executable == 4  # w counts, on any device
    why = reasons(plan)
    assert why["gpu"] == LeftOut.other_device
    left = [b for b in ("a", "b", "c") if b not in plan.benchmarks]
    assert len(left) == 1 and why[left[0]] == LeftOut.over_budget
    assert why["c2"] in (LeftOut.over_budget, LeftOut.redundant)
    assert set(plan.uncovered_ops) == {"w", *({"a": "x", "b": "y", "c": "z"}[b] for b in left)}
    assert plan.estimated_seconds <= budget_for(4.5)


def test_no_budget_runs_everything_selected_on_the_device():
    pool = [cand("a", "a1", "x", 2.0), cand("a", "a2", "x", 2.0), cand("g", "g_cuda", "y", 1.0, device="cuda")]
    plan = fit_plan(pool, ops_reached=2, budget_seconds=None, shape=ONE_PASS)
    assert [t.test for t in plan.tests] == ["a1", "a2"] and {t.pick for t in plan.tests} == {Pick.all}
    assert reasons(plan) == {"g": LeftOut.other_device}


def test_spread_adds_configs_of_covered_modules_with_the_budget_left():
    pool = [cand("add", "add_M8_dtypetorch.float32", "add", 1.0),
            cand("add", "add_M8_dtypetorch.float16", "add", 1.0),
            cand("add", "add_M4096_N4096_dtypetorch.float32", "add", 1.0)]
    plan = fit_plan(pool, ops_reached=1, budget_seconds=budget_for(10.0), shape=ONE_PASS)
    # the cover is the test of a timed size; the 8-element float16 one adds both its dtype and its
    # size, and leaves the 8-element float32 one nothing new
    assert [(t.test, t.pick) for t in plan.tests] == [("add_M4096_N4096_dtypetorch.float32", Pick.covers),
                                                      ("add_M8_dtypetorch.float16", Pick.spread)]
    assert reasons(plan) == {"add": LeftOut.redundant}
    tight = fit_plan(pool, ops_reached=1, budget_seconds=budget_for(1.0), shape=ONE_PASS)
    assert len(tight.tests) == 1 and {g.reason for g in tight.left_out} == {LeftOut.over_budget}


def test_canary_set_stands_in_for_the_full_set_and_is_sized_to_the_budget():
    canary = [cand("unary", f"relu_M{n}", "relu abs", 1.0, canary=True) for n in (8, 4096, 1 << 20)]
    full = [cand("binary", f"add_M{n}", "relu", 0.5) for n in range(40)]  # executes nothing the canary misses
    extra = [cand("sort", "sort_M8", "sort", 1.0)]  # an operator no canary test executes
    pool = canary + full + extra
    plan = fit_plan(pool, ops_reached=3, budget_seconds=budget_for(30.0), shape=ONE_PASS, shared=True)
    assert plan.canary_stand_in and plan.canary_benchmarks == ("unary",)
    assert set(plan.benchmarks) == {"unary", "sort"}  # not the 40 binary tests, though they fit the budget
    assert reasons(plan)["binary"] == LeftOut.canary_stands_in
    assert plan.coverage == 1.0
    small = fit_plan(pool, ops_reached=3, budget_seconds=budget_for(2.0), shape=ONE_PASS, shared=True)
    assert len(small.tests) == 2  # one canary test and sort: the canary set shrinks to the budget
    not_shared = fit_plan(pool, ops_reached=3, budget_seconds=budget_for(30.0), shape=ONE_PASS)
    assert not not_shared.canary_stand_in and LeftOut.canary_stands_in not in {g.reason for g in not_shared.left_out}


def test_estimate_counts_rounds_sides_and_process_starts_for_default_costs():
    shape = RunShape(rounds=5, sides=2, batch=True, process_start=4.0)
    pool = [Candidate("a", "a1", "m", frozenset({"x"}), config_of("a1"), 1.0, CostSource.default),
            Candidate("b", "b1", "m", frozenset({"y"}), config_of("b1"), 1.0, CostSource.default)]
    plan = fit_plan(pool, ops_reached=2, budget_seconds=None, shape=shape)
    # per round and side: 2 tests + one process start (batched) + 2 file imports of 1 s
    assert plan.estimated_seconds == pytest.approx(10 * (2.0 + 4.0 + 2.0))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=0.05, max_value=30.0), min_size=1, max_size=60), st.integers(1, 6))
def test_shards_are_balanced_by_cost(costs, n):
    pool = [cand(f"b{i % 7}", f"t{i}", f"op{i}", c) for i, c in enumerate(costs)]
    shape = RunShape(rounds=1, sides=1, process_start=0.0, shards=n, batch=False)
    plan = fit_plan(pool, ops_reached=len(pool), budget_seconds=None, shape=shape)
    shards = split(plan, shape)
    assert len(shards) == n
    assert sorted(t.test for s in shards for t in s.tests) == sorted(t.test for t in plan.tests)
    loads = [sum(t.cost_seconds for t in s.tests) for s in shards]
    # LPT over units (a benchmark's tests, or single tests of a benchmark heavier than a shard's share):
    # no shard exceeds the mean by more than the largest unit
    mean = sum(loads) / n
    assert max(loads) <= mean + max(mean, max(t.cost_seconds for t in plan.tests)) + 1e-9
    for s in shards:  # a light benchmark is never split across shards
        for bench in s.benchmarks:
            weight = sum(t.cost_seconds for t in plan.tests if t.benchmark == bench)
            if weight <= mean:
                assert all(t.benchmark != bench for other in shards if other is not s for t in other.tests)
    assert shard_of(plan, shape, 1).tests == shards[0].tests


def test_shards_give_each_shard_a_whole_budget():
    pool = [cand("b", f"t{i}", f"op{i}", 1.0) for i in range(40)]
    one = fit_plan(pool, 40, budget_for(10.0), ONE_PASS)
    four = RunShape(rounds=1, sides=1, process_start=0.0, shards=4)
    plan = fit_plan(pool, 40, budget_for(10.0), four)
    assert len(one.tests) == 10 and len(plan.tests) == 40
    assert plan.estimated_seconds == pytest.approx(10.0)  # the longest shard, not the sum


@pytest.mark.parametrize(("text", "seconds"), [("15m", 900), ("90s", 90), ("1h", 3600), ("1.5h", 5400),
                                               ("1800", 1800), (" 2 min ", 120)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["-3m", "abc", "0", "0m", "5d", "", "inf", "nan"])
def test_bad_durations_are_one_line_usage_errors(text):
    with pytest.raises(PerfqError) as err:
        parse_duration(text)
    assert err.value.exit_code == EXIT_USAGE and "\n" not in str(err.value) and "--budget" in str(err.value)


def test_shard_numbers():
    assert check_shard(None, None) == (1, 1) and check_shard(2, 3) == (2, 3) and check_shard(None, 4) == (1, 4)
    for shard, shards in ((5, 2), (0, 2), (1, None), (1, 0)):
        with pytest.raises(PerfqError) as err:
            check_shard(shard, shards)
        assert err.value.exit_code == EXIT_USAGE


@pytest.mark.parametrize("shards", [0, -2])
def test_shards_below_one_is_said_as_given(shards):
    """``affected --shards 0`` has no --shard: the error names what was given (not ``--shard K needs --shards N``)."""
    with pytest.raises(PerfqError) as err:
        check_shard(None, shards)
    assert str(err.value) == f"--shards must be 1 or more, got {shards}" and err.value.exit_code == EXIT_USAGE


def test_config_and_sizes_from_test_names():
    assert elements_of("add_M8_N32_K256_cpu") == 8 * 32 * 256
    assert elements_of("cat_sizes(1024,1024,2)_N2_dim2_cpu") == 1024 * 1024 * 2 * 2 * 2
    c = config_of("add_M64_N64_K64_cpu_dtypetorch.float16", "cpu", backward=True)
    assert (c.dtype, c.size, c.device, c.direction) == ("float16", "medium", "cpu", "backward")
    assert config_of("relu_M8_dtype_onetorch.int32").dtype == "int32"


def test_candidates_from_an_affected_document():
    selection = (selected("add_test", tests=("add_M8_cpu",), modules=("add",), ops=("add.Tensor",)),
                 selected("script_bench", ops=("mul.Tensor",)))
    doc = affected_doc(selection, (canary("loops", "unary_test"),), ops=("add.Tensor", "mul.Tensor", "relu"))
    rows = [TracedTestOps("add_test", "add_M8_cpu", "add", "short", False, "cpu", ("add.Tensor",)),
            TracedTestOps("add_test", "add_M64_cpu", "add", "short", False, "cpu", ("add.Tensor",)),  # not selected
            TracedTestOps("unary_test", "relu_M8_cpu", "relu", "short", False, "cpu", ("relu",)),
            TracedTestOps("unary_test", "exp_M8_cpu", "exp", "short", False, "cpu", ())]  # runs no reached op
    walls = {("add_test", "add_M8_cpu"): 0.7}
    got = {(c.benchmark, c.test): c for c in candidates_from(doc, rows, walls)}
    assert set(got) == {("add_test", "add_M8_cpu"), ("unary_test", "relu_M8_cpu"), ("script_bench", "")}
    assert got[("add_test", "add_M8_cpu")].cost == 0.7 and got[("add_test", "add_M8_cpu")].cost_source == "history"
    assert got[("unary_test", "relu_M8_cpu")].canary and got[("unary_test", "relu_M8_cpu")].cost_source == "default"
    assert got[("script_bench", "")].ops == {"mul.Tensor"}
    # a canary benchmark without traces, a selected one without operators: whole files that stand for themselves
    doc = affected_doc((*selection, selected("bare_test", tests=("BareBenchmark",))),
                       (canary("loops", "unary_test", "untraced_test"),), ops=doc.ops)
    got = {(c.benchmark, c.test): c for c in candidates_from(doc, rows, walls)}
    assert got[("untraced_test", "")].ops == {"file:untraced_test"} and got[("untraced_test", "")].canary
    plan = fit_plan(list(got.values()), ops_reached=3, budget_seconds=3600.0)
    assert {"bare_test", "untraced_test", "script_bench"} <= set(plan.benchmarks)
    assert plan.ops_executable == 3  # add.Tensor, mul.Tensor, relu: the files standing for themselves do not count


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_affected_budget_prints_the_plan_and_errors_are_one_line(tmp_path):
    repo = make_repo(tmp_path / "r")
    assert perfq(repo, "index", "-q", "--no-trace").returncode == 0
    replace_in(repo, "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp", "out[i] * 2", "out[i] * 3")
    commit_all(repo)
    proc = perfq(repo, "affected", "HEAD~1", "--budget", "5m", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    plan = doc["plan"]
    assert plan["budget_seconds"] == 300 and plan["tests"] and 0 < plan["estimated_seconds"] <= 300
    assert {t["benchmark"] for t in plan["tests"]} <= {b["name"] for b in doc["benchmarks"]}
    assert "plan" not in json.loads(perfq(repo, "affected", "HEAD~1", "--format", "json").stdout)
    matrix = json.loads(perfq(repo, "affected", "HEAD~1", "--format", "gha-matrix", "--shards", "2").stdout)
    assert [e["shard"] for e in matrix["include"]] == [1, 2] and all(e["shards"] == 2 for e in matrix["include"])
    table = perfq(repo, "affected", "HEAD~1", "--budget", "90s", env={"CI": "true", "COLUMNS": "80"})
    assert "plan: " in table.stdout and "budget 1m 30s" in table.stdout
    for args in (("--budget", "-3m"), ("--budget", "abc")):
        bad = perfq(repo, "affected", "HEAD~1", *args)
        assert bad.returncode == EXIT_USAGE and bad.stderr.startswith("error: --budget") and \
            bad.stderr.count("\n") == 1, bad.stderr
    bad = perfq(repo, "run", "--label", "x", "--side", "head", "--affected", "HEAD~1", "--shard", "5", "--shards", "2")
    assert bad.returncode == EXIT_USAGE and bad.stderr == "error: --shard 5 is not one of 1..2 (--shards 2)\n"
    bad = perfq(repo, "run", "--label", "x", "--side", "head", "--bench", "softmax", "--budget", "abc")
    assert bad.returncode == EXIT_USAGE and bad.stderr.startswith("error: --budget: 'abc' is not a duration")


def _shared_doc():
    from query.document import AffectedDoc, CanaryBenchmark, CanaryHit, Confidence, Reason, SelectedBenchmark, Source
    from query.model import ChainStep, StepKind

    reason = Reason("f", (ChainStep(StepKind.FUNCTION, "f"), ChainStep(StepKind.OP, "op")))
    benches = tuple(SelectedBenchmark(f"b{i}_test", f"pt/b{i}_test.py", (f"t{i}_M8",), ("m",), ("op",), ("eager",),
                                      ("cpu",), Confidence.high, Source.traced, (reason,))
                    for i in range(12))
    hit = CanaryHit("tensor-iterator", "changed TensorIterator.cpp matches the tensor-iterator set", "loops",
                    (CanaryBenchmark("b3_test", "pt/b3_test.py"),))
    return AffectedDoc("a" * 40, "b" * 40, False, True, {}, (), (), benches, (hit,), ("op",), ("lonely",), (), (), ())


def test_shared_infrastructure_headline_comes_before_the_long_lists(monkeypatch):
    from perfq.cli import render_affected

    doc = _shared_doc()
    plan = fit_plan([cand("b3_test", "t3_M8", "op", 1.0, canary=True)] +
                      [cand(f"b{i}_test", f"t{i}_M8", "op", 1.0) for i in range(12) if i != 3],
                      ops_reached=1, budget_seconds=300.0, shared=True)
    md = render_affected.markdown(doc, plan)
    assert md.index("Shared infrastructure") < md.index("plan: 1 of 12 candidate tests") < md.index("| `b0_test`")
    assert "Canary set (1): b3_test" in md and "canary set stands in for them: 11 tests" in md
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("CI", "true")
    import io

    from rich.console import Console

    out = io.StringIO()
    monkeypatch.setattr(render_affected, "console", lambda: Console(file=out, width=80, color_system=None))
    render_affected.table(doc, plan=plan)
    text = out.getvalue()
    assert text.index("Shared infrastructure") < text.index("plan: ") < text.index("Benchmarks to run")
    assert "NO BENCHMARK" in text[text.index("Benchmarks to run"):]


def test_an_untraced_benchmark_keeps_one_test_in_the_plan():
    # (ciflow) an index without traces (no torch where it was built) knows no operator of a test: such a
    # selected benchmark was planned away entirely as "redundant"; one of its tests now runs
    plan = fit_plan([cand("untraced_test", "U_N8", "", 1.0), cand("untraced_test", "U_N64", "", 1.0),
                       cand("traced_test", "T_N8", "add", 1.0)], 1, 100.0, ONE_PASS)
    assert sorted(t.benchmark for t in plan.tests) == ["traced_test", "untraced_test"]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_affected_budget_previews_the_plan_the_run_makes(tmp_path):
    """`perfq affected --budget` prints the plan `perfq run --ab --affected` runs at its defaults
    (it once priced 5 rounds of 300 iterations while the run made 3 rounds of 110: 66% against 94%)."""
    repo = make_repo(tmp_path / "r")
    assert perfq(repo, "index", "-q", "--no-trace").returncode == 0
    replace_in(repo, "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp", "out[i] * 2", "out[i] * 3")
    commit_all(repo)
    ci = {"CI": "true", "COLUMNS": "200"}
    preview = perfq(repo, "affected", "HEAD~1", "--budget", "5m", env=ci)
    run = perfq(repo, "run", "--label", "p", "--ab", "--affected", "HEAD~1", "--budget", "5m",
                "--history", str(tmp_path / "h.duckdb"), env=ci)
    planned = [line for line in preview.stdout.splitlines() if line.startswith("plan: ")]
    ran = [line for line in run.stderr.splitlines() if line.startswith("plan: ")]
    assert planned and planned == ran[:1], (preview.stdout, run.stderr)
