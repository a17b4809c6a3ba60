"""`TRITON_INTERPRET=1` in perfq's own environment (a CPU-only user exports it for their benchmarks) does not
break perfq's compiles: `perfq ir capture` and `perfq ir collect` still store every IR."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.triton, pytest.mark.torch]
pytest.importorskip("triton")
pytest.importorskip("torch")  # the benchmark launches its kernel in the interpreter on CPU tensors

KERNELS = '''
import triton
import triton.language as tl


@triton.jit
def twice(x):
    return x * 2


@triton.jit
def scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, twice(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)
'''

BENCH = '''
import torch
from kmod import scale_kernel

x = torch.ones(128, dtype=torch.float32)
scale_kernel[(1,)](x, 100, BLOCK=128, num_warps=2)
print("launched", float(x[0]))
'''

MANIFEST = """\
paths: ["."]
kernels:
  - kernel: kmod:scale_kernel
    specializations:
      - signature: {x_ptr: "*fp32", n: i32}
        constexprs: {BLOCK: 64}
"""


def _perfq(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRITON_INTERPRET": "1"}  # in perfq's own environment, as a user exports it
    return subprocess.run([sys.executable, "-m", "perfq", "ir", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=600)


def test_capture_and_collect_with_triton_interpret_exported(tmp_path: Path):
    (tmp_path / "kmod.py").write_text(KERNELS)
    (tmp_path / "bench.py").write_text(BENCH)
    (tmp_path / "perfq-ir.yaml").write_text(MANIFEST)
    history = str(tmp_path / "h.duckdb")
    common = ["--target", "cuda:90", "--stage", "ttir", "--history", history, "--repo", str(tmp_path),
              "--format", "json"]
    captured = _perfq(tmp_path, "capture", "--label", "cap", *common, "--", sys.executable, "bench.py")
    assert captured.returncode == 0, captured.stderr
    assert "launched 2.0" in captured.stdout  # the benchmark itself ran in the interpreter
    doc = json.loads(captured.stdout[captured.stdout.index("{"):])
    assert doc["stored"] == 1 and not doc.get("errors"), doc
    collected = _perfq(tmp_path, "collect", "--label", "man", *common)
    assert collected.returncode == 0, collected.stderr
    doc = json.loads(collected.stdout)
    assert doc["stored"] == 1 and not doc.get("errors"), doc
