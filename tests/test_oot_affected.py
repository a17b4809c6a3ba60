"""An out-of-tree backend indexed against the installed torch (`upstream = "torch"`): its own
yaml merged over torch's, stubs declared upstream, SYCL kernels, script benchmarks traced on
the CPU with their xpu device remapped, and `perfq affected` on one-file kernel commits."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from tests.conftest import run_perfq
from tests.oot_fixture import OotRepo, make_oot_repo

pytestmark = [pytest.mark.torch]


@pytest.fixture(scope="module")
def perfq_module():
    return run_perfq


@pytest.fixture(scope="module")
def oot(tmp_path_factory: pytest.TempPathFactory, perfq_module) -> OotRepo:
    pytest.importorskip("torch")
    repo = make_oot_repo(tmp_path_factory.mktemp("oot"))
    proc = perfq_module(repo.path, "index", "-q")
    assert proc.returncode == 0, proc.stderr
    return repo


def _affected(repo: OotRepo, perfq_module, base: str, head: str) -> dict:
    proc = perfq_module(repo.path, "affected", f"{base}..{head}", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _names(doc: dict) -> set[str]:
    return {b["name"] for b in doc["benchmarks"]} | {b["name"] for c in doc["canary"] for b in c["benchmarks"]}


def test_index_merges_the_backend_yaml_and_traces_the_scripts(oot: OotRepo):
    con = duckdb.connect(str(oot.path / ".git/perfq/index.duckdb"), read_only=True)
    try:
        kernels = dict(con.execute("SELECT op, kernel_name FROM kernels WHERE dispatch_key = 'XPU'").fetchall())
        n_ops = con.execute("SELECT count(*) FROM ops").fetchone()[0]
        traced = dict(con.execute("SELECT bench, status FROM traces").fetchall())
        devices = {d for (d,) in con.execute("SELECT DISTINCT device FROM bench_tests").fetchall()}
        upstream = con.execute("SELECT count(*) FROM files WHERE origin = 'upstream'").fetchone()[0]
    finally:
        con.close()
    assert n_ops > 2000  # torch's operators, with the backend's XPU kernels merged in
    assert kernels["native_batch_norm"] == "batch_norm_xpu"
    assert "_fused_scale_shift_" in kernels  # an operator only the backend defines
    assert traced == {"batch_norm_2d": "ok", "distance.cdist": "ok", "upsample_nearest2d": "ok", "eltwise.add": "ok"}
    assert devices == {"xpu"}
    assert upstream > 500  # torch/nn, torch/functional.py... from the installed package


def test_stub_kernel_reached_through_an_upstream_composite(oot: OotRepo, perfq_module):
    head = oot.commit_edit(
        "src/ATen/native/xpu/sycl/DistanceKernels.cpp", "a > b ? a - b : b - a", "a >= b ? a - b : b - a", "cdist"
    )
    doc = _affected(oot, perfq_module, f"{head}^", head)
    assert "distance.cdist" in _names(doc)
    assert "upsample_nearest2d" not in _names(doc)
    cdist = next(b for b in doc["benchmarks"] if b["name"] == "distance.cdist")
    assert cdist["devices"] == ["xpu"] and cdist["source"] == "traced"


def test_structured_kernel_selects_its_script_only(oot: OotRepo, perfq_module):
    head = oot.commit_edit(
        "src/ATen/native/xpu/sycl/UpSampleNearest2dKernels.cpp", "index < in_size - 1", "index <= in_size - 2", "up"
    )
    doc = _affected(oot, perfq_module, f"{head}^", head)
    assert _names(doc) == {"upsample_nearest2d"}


def test_shared_loops_header_is_flagged(oot: OotRepo, perfq_module):
    head = oot.commit_edit("src/ATen/native/xpu/sycl/Loops.h", "kfn(i);", "kfn(i + 0);", "loops")
    doc = _affected(oot, perfq_module, f"{head}^", head)
    assert doc["shared_infrastructure"] is True
    assert {c["set"] for c in doc["canary"]} == {"tensor-iterator"}
    assert {"eltwise.add", "distance.cdist"} <= _names(doc)
    # the canary set names only benchmarks of this repo
    assert all(b["file"].startswith("test/microbench/") for c in doc["canary"] for b in c["benchmarks"])


def test_backend_only_op_has_no_benchmark(oot: OotRepo, perfq_module):
    head = oot.commit_edit(
        "src/ATen/native/xpu/sycl/BatchNormKernels.cpp", ".add_(shift);", ".add_(shift * 2);", "scale shift"
    )
    doc = _affected(oot, perfq_module, f"{head}^", head)
    assert _names(doc) == set()
    assert "_fused_scale_shift_" in doc["no_benchmark_ops"]


def test_warm_index_reuses_the_upstream(oot: OotRepo, perfq_module):
    assert perfq_module(oot.path, "index", "--full", "-q").returncode == 0  # the commits of the tests above
    proc = perfq_module(oot.path, "index", "--full", "--format", "json", "-q")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["reparsed"] == 0  # upstream facts come from the cache, keyed by torch's version


def test_the_fixture_config_is_the_readme_one(oot: OotRepo):
    assert 'upstream = "torch"' in (Path(oot.path) / "perfq.toml").read_text()
