"""`perfq coverage` end to end: formats, errors, scaffold, on a fixture index and git repo."""

from __future__ import annotations

import csv
import io
import json
import subprocess

import pytest
from typer.testing import CliRunner

from perfq.cli import app
from perfq.options import EXIT_ERROR
from tests.coverage_fixture_db import build_index, build_repo


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("cov")
    commits = build_repo(root / "repo")
    db = build_index(root / "index.duckdb")
    return root / "repo", db, commits


def _run(*args: str):
    result = CliRunner().invoke(app, ["coverage", *args], env={"COLUMNS": "200"})
    return result


def test_json_report_shape_and_churn_ranking(setup):
    repo, db, _ = setup
    res = _run("--repo", str(repo), "--db", str(db), "--format", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert set(data) == {"summary", "ops"}
    first = data["ops"][0]
    assert {"op", "overloads", "benchmarks", "churn", "kernel_lines", "dispatch_keys"} <= set(first)
    assert [(o["op"], o["churn"]) for o in data["ops"][:2]] == [("lerp", 3), ("add", 1)]
    assert data["ops"][1]["benchmarks"] == ["add_test"]
    assert data["summary"]["history"]["commits"] == 3
    assert data["summary"]["ops_covered"] == 2 and data["summary"]["ops_total"] == 5


def test_since_window_changes_churn(setup):
    repo, db, _ = setup
    res = _run("--repo", str(repo), "--db", str(db), "--format", "json", "--since", "40.years")
    ops = {o["op"]: o["churn"] for o in json.loads(res.stdout)["ops"]}
    assert ops["add"] == 2 and ops["lerp"] == 3


def test_infra_ops_bound_drops_shared_functions(setup):
    repo, db, _ = setup
    # helper_common (c1) reaches add.Tensor, add.Scalar and lerp.Scalar: more than 2 ops
    res = _run("--repo", str(repo), "--db", str(db), "--format", "json", "--infra-ops", "2")
    data = json.loads(res.stdout)
    ops = {o["op"]: o["churn"] for o in data["ops"]}
    assert ops["add"] == 0 and ops["lerp"] == 2
    assert data["summary"]["history"]["commits_touching_infrastructure"] == 1
    assert data["summary"]["history"]["infra_ops"] == 2


def test_bad_infra_ops_config_is_one_line_error(setup, tmp_path):
    repo, db, _ = setup
    cfg_repo = tmp_path / "cfg"
    subprocess.run(["git", "clone", "-q", str(repo), str(cfg_repo)], check=True)
    (cfg_repo / "perfq.toml").write_text("[tool.perfq]\ncoverage_infra_ops = 'lots'\n")
    res = _run("--repo", str(cfg_repo), "--db", str(db), "--format", "json")
    assert res.exit_code != 0 and "coverage_infra_ops must be a positive integer" in str(res.exception)


def test_csv_markdown_dispatch_and_top(setup):
    repo, db, _ = setup
    res = _run("--repo", str(repo), "--db", str(db), "--format", "csv", "--dispatch", "CUDA", "--top", "2")
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert [r["op"] for r in rows] == ["lerp", "add"]
    assert rows[0]["overloads"] == "lerp.Scalar" and rows[0]["covered"] == "0"
    md = _run("--repo", str(repo), "--db", str(db), "--format", "markdown", "--uncovered").stdout
    assert "| 1 | `lerp` | 3 |" in md and "**NO BENCHMARK**" in md and "`add`" not in md
    assert "`old_test`" in md  # stale benchmark listed
    full = _run("--repo", str(repo), "--db", str(db), "--format", "markdown").stdout
    assert "add_test (traced)" in full and "| softmax_test |" in full
    assert "## Benchmark files linked to no operator\n\n- `module_test`" in full


def test_table_and_html_out(setup, tmp_path):
    repo, db, _ = setup
    res = _run("--repo", str(repo), "--db", str(db))
    assert res.exit_code == 0 and "NO BENCHMARK" in res.stdout and "lerp" in res.stdout
    out = tmp_path / "r" / "cov.html"
    res = _run("--repo", str(repo), "--db", str(db), "--format", "html", "--out", str(out))
    assert res.exit_code == 0
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 3
    assert "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")  # nothing fetched
    assert "Top uncovered operators by churn" in page and ">lerp<" in page


def test_missing_index_is_one_line_error(tmp_path, cli):
    proc = cli(tmp_path, "coverage", "--repo", str(tmp_path), "--db", str(tmp_path / "no.duckdb"))
    assert proc.returncode == EXIT_ERROR
    assert proc.stderr.strip().splitlines() == [
        f"error: no perfq index at {tmp_path / 'no.duckdb'}; build one with `perfq index` at the repository root"
    ]


def test_corrupt_index_is_one_line_error(tmp_path, cli):
    bad = tmp_path / "bad.duckdb"
    bad.write_bytes(b"not a database at all" * 100)
    proc = cli(tmp_path, "coverage", "--repo", str(tmp_path), "--db", str(bad))
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1
    assert proc.stderr.startswith("error: ")


def test_scaffold_writes_compilable_file_and_refuses_overwrite(setup, tmp_path):
    repo, db, _ = setup
    out = tmp_path / "lerp_test.py"
    res = _run("--repo", str(repo), "--db", str(db), "--scaffold", "lerp", "--out", str(out))
    assert res.exit_code == 0, res.output
    text = out.read_text()
    compile(text, str(out), "exec")
    assert "torch.ops.aten.lerp.Tensor(" in text  # no default overload: .Tensor is preferred
    again = _run("--repo", str(repo), "--db", str(db), "--scaffold", "lerp", "--out", str(out))
    assert again.exit_code != 0 and "exists" in str(again.exception)
    exact = _run(
        "--repo", str(repo), "--db", str(db), "--scaffold", "aten::add.Tensor", "--out", str(tmp_path / "a.py")
    )
    assert exact.exit_code == 0 and "add_test" in exact.stderr
    covered_again = _run(
        "--repo", str(repo), "--db", str(db), "--scaffold", "aten::add.Tensor", "--out", str(tmp_path / "a.py")
    )
    assert covered_again.exit_code != 0 and "exists" in str(covered_again.exception)
    assert "already covered" not in covered_again.stderr  # the error is the one line: no note before it
    unknown = _run("--repo", str(repo), "--db", str(db), "--scaffold", "nope")
    assert unknown.exit_code != 0 and "unknown operator" in str(unknown.exception)
