"""`perfq affected` with native samples: a changed function on a sampled test's stacks selects its
benchmark (source `sampled`) where no static link reaches it; `perfq stats` says what was sampled."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from common.paths import default_index_path
from schema.engine import duckdb
from tests.aten_fixture import commit_all, git, make_repo, perfq, replace_in

OP_FILE = "aten/src/ATen/native/SoftmaxOp.cpp"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_repo(tmp_path_factory.mktemp("sampled"))
    proc = perfq(root, "index", "-q", "--no-trace")
    assert proc.returncode == 0, proc.stderr
    return root


def _affected_after(repo: Path, path: str, old: str, new: str) -> dict:
    """`perfq affected main` of a branch that replaces ``old`` with ``new`` in ``path`` (the branch
    is removed after)."""
    git(repo, "checkout", "-q", "-b", "work")
    try:
        replace_in(repo, path, old, new)
        commit_all(repo)
        proc = perfq(repo, "affected", "main", "--format", "json")
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)
    finally:
        git(repo, "checkout", "-q", "-f", "main")
        git(repo, "branch", "-q", "-D", "work")


def _affected_lonely(repo: Path) -> dict:
    return _affected_after(repo, OP_FILE, "make_size(3);", "make_size(4);")


def _sample(repo: Path, qualname: str, bench: str, test: str, share: float) -> None:
    """Record ``qualname`` on ``test``'s stacks, as `perfq index --native` would."""
    con = duckdb.connect(str(default_index_path(repo)))
    try:
        (fid,) = con.execute("SELECT id FROM functions WHERE qualname = ?", [qualname]).fetchone()
        con.execute("INSERT INTO native_samples VALUES (?, ?, ?, ?)", [bench, test, fid, share])
    finally:
        con.close()


def test_sampled_function_selects_the_benchmark_with_its_share(repo):
    before = _affected_lonely(repo)
    assert "fancy_test" not in [b["name"] for b in before["benchmarks"]]  # no static link reaches it
    _sample(repo, "at::native::lonely_kernel", "fancy_test", "fancy_M8", 0.42)
    after = _affected_lonely(repo)
    (hit,) = [b for b in after["benchmarks"] if b["name"] == "fancy_test"]
    assert hit["source"] == "sampled"
    assert hit["tests"] == ["fancy_M8"]
    assert any("sampled: 42% of test fancy_M8's samples" in step for r in hit["reasons"] for step in r["chain"])


def test_stats_without_native_says_none(repo):
    proc = perfq(repo, "stats", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["native"]["tests"] == 0
    table = perfq(repo, "stats")
    assert "native samples: none" in table.stdout


def test_native_without_perf_is_a_clear_error_that_keeps_the_index(repo, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").symlink_to(shutil.which("git"))  # git only: no perf on this PATH
    index = default_index_path(repo)
    before = index.stat().st_mtime_ns
    proc = perfq(repo, "index", "-q", "--native", env={**os.environ, "PATH": str(bin_dir)})
    assert proc.returncode == 4
    assert "error: --native needs perf sampling: perf is not installed" in proc.stderr
    assert index.stat().st_mtime_ns == before


KERNEL = "aten/src/ATen/native/cpu/SoftmaxOpKernel.cpp"


def _affected_kernel(repo: Path) -> dict:
    return _affected_after(repo, KERNEL, "out[i] * 2", "out[i] * 3")


def _selected(doc: dict, name: str) -> dict:
    return next(b for b in doc["benchmarks"] if b["name"] == name)


def test_static_chain_not_on_sampled_stacks_is_kept_at_lower_confidence(repo):
    before = _selected(_affected_kernel(repo), "softmax_op_test")
    assert before["confidence"] == "high"
    # a sampled test of the benchmark whose stacks hold another function, not the changed kernel
    _sample(repo, "at::native::fancy", "softmax_op_test", "softmax_op_M8", 0.3)
    after = _selected(_affected_kernel(repo), "softmax_op_test")
    assert after["confidence"] == "medium" and after["source"] == before["source"]
    assert after["reasons"][0]["chain"][0].startswith("static, not observed: on no stack of sampled test softmax_op_M8")
    # once the kernel is seen on that test's stacks, it is observed: high again
    _sample(repo, "at::native::(anonymous namespace)::inner_loop<scalar_t>", "softmax_op_test", "softmax_op_M8", 0.5)
    seen = _selected(_affected_kernel(repo), "softmax_op_test")
    assert seen["confidence"] == "high"
    assert any("sampled: 50% of test softmax_op_M8's samples" in s for r in seen["reasons"] for s in r["chain"])


def test_a_patch_that_removes_a_sampled_function_drops_its_samples(tmp_path):
    root = make_repo(tmp_path / "patched")
    assert perfq(root, "index", "-q", "--no-trace").returncode == 0
    _sample(root, "at::native::composite_thing", "fancy_test", "fancy_M8", 0.2)
    _sample(root, "at::native::lonely_kernel", "fancy_test", "fancy_M8", 0.3)
    replace_in(root, OP_FILE, "Tensor composite_thing(const Tensor& self) {\n  return self;\n}\n", "")
    commit_all(root)
    built = perfq(root, "index", "--no-trace", "--format", "json")
    assert built.returncode == 0, built.stderr
    assert json.loads(built.stdout)["mode"] == "patched"
    con = duckdb.connect(str(default_index_path(root)), read_only=True)
    try:
        rows = con.execute("SELECT f.qualname FROM native_samples n LEFT JOIN functions f ON f.id = n.function_id"
                           ).fetchall()
    finally:
        con.close()
    assert rows == [("at::native::lonely_kernel",)]  # the removed function's row is gone, no dangling id


def test_a_sampled_test_whose_frames_map_to_no_function_still_observes(tmp_path):
    """A test whose samples all fall outside the indexed sources (a oneDNN fast path: gelu on
    contiguous fp32) was sampled all the same: the CPU kernel behind the fast path's ``else``
    is on none of its stacks, so its static chain is "static, not observed"."""
    root = make_repo(tmp_path / "fastpath")
    assert perfq(root, "index", "-q", "--no-trace").returncode == 0
    con = duckdb.connect(str(default_index_path(root)))
    try:
        con.execute("INSERT INTO native_tests VALUES ('softmax_op_test', 'softmax_op_M8', 0, 0)")  # no sample
    finally:
        con.close()
    assert _selected(_affected_kernel(root), "softmax_op_test")["confidence"] == "high"  # nothing observed
    con = duckdb.connect(str(default_index_path(root)))
    try:
        con.execute("INSERT INTO native_tests VALUES ('softmax_op_test', 'softmax_op_M8', 812, 0)")
    finally:
        con.close()
    after = _selected(_affected_kernel(root), "softmax_op_test")
    assert after["confidence"] == "medium"
    assert after["reasons"][0]["chain"][0].startswith("static, not observed: on no stack of sampled test softmax_op_M8")
