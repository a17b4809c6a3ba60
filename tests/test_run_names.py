"""Test names that hold an object's address (cat_test's lambda sizes) are the same in every process:
the run pairs its base and head samples, selects such a test by name, and reads a history stored
before the names were masked; the tracer's tests carry the same names."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import duckdb
from typer.testing import CliRunner

from common.test_names import has_address, stable_test_name
from indexer.trace import TracedTest
from perfq.cli import app
from perfq.run import opbench
from perfq.run.opbench import Measurement, OpBenchSpec
from perfq.run.runs import Run
from perfq.run.store import save_runs
from schema.results_rows import Side
from tests.run_fakebench import FAKE_MODULE, make_bench_root

PY = sys.executable
RAW = "cat_sizes[<function<lambda>at0x7f1e0088ae80>,111,65]_N5_dim0_cpu"
STABLE = "cat_sizes[<function<lambda>>,111,65]_N5_dim0_cpu"

# a benchmark file that names one test as PyTorch's harness names cat_test's: str() of a lambda, spaces removed,
# so its address differs in every process
CAT_MODULE = FAKE_MODULE.replace(
    '    ("mul", "mul_M8_cpu", "short", False, 12.0),\n',
    '    ("mul", "mul_M8_cpu", "short", False, 12.0),\n'
    '    ("cat", ("cat_sizes[" + str(lambda: 0) + ",111,65]_N5_dim0_cpu").replace(" ", ""), "short", False, 30.0),\n',
)


def test_an_address_is_masked_and_other_names_are_kept():
    assert stable_test_name(RAW) == STABLE
    assert stable_test_name(STABLE) == STABLE  # idempotent
    assert stable_test_name("<function <lambda> at 0x7f0a24273ec0>") == "<function <lambda>>"
    assert stable_test_name("add_M8_N2_K1_cpu") == "add_M8_N2_K1_cpu"
    assert has_address(RAW) and not has_address(STABLE)


def test_the_parser_gives_one_name_to_the_test_of_two_processes():
    spec = OpBenchSpec("cat_test", tests=(STABLE,))
    outputs = [f"# Name: {RAW.replace('7f1e0088ae80', address)}\nForward Execution Time (us) : {value}\n"
               for address, value in (("7f1e0088ae80", 10.0), ("55d0c0ffee00", 11.0))]
    found = [opbench.parse_invocation(out, spec) for out in outputs]
    assert found == [[Measurement(STABLE, 10.0, device="cpu")], [Measurement(STABLE, 11.0, device="cpu")]]
    batch = opbench.parse_batch(f"{opbench.BATCH_MARK}cat_test\n{outputs[1]}", [spec])
    assert batch["cat_test"] == ([Measurement(STABLE, 11.0, device="cpu")], "")


def test_one_test_naming_an_object_is_selected_by_the_wrapper_not_by_the_runners_exact_name():
    assert not opbench.runs_wrapped(OpBenchSpec("cat_test", tests=("cat_sizes[1,1,1]_N2_dim0_cpu",)))
    assert opbench.runs_wrapped(OpBenchSpec("cat_test", tests=(STABLE,)))
    argv, _ = opbench.build_command("py", OpBenchSpec("cat_test", tests=(STABLE,)), opbench.RunnerCaps())
    assert "--test-name" not in argv


def _cat_root(tmp_path: Path) -> Path:
    root = make_bench_root(tmp_path)
    (root / "pt" / "cat_test.py").write_text(CAT_MODULE)
    return root


def _run(tmp_path: Path, root: Path, label: str, *extra: str) -> dict:
    common = ["--history", str(tmp_path / "h.duckdb"), "--repo", str(tmp_path)]
    res = CliRunner().invoke(app, ["run", "--label", label, "--ab", "--base-python", PY, "--head-python", PY,
                                   "--bench", "cat", "--bench-root", str(root), "--repeat", "3", "--no-adaptive",
                                   *extra, *common])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["compare", label, "--format", "json", *common])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_perfq_run_ab_pairs_the_samples_of_a_test_named_with_an_address(tmp_path):
    root = _cat_root(tmp_path)
    doc = _run(tmp_path, root, "all")
    by = {t["test"]: t for t in doc["tests"]}
    assert doc["only_base"] == doc["only_head"] == []
    assert (by[STABLE]["n_base"], by[STABLE]["n_head"]) == (3, 3)  # six processes, six addresses, one test
    # selected alone by a name with another process's address (an index traced before the names were masked):
    # the runner's exact --test-name would never match it, the wrapper compares stable names
    doc = _run(tmp_path, root, "one", "--test", RAW)
    assert [(t["test"], t["n_base"], t["n_head"]) for t in doc["tests"]] == [(STABLE, 3, 3)]


def _old_run(side: Side, address: str, value: float) -> Run:
    run = Run("old", side)
    for i in range(3):
        run.add_sample(i, "cat_test", Measurement(RAW.replace("7f1e0088ae80", f"{address}{i}"), value))
    return run


def test_a_history_stored_with_addresses_still_compares_with_a_note(tmp_path):
    hist = tmp_path / "h.duckdb"
    save_runs(hist, [_old_run(Side.base, "7f00", 10.0), _old_run(Side.head, "7f11", 10.0)])
    common = ["--history", str(hist), "--repo", str(tmp_path)]
    res = CliRunner().invoke(app, ["compare", "old", "--format", "json", *common])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [(t["test"], t["n_base"], t["n_head"]) for t in doc["tests"]] == [(STABLE, 3, 3)]
    assert any("6 stored test name(s) held an object's address" in w for w in doc["warnings"])
    res = CliRunner().invoke(app, ["history", "cat_test", "--test", RAW, "--format", "json", *common])
    assert res.exit_code == 0, res.output
    assert sorted((r["test"], r["side"], r["n"]) for r in json.loads(res.stdout)["rows"]) == [
        (STABLE, "base", 3), (STABLE, "head", 3)]
    con = duckdb.connect(str(hist), read_only=True)
    try:  # read in the stable form, never rewritten
        assert con.execute("SELECT count(DISTINCT test) FROM samples").fetchone()[0] == 6
    finally:
        con.close()


def test_the_tracers_tests_carry_the_stable_name():
    traced = TracedTest.from_json({"name": RAW, "mode": "real", "ops": ["aten::cat"]})
    assert traced.name == STABLE
