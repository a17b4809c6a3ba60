#!/usr/bin/env python3
"""What per-test Python line coverage costs on torch-Python-heavy work (not a test).

Runs the same loop (a FakeQuantize module built and run, a functional op, Tensor.split: torch's
own Python, as quantization_test's tests run it) N times, each iteration a "test": bare (the
floor), under the tracer's recorder (indexer/trace_driver.py `_LineRecorder`, sys.settrace), and
under coverage.py's C tracer with a dynamic context per test (when coverage is installed), whose
per-context lines then have to be read back. Prints each as a ratio to the floor of the same run.

    python bench/line_coverage_cost.py [--tests 300]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "indexer"))

import torch  # noqa: E402
import trace_driver  # noqa: E402 - the tracer's own recorder, as perfq index runs it
from torch.ao.quantization import FakeQuantize  # noqa: E402


def one_test() -> None:
    fq = FakeQuantize()
    x = torch.rand(8, 8)
    for _ in range(3):
        fq(x)
    torch.nn.functional.relu(x).split(2)


def timed(n: int, around) -> float:
    started = time.perf_counter()
    for i in range(n):
        with around(i):
            one_test()
    return time.perf_counter() - started


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tests", type=int, default=300)
    n = ap.parse_args().tests
    timed(20, lambda i: contextlib.nullcontext())  # warm-up
    floor = timed(n, lambda i: contextlib.nullcontext())
    recorder = trace_driver._LineRecorder(os.getcwd(), "tree/", "/nonexistent.py")

    def settrace(i: int):
        recorder.take()
        return recorder.recording(shapes_only=False)

    ours = timed(n, settrace)
    print(f"floor (no coverage)        : {floor:6.2f} s for {n} tests")
    print(f"sys.settrace recorder      : {ours:6.2f} s  ratio {ours / floor:.2f}")
    try:
        import coverage
    except ImportError:
        print("coverage.py                : not installed (pip install coverage)")
        return 0
    cov = coverage.Coverage(data_file=None, include=[os.path.dirname(torch.__file__) + "/*"], branch=False)

    @contextlib.contextmanager
    def context(i: int):
        cov.switch_context(f"test{i}")
        yield

    cov.start()
    run = timed(n, context)
    cov.stop()
    data = cov.get_data()
    started = time.perf_counter()
    for name in data.measured_contexts():
        data.set_query_contexts([name])
        for path in data.measured_files():
            data.lines(path)
    read = time.perf_counter() - started
    print(f"coverage.py, context/test  : {run:6.2f} s  ratio {run / floor:.2f}; reading the contexts back "
          f"{read:.2f} s (total {(run + read) / floor:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
