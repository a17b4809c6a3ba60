"""Readable anywhere: at COLUMNS=80, compare, history, coverage and ir diff fit in 80 columns,
fold identifiers instead of cutting them (no '…'), and drop columns that are equal in every row."""

from __future__ import annotations

import io
import sys

import pytest
from rich.cells import cell_len
from rich.console import Console

from perfq.ir.store import IRRecord, store_collection
from perfq.run.compare import Verdict
from perfq.run.report import ComparisonDocument, SideInfo, SideStatus, Summary, TestRow
from perfq.run.views import print_comparison
from tests.coverage_fixture_db import build_index, build_repo
from tests.run_fakebench import make_bench_root
from tests.test_ir_cli import EDIT, ttir

PY = sys.executable
NARROW = {"COLUMNS": "80"}


def _legible(text: str) -> str:
    lines = text.splitlines()
    assert lines
    too_wide = [line for line in lines if cell_len(line) > 80]
    assert not too_wide, too_wide
    assert "…" not in text
    return " ".join(text.split())


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("narrow")
    root = make_bench_root(tmp, names=("fake_test", "other_test"))
    common = ["--history", str(tmp / "h.duckdb"), "--repo", str(tmp)]
    from perfq.cli import main

    main(["run", "-l", "ab", "--ab", "--base-python", PY, "--head-python", PY, "--bench", "fake", "--bench",
          "other", "--head-env", "FAKE_SLOW=1.5", "--bench-root", str(root), *common])
    return tmp, common


def test_compare_at_80_columns(results, perfq):
    tmp, common = results
    res = perfq(tmp, "compare", "ab", *common, env=NARROW)
    assert res.returncode == 0, res.stderr
    text = _legible(res.stdout)
    header = next(line for line in res.stdout.splitlines() if line.startswith("verdict"))
    assert header.split() == ["verdict", "benchmark/test", "base", "(us)", "head", "(us)", "change", "95%", "CI", "q"]
    assert "all tests: mode eager, device cpu" in text  # the same in every row: said once, not a column
    assert text.count("regression") == 8 + 1 and "bwdall" in res.stdout  # folded onto a second line, not cut


def test_long_identifiers_fold_instead_of_being_cut():
    long = "Softmax_N1_C3_H256_W256_cpu_channels_last_with_a_very_long_configuration_suffix_bwdall"
    row = TestRow("softmax_test", long, "eager", "cpu", 181.2, 2402.5, 12.26, (10.1, 14.0), 0.016,
                  Verdict.regression, "forward_time", "us", 5, 5, 0.05)
    side = SideInfo("r", "c", "2.6", "py", "host", "cpu", ("id",), SideStatus.complete, 5, ())
    doc = ComparisonDocument("pr", side, side, Summary(1, 0, 0, 0), (row,), ())
    con = Console(file=io.StringIO(), width=80, color_system=None)
    print_comparison(con, doc)
    out = con.file.getvalue()
    _legible(out)
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("verdict"))
    start, end = lines[header].index("test"), lines[header].index("base")
    rows = [line for line in lines[header + 1:] if line[:start].strip() in ("", "regression")]
    column = "".join(line[start:end].strip() for line in rows if not line.startswith(("base:", "head:")))
    assert column == long  # folded over several lines, every character kept
    assert "+1226%" in out and "+1010%..+1400%" in out  # large changes written compactly


def test_history_at_80_columns(results, perfq):
    tmp, common = results
    for args in ((), ("--runs",), ("--runs", "--test", "add_M8_cpu")):
        res = perfq(tmp, "history", "fake", *args, *common, env=NARROW)
        assert res.returncode == 0, res.stderr
        text = _legible(res.stdout)
        assert "add_M8_cpu" in text


def test_coverage_at_80_columns(tmp_path, perfq):
    build_repo(tmp_path / "repo")
    db = build_index(tmp_path / "index.duckdb")
    res = perfq(tmp_path, "coverage", "--repo", str(tmp_path / "repo"), "--db", str(db), env=NARROW)
    assert res.returncode == 0, res.stderr
    text = _legible(res.stdout)
    header = next(line for line in res.stdout.splitlines() if line.startswith("benchmarks"))
    assert header.split()[:3] == ["benchmarks", "#", "operator"]  # coverage first
    assert "CompositeExplicitAutograd" in res.stdout and "NO BENCHMARK" in text


def test_ir_diff_at_80_columns(tmp_path, perfq):
    db = tmp_path / "h.duckdb"
    rec = lambda kernel, text: IRRecord(kernel, "n=i32;num_warps=4", "cuda:90", "ttir", text)  # noqa: E731
    store_collection(db, "base", "manifest", [rec("kmod:copy_kernel", ttir())])
    store_collection(db, "head", "manifest", [rec("kmod:copy_kernel", ttir("/b/kmod.py", extra=EDIT))])
    res = perfq(tmp_path, "ir", "diff", "base", "head", "--history", str(db), "--no-diff", env=NARROW)
    assert res.returncode == 0, res.stderr
    assert "kmod:copy_kernel" in _legible(res.stdout)
