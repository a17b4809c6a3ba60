"""Traced benchmark links: `perfq index --trace-benchmarks` profiles a real operator
benchmark (PyTorch 2.6.0's softmax_test, run against the installed torch)."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from perfq.config import Config
from perfq.indexer.build import build_index
from tests.conftest import CORPUS  # noqa: E402

BENCH = "benchmarks/operator_benchmark"

pytestmark = [
    pytest.mark.corpus,
    pytest.mark.torch,
    pytest.mark.skipif(not (CORPUS / BENCH).is_dir(), reason="PyTorch 2.6.0 corpus not fetched"),
]


def test_traced_links_from_the_profiled_forward(tmp_path: Path):
    pytest.importorskip("torch")
    repo = tmp_path / "repo"
    native = repo / "aten/src/ATen/native"
    native.mkdir(parents=True)
    for name in ("native_functions.yaml", "tags.yaml"):
        shutil.copy(CORPUS / "aten/src/ATen/native" / name, native / name)
    (repo / BENCH / "pt").mkdir(parents=True)
    for path in (CORPUS / BENCH).glob("*.py"):
        shutil.copy(path, repo / BENCH / path.name)
    for name in ("__init__.py", "configs.py", "softmax_test.py"):
        shutil.copy(CORPUS / BENCH / "pt" / name, repo / BENCH / "pt" / name)
    db = tmp_path / "index.duckdb"
    cfg = Config(source_roots=(), python_roots=())
    build_index(repo, cfg, db, jobs=1, quiet=True, trace=True)
    con = duckdb.connect(str(db), read_only=True)
    traced = con.execute("SELECT DISTINCT op, test FROM bench_ops WHERE source = 'traced'").fetchall()
    con.close()
    assert ("_softmax", "SoftmaxBenchmark") in traced
    assert ("softmax.int", "SoftmaxBenchmark") in traced
    # a later plain build keeps the cached trace
    (repo / BENCH / "pt/softmax_test.py").touch()
    build_index(repo, cfg, db, jobs=1, quiet=True, full=True)
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM bench_ops WHERE source = 'traced'").fetchone()[0] == len(traced)
    con.close()
