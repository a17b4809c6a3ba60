# ruff: noqa: E501  (kernel sources and IR keys are long lines)
"""Real Triton compiles (CPU only, explicit GPUTarget): kernels the tests write, compiled
from two install locations, a one-line edit, an attribute change, capture and harvest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.triton
triton = pytest.importorskip("triton")

from perfq.ir.collect import collect  # noqa: E402
from perfq.ir.diff import IRText, changed_kernels, diff_collections  # noqa: E402
from perfq.ir.harvest import harvest  # noqa: E402
from perfq.ir.manifest import parse_manifest  # noqa: E402
from perfq.ir.normalize import normalize_ir  # noqa: E402
from perfq.ir.store import store_collection  # noqa: E402
from perfq.options import EXIT_ERROR  # noqa: E402
from schema.history import connect_history  # noqa: E402

KERNELS = '''
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf"))
    num = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * stride + cols, num / tl.sum(num, axis=0), mask=cols < n_cols)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc.to(tl.float16))


@triton.jit
def layer_norm_kernel(x_ptr, y_ptr, w_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    rstd = 1 / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask)
    tl.store(y_ptr + row * n_cols + cols, d * rstd * w, mask=mask)


@triton.jit
def sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))


@triton.jit
def loop_mask_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    total = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
        total += tl.where(v > 0, v, 0.1 * v)
    tl.store(out_ptr + row, tl.sum(total, axis=0))
'''

MANIFEST = {
    "kernels": [
        {"kernel": "kmod:add_kernel", "specializations": [
            {"signature": {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
             "constexprs": {"BLOCK": 1024}, "num_warps": 4}]},
        {"kernel": "kmod:softmax_kernel", "specializations": [
            {"signature": {"out_ptr": "*fp32", "in_ptr": "*fp32", "stride": "i32", "n_cols": "i32"},
             "constexprs": {"BLOCK": 512}}]},
        {"kernel": "kmod:matmul_kernel", "specializations": [
            {"signature": {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "K": "i32"},
             "constexprs": {"BM": 32, "BN": 32, "BK": 32}, "num_stages": 2}]},
        {"kernel": "kmod:layer_norm_kernel", "specializations": [
            {"signature": {"x_ptr": "*fp16", "y_ptr": "*fp16", "w_ptr": "*fp16", "n_cols": "i32",
                           "eps": "fp32"}, "constexprs": {"BLOCK": 256}}]},
        {"kernel": "kmod:sum_kernel", "specializations": [
            {"signature": {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, "constexprs": {"BLOCK": 256}}]},
        {"kernel": "kmod:loop_mask_kernel", "specializations": [
            {"signature": {"x_ptr": "*fp32", "out_ptr": "*fp32", "n_cols": "i32"},
             "constexprs": {"BLOCK": 128}}]},
    ]
}
STAGES = ("ttir", "ttgir", "llir")


def _checkout(root: Path, source: str = KERNELS) -> Path:
    root.mkdir(parents=True)
    (root / "kmod.py").write_text(source)
    return root


def _collect(root: Path, manifest: dict = MANIFEST, only: str | None = None) -> dict:
    data = dict(manifest, paths=["."])
    if only:
        data["kernels"] = [k for k in data["kernels"] if k["kernel"].endswith(":" + only)]
    result = collect(parse_manifest(data, root, "test"), ("cuda:90",), STAGES, repo=root)
    assert not result.errors, result.errors
    return {(r.kernel, r.specialization, r.target, r.stage): IRText(r.raw, normalize_ir(r.raw, r.stage))
            for r in result.records}


@pytest.fixture(scope="module")
def two_installs(tmp_path_factory):
    base = tmp_path_factory.mktemp("ir")
    first = _collect(_checkout(base / "site-a" / "pkg"))
    second = _collect(_checkout(base / "elsewhere" / "b" / "pkg"))
    return base, first, second


def test_same_kernels_from_two_install_locations_normalize_identically(two_installs):
    _base, first, second = two_installs
    assert set(first) == set(second) and len(first) == 6 * len(STAGES)
    diffs = diff_collections(first, second)
    assert {d.status for d in diffs} == {"identical"}
    # normalizing real Triton output twice changes nothing
    assert all(normalize_ir(t.normalized, key[3]) == t.normalized for key, t in first.items())
    # the raw TTIR does differ (source paths in locations): normalization is what makes them equal
    assert all(not d.raw_identical for d in diffs if d.stage == "ttir")


def test_one_line_edit_is_structural_with_the_op_delta(two_installs):
    base, first, _second = two_installs
    edited = KERNELS.replace("tl.store(out_ptr + offs, x + y, mask=mask)", "tl.store(out_ptr + offs, x * y, mask=mask)")
    head = _collect(_checkout(base / "edited", edited), only="add_kernel")
    diffs = {d.stage: d for d in diff_collections(
        {k: v for k, v in first.items() if k[0] == "kmod:add_kernel"}, head)}
    assert diffs["ttir"].status == "structural"
    assert diffs["ttir"].op_delta == {"arith.addf": -1, "arith.mulf": 1}
    assert diffs["ttgir"].op_delta == {"arith.addf": -1, "arith.mulf": 1}
    assert "-    %v" in diffs["ttir"].diff and "arith.mulf" in diffs["ttir"].diff


def test_attribute_change_is_attributes_only(two_installs):
    base, first, _second = two_installs
    manifest = json.loads(json.dumps(MANIFEST))
    manifest["kernels"][0]["specializations"][0]["divisible"] = ["x_ptr", "out_ptr"]  # y_ptr: no hint
    head = _collect(base / "site-a" / "pkg", manifest, only="add_kernel")
    (key,) = [k for k in head if k[3] == "ttir"]
    old = next(k for k in first if k[0] == "kmod:add_kernel" and k[3] == "ttir")
    assert key[1] != old[1]  # the specialization key records the divisibility
    (d,) = diff_collections({key: first[old]}, {key: head[key]})
    assert d.status == "attributes-only" and d.op_delta == {} and "tt.divisibility" in d.diff


def test_cli_collect_and_changed_kernels(two_installs, tmp_path):
    base, _first, _second = two_installs
    (tmp_path / "perfq-ir.yaml").write_text(json.dumps({
        "paths": [str(base / "site-a" / "pkg")], "targets": ["cuda:90"], "stages": ["ttir"],
        "kernels": [MANIFEST["kernels"][0]]}))
    db = tmp_path / "h.duckdb"
    out = subprocess.run([sys.executable, "-m", "perfq", "ir", "collect", "--label", "one", "--repo",
                          str(tmp_path), "--history", str(db), "--format", "json"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["stored"] == 1 and doc["compiles"] == 1 and doc["triton_version"] == triton.__version__
    bad = subprocess.run([sys.executable, "-m", "perfq", "ir", "collect", "--label", "x", "--target", "tpu:1",
                          "--repo", str(tmp_path), "--history", str(db)], cwd=tmp_path, capture_output=True,
                         text=True)
    assert bad.returncode == EXIT_ERROR and bad.stderr.startswith("error: bad target 'tpu:1'")
    con = connect_history(db)
    try:
        row = con.execute("SELECT kernel, stage, triton_version, function, source_hash, spec_json"
                          " FROM ir_records").fetchone()
    finally:
        con.close()
    assert row[:4] == ("kmod:add_kernel", "ttir", triton.__version__, "add_kernel") and len(row[4]) == 16
    assert json.loads(row[5])["constexprs"] == {"BLOCK": 1024}
    # changed_kernels on the real compiles of the fixture (stored into a fresh history)
    store = tmp_path / "h2.duckdb"
    _b, first, _s = two_installs
    from perfq.ir.store import IRRecord

    def records(col, swap=False):
        return [IRRecord(k[0], k[1], k[2], k[3], t.raw.replace("arith.addf", "arith.mulf") if swap
                         and k[0] == "kmod:add_kernel" else t.raw) for k, t in col.items()]

    store_collection(store, "a", "manifest", records(first))
    store_collection(store, "b", "manifest", records(first, swap=True))
    con = connect_history(store)
    try:
        assert changed_kernels(con, "a", "b") == {"kmod:add_kernel"}
    finally:
        con.close()


CAPTURE_SCRIPT = '''
import os, sys
import triton, triton.language as tl
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget

@triton.jit
def scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

if __name__ == "__main__":
    # an AOT-style benchmark: compiles two block sizes explicitly
    for block in (64, 128):
        src = ASTSource(scale_kernel, {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": block},
                        {(0,): [["tt.divisibility", 16]]})
        triton.compile(src, target=GPUTarget("cuda", 80, 32), options={"num_warps": 2})
    print("bench done")
'''

INTERPRET_SCRIPT = '''
import triton, triton.language as tl

class FakeTensor:  # what the interpreter sees of a tensor before it copies it
    dtype = "torch.float16"
    def data_ptr(self):
        return 4096

@triton.jit
def neg_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, -tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

if __name__ == "__main__":
    try:
        neg_kernel[(1,)](FakeTensor(), 100, BLOCK=128, num_warps=2)
    except Exception as exc:  # no torch here: the interpreter itself cannot run the launch
        print("launch failed:", type(exc).__name__)
'''


def test_capture_records_compiles_and_interpreter_launches(tmp_path):
    (tmp_path / "aot_bench.py").write_text(CAPTURE_SCRIPT)
    (tmp_path / "interp_bench.py").write_text(INTERPRET_SCRIPT)
    db = tmp_path / "h.duckdb"
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    base = [sys.executable, "-m", "perfq", "ir", "capture", "--target", "hip:gfx942", "--stage", "ttir",
            "--history", str(db), "--repo", str(tmp_path), "--format", "json"]
    out = subprocess.run([*base, "--label", "aot", "--", sys.executable, "aot_bench.py"], cwd=tmp_path,
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert "bench done" in out.stdout
    doc = json.loads(out.stdout[out.stdout.index("{"):])
    assert doc["specializations"] == 2 and doc["stored"] == 2 and doc["command_status"] == 0
    out = subprocess.run([*base, "--label", "interp", "--", "env", "TRITON_INTERPRET=1", sys.executable,
                          "interp_bench.py"], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    con = connect_history(db)
    try:
        rows = con.execute("SELECT label, kernel, specialization, target FROM ir_records ORDER BY label,"
                           " specialization").fetchall()
    finally:
        con.close()
    assert rows == [
        ("aot", "aot_bench:scale_kernel", "x_ptr=*fp32/16,n=i32,BLOCK=128;num_warps=2", "hip:gfx942"),
        ("aot", "aot_bench:scale_kernel", "x_ptr=*fp32/16,n=i32,BLOCK=64;num_warps=2", "hip:gfx942"),
        ("interp", "interp_bench:neg_kernel", "x_ptr=*fp16/16,n=i32,BLOCK=128;num_warps=2", "hip:gfx942"),
    ]


def test_harvest_a_real_triton_cache(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))
    root = _checkout(tmp_path / "src")
    data = dict(MANIFEST, paths=["."], kernels=[MANIFEST["kernels"][4]])
    result = collect(parse_manifest(data, root, "test"), ("cuda:90",), ("ttir", "ttgir"), fresh_cache=False)
    assert not result.errors
    records = harvest(cache, ("ttir", "ttgir"))
    assert {(r.kernel, r.target, r.stage) for r in records} == {
        ("kmod:sum_kernel", "cuda:90", "ttir"), ("kmod:sum_kernel", "cuda:90", "ttgir")}
    collected = {r.stage: r.raw for r in result.records}
    assert {r.stage: r.raw for r in records} == collected
    assert all(r.triton_version == triton.__version__ for r in records)
    assert "num_warps=4" in records[0].specialization and "shapes(256)" in records[0].specialization
    assert textwrap.dedent(records[0].source_file).endswith("kmod.py")


def test_renaming_python_variables_changes_raw_but_not_normalized_ir(two_installs):
    base, first, _second = two_installs
    renamed = KERNELS.replace("    x = tl.load(x_ptr + offs, mask=mask)\n", "    lhs = tl.load(x_ptr + offs, mask=mask)\n")
    renamed = renamed.replace("x + y, mask=mask)", "lhs + y, mask=mask)")
    assert renamed.count("lhs") == 2
    head = _collect(_checkout(base / "renamed", renamed), only="add_kernel")
    diffs = diff_collections({k: v for k, v in first.items() if k[0] == "kmod:add_kernel"}, head)
    assert {d.status for d in diffs} == {"identical"}
    assert not next(d for d in diffs if d.stage == "ttir").raw_identical
