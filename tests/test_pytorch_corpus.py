"""Integration on the real PyTorch 2.6.0 tree (scripts/fetch-pytorch-source.sh fetches it).

Skipped when the corpus is absent. The index is built once into a temporary directory
so the corpus checkout is left as it was.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import duckdb
import pytest

from query.index_stats import index_stats
from query.service import affected_for_ref
from tests.conftest import CORPUS  # noqa: E402

pytestmark = [
    pytest.mark.corpus,
    pytest.mark.skipif(not (CORPUS / ".git").exists(), reason="PyTorch 2.6.0 corpus not fetched"),
]


@pytest.fixture(scope="module")
def db(corpus_scratch) -> Path:
    return corpus_scratch.root / ".git/perfq/index.duckdb"


def _patch_function_line(rel: str, function_marker: str, nth_body_line: int = 3) -> str:
    """A diff that adds a statement after a body line of the function whose definition
    line contains ``function_marker`` (a change of code tokens, not only of layout)."""
    lines = (CORPUS / rel).read_text(encoding="utf-8").splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if function_marker in line and not line.strip().endswith(";"))
    target = start + nth_body_line
    new = list(lines)
    new.insert(target + 1, "  (void)0;\n")
    body = "".join(difflib.unified_diff(lines, new, f"a/{rel}", f"b/{rel}", n=0))
    return f"diff --git a/{rel} b/{rel}\n{body}"


def _affected(db: Path, patch: str) -> dict:
    return affected_for_ref(CORPUS, None, db, diff_text=patch).to_json()


def test_resolution_rates(db: Path):
    con = duckdb.connect(str(db), read_only=True)
    stats = index_stats(con)
    con.close()
    for key in ("stub impls resolved", "CPU/CUDA kernels resolved"):
        resolved, total = stats["resolution"][key].split()[0].split("/")
        assert int(resolved) / int(total) >= 0.95, (key, stats["resolution"][key])
    assert stats["counts"]["benchmarks"] >= 50
    assert stats["counts"]["ops"] >= 2500


def test_softmax_lastdim_kernel_chain(db: Path):
    doc = _affected(
        db,
        _patch_function_line("aten/src/ATen/native/cpu/SoftMaxKernel.cpp", "static void softmax_lastdim_kernel_impl("),
    )
    assert any("softmax_lastdim_kernel_impl" in c["function"] for c in doc["changed_functions"])
    softmax = next(b for b in doc["benchmarks"] if b["name"] == "softmax_test")
    chain = " -> ".join(softmax["reasons"][0]["chain"])
    assert "stub softmax_lastdim_kernel" in chain
    assert "softmax_cpu_out" in chain
    assert "op _softmax.out" in chain
    assert softmax["devices"] == ["cpu"]


def test_unbenchmarked_kernel_selects_nothing(db: Path):
    doc = _affected(db, _patch_function_line("aten/src/ATen/native/cpu/LerpKernel.cpp", "void lerp_scalar_kernel("))
    assert doc["benchmarks"] == []
    assert "lerp.Scalar_out" in doc["no_benchmark_ops"]


def test_reduction_infrastructure_is_a_canary(db: Path):
    doc = _affected(db, _patch_function_line("aten/src/ATen/native/cpu/Reduce.h", "void binary_kernel_reduce_vec("))
    assert [c["set"] for c in doc["canary"]] == ["reductions"]
    assert doc["shared_infrastructure"] is True
    selected = {b["name"] for b in doc["benchmarks"]}
    assert {"sum_test", "qobserver_test"} <= selected  # their traces execute sum / all
    # the canary set: the fewest of those whose traces cover the reduction operators reached
    members = {b["name"] for c in doc["canary"] for b in c["benchmarks"]}
    assert members and members <= selected
