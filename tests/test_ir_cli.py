# ruff: noqa: E501  (IR fixture lines are as long as Triton prints them)
"""`perfq ir diff/list/harvest` end to end on histories and cache directories the tests
build themselves (no triton needed: IR texts are inline)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from common.documents import json_schema
from perfq.ir.harvest import harvest
from perfq.ir.pipeline import Destination, HarvestRequest, harvest_ir
from perfq.ir.report import IRCollectDocument
from perfq.ir.store import IRRecord, labels, open_for_reading, store_collection
from perfq.options import EXIT_ERROR, EXIT_GATE

TTIR = """\
#loc = loc("{path}":3:1)
module {{
  tt.func public @{name}(%x_ptr: !tt.ptr<f32> {{tt.divisibility = 16 : i32}} loc("x_ptr"(#loc)), %n: i32 loc("n"(#loc))) attributes {{noinline = false}} {{
    %offs = tt.make_range {{end = 1024 : i32, start = 0 : i32}} : tensor<1024xi32> loc(#loc1)
    %x = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>> loc(#loc2)
    %x_0 = tt.addptr %x, %offs : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32> loc(#loc2)
    %x_1 = tt.load %x_0 : tensor<1024x!tt.ptr<f32>> loc(#loc3)
    {extra}tt.store %x_0, %x_1 : tensor<1024x!tt.ptr<f32>> loc(#loc5)
    tt.return loc(#loc)
  }} loc(#loc)
}} loc(#loc)
"""


def ttir(path: str = "/a/kmod.py", name: str = "copy_kernel", extra: str = "") -> str:
    return TTIR.format(path=path, name=name, extra=extra)


EDIT = "%x_2 = tt.load %x_0 : tensor<1024x!tt.ptr<f32>> loc(#loc3)\n    "


@pytest.fixture()
def history(tmp_path):
    db = tmp_path / "h.duckdb"
    rec = lambda kernel, text: IRRecord(kernel, "n=i32;num_warps=4", "cuda:90", "ttir", text)  # noqa: E731
    store_collection(db, "base", "manifest", [rec("kmod:copy_kernel", ttir()), rec("kmod:same", ttir())])
    store_collection(db, "head", "manifest", [rec("kmod:copy_kernel", ttir("/b/kmod.py", extra=EDIT)),
                                               rec("kmod:same", ttir("/b/kmod.py"))])
    return db


def test_diff_json_shape_and_exit_codes(history, tmp_path, cli):
    out = cli(tmp_path, "ir", "diff", "base", "head", "--history", str(history), "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["a"] == "base" and doc["b"] == "head"
    by_kernel = {k["kernel"]: k for k in doc["kernels"]}
    assert by_kernel["kmod:copy_kernel"]["status"] == "structural"
    assert by_kernel["kmod:copy_kernel"]["op_delta"] == {"tt.load": 1}
    assert by_kernel["kmod:same"]["status"] == "identical" and by_kernel["kmod:same"]["op_delta"] == {}
    assert by_kernel["kmod:same"]["raw_identical"] is False  # only the path differed
    for k in doc["kernels"]:
        assert k["target"] == "cuda:90" and k["stage"] == "ttir" and k["specialization"] == "n=i32;num_warps=4"
    gate = cli(tmp_path, "ir", "diff", "base", "head", "--history", str(history), "--fail-on-change")
    assert gate.returncode == EXIT_GATE
    calm = cli(tmp_path, "ir", "diff", "base", "base", "--history", str(history), "--fail-on-change")
    assert calm.returncode == 0 and "2 identical" in calm.stdout


def test_diff_table_markdown_and_raw(history, tmp_path, cli):
    table = cli(tmp_path, "ir", "diff", "base", "head", "--history", str(history))
    assert table.returncode == 0
    assert "1 structural" in table.stdout and "+1 tt.load" in table.stdout
    assert "+    %v6 = tt.load %v4" in table.stdout and "/b/kmod.py" not in table.stdout
    raw = cli(tmp_path, "ir", "diff", "base", "head", "--history", str(history), "--raw", "-k", "same")
    assert "raw diff:" in raw.stdout and '+#loc = loc("/b/kmod.py":3:1)' in raw.stdout
    md = cli(tmp_path, "ir", "diff", "base", "head", "--history", str(history), "--format", "markdown")
    assert md.stdout.startswith("### perfq ir diff: `base` → `head`")
    assert "<details><summary>kmod:copy_kernel · cuda:90 · ttir · structural (+1 tt.load)" in md.stdout


def test_unknown_label_and_missing_history_are_one_line_errors(history, tmp_path, cli):
    out = cli(tmp_path, "ir", "diff", "base", "nope", "--history", str(history))
    assert out.returncode == EXIT_ERROR and out.stderr.strip() == "error: no IR collection labelled 'nope'; known: base, head"
    out = cli(tmp_path, "ir", "diff", "a", "b", "--history", str(tmp_path / "none.duckdb"))
    assert out.returncode == EXIT_ERROR and out.stderr.startswith("error: no history database") and "Traceback" not in out.stderr
    listing = cli(tmp_path, "ir", "list", "--history", str(history), "--format", "json")
    assert [row["label"] for row in json.loads(listing.stdout)] == ["base", "head"]


def _fake_cache(root: Path, path: str, version: str, extra: str = "") -> None:
    """A Triton cache entry as 3.x writes it: <hash>/<name>.{json,ttir,ttgir}."""
    d = root / f"HASH{version.replace('.', '')}"
    d.mkdir(parents=True)
    meta = {"name": "copy_kernel", "target": {"backend": "cuda", "arch": 90, "warp_size": 32},
            "num_warps": 4, "num_stages": 3, "triton_version": version, "hash": "h" + version}
    (d / "copy_kernel.json").write_text(json.dumps(meta))
    (d / "copy_kernel.ttir").write_text(ttir(path, extra=extra))
    (d / "__grp__copy_kernel.json").write_text("{}")


def test_harvest_keys_match_across_cache_dirs(tmp_path, cli):
    _fake_cache(tmp_path / "c1", "/ref1/kmod.py", "3.8.0")
    _fake_cache(tmp_path / "c2", "/ref2/kmod.py", "3.9.0", extra=EDIT)
    r1 = harvest(tmp_path / "c1", ("ttir", "ttgir"))
    r2 = harvest(tmp_path / "c2", ("ttir", "ttgir"))
    assert len(r1) == len(r2) == 1
    a, b = r1[0], r2[0]
    assert (a.kernel, a.target, a.stage) == ("kmod:copy_kernel", "cuda:90", "ttir")
    assert a.specialization == b.specialization and "num_warps=4,num_stages=3" in a.specialization
    assert a.triton_version == "3.8.0" and b.triton_version == "3.9.0"
    db = tmp_path / "h.duckdb"
    for label, d in (("old", "c1"), ("new", "c2")):
        out = cli(tmp_path, "ir", "harvest", str(tmp_path / d), "--label", label, "--history", str(db),
                  "--format", "json")
        assert out.returncode == 0, out.stderr
        collected = json.loads(out.stdout)
        jsonschema.validate(collected, json_schema(IRCollectDocument))
        assert collected["stored"] == 1 and collected["directory"] == str(tmp_path / d)
    out = cli(tmp_path, "ir", "diff", "old", "new", "--history", str(db), "--format", "json")
    assert [(k["status"], k["op_delta"]) for k in json.loads(out.stdout)["kernels"]] == [
        ("structural", {"tt.load": 1})
    ]
    empty = cli(tmp_path, "ir", "harvest", str(tmp_path), "--label", "x", "--stage", "ptx", "--history", str(db))
    assert empty.returncode == EXIT_ERROR and "no Triton IR files" in empty.stderr


def test_harvest_from_python_stores_what_the_command_stores(tmp_path):
    _fake_cache(tmp_path / "c1", "/ref1/kmod.py", "3.8.0")
    db = tmp_path / "h.duckdb"
    answer = harvest_ir(HarvestRequest(Destination(tmp_path, db, "old", commit="abc"), tmp_path / "c1", ("ttir",)))
    assert (answer.document.label, answer.document.stored, answer.document.directory) == ("old", 1, str(tmp_path / "c1"))
    assert answer.document.triton_version == "3.8.0" and not answer.result.errors
    con = open_for_reading(db)
    try:
        assert [(row.label, row.irs) for row in labels(con)] == [("old", 1)]
    finally:
        con.close()
    empty = harvest_ir(HarvestRequest(Destination(tmp_path, db, "x", commit="abc"), tmp_path, ("ptx",)))
    assert empty.document.stored == 0 and "no Triton IR files" in empty.result.errors[0]
