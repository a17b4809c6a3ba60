"""The generic JSON Schema helper, and documents that validate against the schema of their type."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum

import jsonschema
import pytest
from typer.testing import CliRunner

from common.documents import json_schema, to_json
from perfq.cli import app
from perfq.run.report import ComparisonDocument
from tests.test_run_compare import _document


class Color(str, Enum):
    red = "red"
    blue = "blue"


@dataclass(frozen=True)
class Leaf:
    name: str
    score: float | None = None


@dataclass(frozen=True)
class Tree:
    """A tree of leaves."""

    color: Color
    leaves: tuple[Leaf, ...]
    pair: tuple[int, str]
    tags: dict[str, int] = field(default_factory=dict)
    renamed: bool = field(default=False, metadata={"json": "is_renamed"})


def test_schema_from_type_hints_accepts_instances_and_rejects_wrong_shapes():
    schema = json_schema(Tree)
    doc = to_json(Tree(Color.red, (Leaf("a"), Leaf("b", 1.5)), (1, "x"), {"k": 2}))
    assert doc == {"color": "red", "leaves": [{"name": "a", "score": None}, {"name": "b", "score": 1.5}],
                   "pair": [1, "x"], "tags": {"k": 2}, "is_renamed": False}
    jsonschema.validate(doc, schema)
    assert schema["$defs"]["Tree"]["required"] == ["color", "leaves", "pair"]
    for bad in ({**doc, "color": "green"}, {**doc, "leaves": [{"score": 1.0}]}, {**doc, "pair": [1, 2]}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


def test_compare_document_validates_against_its_schema():
    jsonschema.validate(_document(2).to_json(), json_schema(ComparisonDocument))


def test_compare_cli_json_validates(tmp_path):
    from perfq.run.runs import Run
    from perfq.run.store import save_runs

    hist = tmp_path / "h.duckdb"
    runs = [Run(label="s", side=side, status="complete") for side in ("base", "head")]
    for run, value in zip(runs, (10.0, 20.0), strict=True):
        for i in range(5):
            run.add_sample(i, "b_test", type("M", (), {"test": "t", "mode": "eager", "device": "cpu",
                                                       "metric": "forward_time", "unit": "us",
                                                       "value": value + i * 0.01})())
    save_runs(hist, runs)
    res = CliRunner().invoke(app, ["compare", "s", "--format", "json", "--repo", str(tmp_path), "--history", str(hist)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    jsonschema.validate(doc, json_schema(ComparisonDocument))
    assert doc["summary"]["regression"] == 1


def test_ir_diff_json_validates_against_its_schema(tmp_path, perfq):
    from perfq.ir.report import IRDiffDocument
    from perfq.ir.store import IRRecord, store_collection

    history = tmp_path / "h.duckdb"
    ttir = "module {\n  tt.func public @k(%arg0: !tt.ptr<f32>) {\n    tt.return\n  }\n}\n"
    changed = ttir.replace("tt.return", "%0 = arith.constant 1 : i32\n    tt.return")
    for label, text in (("base", ttir), ("head", changed)):
        store_collection(history, label, "manifest", [IRRecord("m:k", "s", "cuda:90", "ttir", text)])
    out = perfq(tmp_path, "ir", "diff", "base", "head", "--history", str(history), "--format", "json")
    doc = json.loads(out.stdout)
    jsonschema.validate(doc, json_schema(IRDiffDocument))
    assert doc["summary"]["structural"] == 1 and doc["kernels"][0]["status"] == "structural"


def test_coverage_json_validates_against_its_schema(tmp_path, perfq):
    from perfq.coverage.report import CoverageReport
    from tests.coverage_fixture_db import build_index, build_repo

    build_repo(tmp_path / "repo")
    db = build_index(tmp_path / "i.duckdb")
    out = perfq(tmp_path / "repo", "coverage", "--db", str(db), "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    jsonschema.validate(doc, json_schema(CoverageReport))
    assert set(doc) == {"summary", "ops"} and doc["summary"]["history"]["commits"] == 3


def test_bisect_json_validates_against_its_schema(tmp_path, perfq):
    import sys

    from perfq.bisect.report import BisectReport
    from tests.bisect_fixture import make_repo

    r = make_repo(tmp_path, n=8, culprit=5)
    out = perfq(r.path, "bisect", r.commits[0], "--yes", "--format", "json", "--history", str(tmp_path / "h.duckdb"),
                "--", sys.executable, "bench.py")
    doc = json.loads(out.stdout)
    jsonschema.validate(doc, json_schema(BisectReport))
    assert doc["status"] == "found" and doc["first_bad"]["commit"] == r.culprit
