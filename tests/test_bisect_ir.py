"""`perfq bisect --ir KERNEL`: bisect on "the kernel's IR changed" (real Triton compiles, CPU)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytestmark = pytest.mark.triton
pytest.importorskip("triton")

from perfq.cli import app  # noqa: E402
from perfq.options import EXIT_GATE  # noqa: E402
from tests.bisect_fixture import git  # noqa: E402

KMOD = '''\
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)
'''
MANIFEST = '''\
paths: ["."]
targets: ["cuda:90"]
stages: ["ttir"]
kernels:
  - kernel: kmod:add_kernel
    specializations:
      - signature: {x_ptr: "*fp32", y_ptr: "*fp32", out_ptr: "*fp32", n: i32}
        constexprs: {BLOCK: 128}
'''


def make_ir_repo(root: Path, culprit: int | None) -> tuple[Path, list[str]]:
    repo = root / "irrepo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "Dev")
    (repo / "kmod.py").write_text(KMOD)
    (repo / "perfq-ir.yaml").write_text(MANIFEST)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "c0")
    commits = [git(repo, "rev-parse", "HEAD")]
    for i in range(1, 6):
        (repo / "notes.txt").write_text(f"{i}\n")
        if i == culprit:
            (repo / "kmod.py").write_text(KMOD.replace("x + y", "x * y + y"))
        elif i == 2:
            (repo / "kmod.py").write_text(KMOD + "\n# a comment does not change the IR\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", f"c{i}")
        commits.append(git(repo, "rev-parse", "HEAD"))
    return repo, commits


def run(repo: Path, *args: str):
    old = Path.cwd()
    os.chdir(repo)
    try:
        return CliRunner().invoke(app, list(args))
    finally:
        os.chdir(old)


def test_ir_bisect_finds_the_commit_that_changed_the_kernel_ir(tmp_path):
    repo, commits = make_ir_repo(tmp_path, culprit=4)
    res = run(repo, "bisect", commits[0], "--ir", "add_kernel", "--format", "json", "--history",
              str(tmp_path / "h.duckdb"))
    assert res.exit_code == 0, (res.stderr, res.exception)
    assert "Infinity" not in res.stdout
    doc = json.loads(res.stdout)
    assert doc["first_bad"]["commit"] == commits[4] and doc["last_good"]["commit"] == commits[3]
    assert {v for s in doc["steps"] for v in s["values"]} == {0.0, 1.0}
    assert all(len(s["values"]) == 1 for s in doc["steps"])  # one compile per commit, no reruns
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "main"


def test_ir_unchanged_between_good_and_bad_stops(tmp_path):
    repo, commits = make_ir_repo(tmp_path, culprit=None)
    res = run(repo, "bisect", commits[0], "--ir", "add_kernel", "--format", "json", "--history",
              str(tmp_path / "h.duckdb"))
    assert res.exit_code == EXIT_GATE
    doc = json.loads(res.stdout)
    assert doc["status"] == "noise" and "IR of add_kernel is the same" in doc["message"]
