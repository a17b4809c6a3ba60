"""`perfq import`: result files validated against the JSON Schema of the result types, idempotent for every file,
never a changed history on bad input; read commands never write into a file that is not a history."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import duckdb
import jsonschema
import pytest

from perfq.run.results import EXPORT_FORMAT, export_runs, import_files, line_schemas
from perfq.run.runs import Run
from perfq.run.store import runs_for_label
from schema.results_rows import RunStatus, Side
from tests.aten_fixture import make_repo

VALID_SAMPLE = {"seq": 0, "repeat_index": 0, "benchmark": "b_test", "test": "t1", "mode": "eager", "device": "cpu",
                "metric": "forward_time", "unit": "us", "value": 10.5}


def _run(label: str = "L", side: Side = Side.base, values: tuple[float, ...] = (10.0, 11.0, 12.0)) -> Run:
    run = Run(label=label, side=side, status=RunStatus.complete, ref="main", host="h")
    for i, v in enumerate(values):
        run.add_sample(i, "b_test", type("M", (), {**VALID_SAMPLE, "value": v})())
    run.add_failure("broken_test", "python -m pt.broken_test", 1, "RuntimeError: boom")
    run.add_failure("slow_test", "python -m pt.slow_test", None, "timed out after 900s")
    return run


def _v1(runs: list[dict]) -> str:
    return json.dumps({"format": EXPORT_FORMAT, "version": 1, "runs": runs})


def _v1_run(**over) -> dict:
    run = {"label": "L", "side": "base", "status": "complete", "started_at": "2025-01-01T00:00:00",
           "samples": [dict(VALID_SAMPLE, seq=i, value=10.0 + i) for i in range(3)], "failures": []}
    run.update(over)
    return run


def _counts(history: Path) -> tuple[int, int, int]:
    con = duckdb.connect(str(history), read_only=True)
    try:
        return tuple(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("runs", "samples", "failures"))
    finally:
        con.close()


def test_exported_lines_validate_against_the_generated_schemas(tmp_path):
    path = tmp_path / "r.json"
    export_runs([_run(), _run(side=Side.head)], path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0] == {"format": EXPORT_FORMAT, "version": 2}
    schemas = line_schemas()
    for line in lines[1:]:
        jsonschema.validate(line, schemas[line["type"]])
    assert [line["type"] for line in lines[1:]].count("sample") == 6
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**lines[1], "side": "sideways"}, schemas["run"])


def test_import_is_idempotent_for_every_file(tmp_path):
    """v2 files, v1 files with and without run ids, history files: importing twice adds nothing."""
    hist = tmp_path / "h.duckdb"
    export_runs([_run(), _run(side=Side.head, values=(20.0, 21.0))], tmp_path / "v2.json")
    (tmp_path / "v1.json").write_text(_v1([_v1_run(id="fixed-id"), _v1_run(side="head")]))  # the head run: no id
    (tmp_path / "v1b.json").write_text(_v1([_v1_run(label="M")]))  # no id, another label
    files = [tmp_path / "v2.json", tmp_path / "v1.json", tmp_path / "v1b.json"]
    first = import_files(hist, files)
    assert (first.runs_added, first.samples_added, first.failures_added) == (5, 14, 4)
    for _ in range(2):
        again = import_files(hist, files)
        assert (again.runs_added, again.samples_added, again.failures_added) == (0, 0, 0)
    copy = tmp_path / "copy.duckdb"
    import_files(copy, [hist])
    assert import_files(copy, [hist]).samples_added == 0 and _counts(copy) == _counts(hist) == (5, 14, 4)
    # a run without an id gets the same id from the same content, another id from other content
    ids = {r.id for r in runs_for_label(hist, "L")}
    (tmp_path / "v1c.json").write_text(_v1([_v1_run(side="head", samples=[dict(VALID_SAMPLE, value=99.0)])]))
    assert import_files(hist, [tmp_path / "v1c.json"]).runs_added == 1
    assert len({r.id for r in runs_for_label(hist, "L")} - ids) == 1


BAD_V2 = {
    "side sideways": ('"side":"base"', '"side":"sideways"'),
    "unknown status": ('"status":"complete"', '"status":"exploded"'),
    "NaN sample": ('"value":10.0', '"value":NaN'),
    "Infinity sample": ('"value":10.0', '"value":Infinity'),
    "huge sample": ('"value":10.0', '"value":1e999'),
    "string value": ('"value":10.0', '"value":"10.0"'),
    "float seq": ('"seq":1,', '"seq":1.5,'),
    "test missing": ('"test":"t1",', ""),
    "null test": ('"test":"t1"', '"test":null'),
    "number as test": ('"test":"t1"', '"test":5'),
    "run out of range": ('"run":0,"seq":2', '"run":7,"seq":2'),
    "duplicate seq": ('"seq":2,', '"seq":1,'),
    "unknown line": ('{"type":"failure"', '{"type":"oops"'),
    "not an object": ('{"type":"failure"', '[1, 2]\n{"type":"failure"'),
    "broken line": ('{"type":"failure"', '{"type":\n{"type":"failure"'),
}


@pytest.mark.parametrize("case", sorted(BAD_V2))
def test_bad_result_lines_are_one_line_errors_and_change_nothing(tmp_path, cli, case):
    good = tmp_path / "good.json"
    export_runs([_run()], good)
    text = good.read_text()
    old, new = BAD_V2[case]
    assert old in text
    bad = tmp_path / "bad.json"
    bad.write_text(text.replace(old, new, 1))
    hist = tmp_path / "h.duckdb"
    res = cli(tmp_path, "import", str(bad), "--history", str(hist))
    assert res.returncode != 0 and not hist.exists(), res.stdout
    assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1 and str(bad) in res.stderr
    # an existing history stays as it was
    assert cli(tmp_path, "import", str(good), "--history", str(hist)).returncode == 0
    before = _counts(hist)
    res = cli(tmp_path, "import", str(good), str(bad), "--history", str(hist))
    assert res.returncode != 0 and res.stderr.count("\n") == 1 and _counts(hist) == before


@pytest.mark.parametrize("text", [
    '{"format": "perfq-results", "version": 1, "runs": [{"label": "L", "side": "base", "status": "complete",'
    ' "samples": [{"seq": 0, "repeat_index": 0, "benchmark": "b", "test": "t", "mode": "eager", "device": "cpu",'
    ' "metric": "m", "unit": "us", "value": NaN}], "failures": []}]}',
    '{"format": "perfq-results", "version": 1, "runs": [{"label": "L", "side": "sideways", "status": "complete"}]}',
    '{"format": "perfq-results", "version": 1, "runs": [{"label": "L", "side": "base", "status": "zzz"}]}',
    '{"format": "perfq-results", "version": 1, "runs": [{"label": "L", "side": "base", "samples": 3}]}',
    '{"format": "perfq-results", "version": 1, "runs": [7]}',
    '{"format": "perfq-results", "version": 9, "runs": []}',
    '{"format": "other"}',
    "[]",
    "",
    "\xff\xfe",
])
def test_bad_v1_files_are_one_line_errors(tmp_path, cli, text):
    bad = tmp_path / "bad.json"
    bad.write_bytes(text.encode("latin-1") if text == "\xff\xfe" else text.encode())
    res = cli(tmp_path, "import", str(bad), "--history", str(tmp_path / "h.duckdb"))
    assert res.returncode != 0 and res.stderr.startswith("error: ") and res.stderr.count("\n") == 1, res.stderr
    assert not (tmp_path / "h.duckdb").exists()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_an_index_given_as_history_is_refused_and_left_alone(tmp_path, cli, perfq):
    repo = make_repo(tmp_path / "repo")
    assert perfq(repo, "index", "-q").returncode == 0
    index = repo / ".git" / "perfq" / "index.duckdb"
    before = _sha(index)
    export_runs([_run()], tmp_path / "r.json")
    for args in (("history", "b_test"), ("compare", "L"), ("import", str(tmp_path / "r.json"))):
        res = cli(repo, *args, "--history", str(index))
        assert res.returncode != 0 and "not a perfq results history (a perfq index)" in res.stderr, args
        assert res.stderr.count("\n") == 1
    assert _sha(index) == before
    con = duckdb.connect(str(index), read_only=True)
    try:
        assert not {"runs", "samples", "schema_migrations"} & {r[0] for r in con.execute("SHOW TABLES").fetchall()}
    finally:
        con.close()


def test_reading_an_empty_or_missing_history_is_one_line(tmp_path, cli):
    res = cli(tmp_path, "history", "b_test", "--history", str(tmp_path / "none.duckdb"))
    assert res.returncode != 0 and "no results history" in res.stderr and not (tmp_path / "none.duckdb").exists()
    duckdb.connect(str(tmp_path / "empty.duckdb")).close()
    res = cli(tmp_path, "compare", "L", "--history", str(tmp_path / "empty.duckdb"))
    assert res.returncode != 0 and "not a perfq results history (empty)" in res.stderr
