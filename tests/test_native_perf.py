"""Native sampling for real: perf on a tiny torch loop, its stacks mapped to a kernel's name
(skipped without perf, without torch, or where perf may not sample)."""

from __future__ import annotations

import os
import sys

import pytest

from common import proc
from common.sandbox import Launch
from indexer.native import perf_problem, record
from indexer.native_frames import FunctionMatcher, profile

pytestmark = pytest.mark.torch

LOOP = "import torch\nx = torch.randn(256, 1024)\nfor _ in range(1000):\n    torch.neg(x); torch.softmax(x, -1)\n"


def test_perf_stacks_of_a_torch_loop_map_to_its_kernels(tmp_path):
    pytest.importorskip("torch")
    problem = perf_problem()
    if problem:
        pytest.skip(problem)
    matcher = FunctionMatcher([(1, "at::native::CPU_CAPABILITY::neg_kernel"),
                               (2, "at::native::(anonymous namespace)::softmax_lastdim_kernel_impl"),
                               (3, "at::native::not_run_here")])
    with proc.scratch_dir("native-test") as scratch:
        samples = record(Launch([sys.executable, "-c", LOOP]), scratch, tmp_path,
                         {**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300)
    prof = profile(samples, matcher)
    shares = dict(prof.shares)
    # both kernels on their stacks (neg inside a loop template's arguments; with one thread the
    # softmax loop is inlined into its kernel)
    assert shares.get(1, 0) > 0.005 and shares.get(2, 0) > 0.01
    assert 3 not in shares
    assert prof.rate.samples > 0 and prof.rate.frames > prof.rate.frames_mapped


FAKE_PERF = """#!/bin/sh
# records instantly (an empty data file), then hangs in `perf script`
if [ "$1" = record ]; then
  while [ "$1" != -o ]; do shift; done
  : > "$2"
  exit 0
fi
exec sleep 1000
"""


def test_a_perf_that_hangs_is_stopped(tmp_path, monkeypatch):
    """Issue 37: `perfq index --native` waited forever on a `perf script` that hung."""
    fake = tmp_path / "bin" / "perf"
    fake.parent.mkdir()
    fake.write_text(FAKE_PERF)
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    with proc.scratch_dir("native-test") as scratch, pytest.raises(RuntimeError, match="printed nothing for 2 s"):
        record(Launch(["true"]), scratch, tmp_path, dict(os.environ), timeout=2)
