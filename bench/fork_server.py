"""Would a fork server per side pay? (issue 38) The cost of a fork against a fresh import, and whether forked
children vary like fresh processes.

Prints: the wall and CPU of ``import torch, benchmark_core, benchmark_runner`` in fresh processes (run from the
corpus's operator_benchmark root); the cost of ``fork`` + ``_exit`` + ``waitpid`` of a process that has imported
them; then softmax on a 1x3x256x256 (N1) and a 4x3x256x256 (N4) input (one thread, the fastest of 10
batches of 10 calls after 20 of warm-up, µs a call) in children forked from ``--servers`` servers and in
``--fresh`` fresh processes, with perfq's malloc settings (``perfq.run.defaults.ALLOCATOR_ENV``). Children
of one server sharing a mode of their own (a bias fresh processes do not have) would make a fork server's
invocations less independent than fresh ones.

Usage: python bench/fork_server.py [--servers 3] [--children 8] [--fresh 12] [--imports 5]
Needs torch and the corpus at $PERFQ_CORPUS/pytorch-2.6.0 (default ~/.cache/perfq-corpus).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

from run_defaults import corpus  # next to this file

from perfq.run.defaults import ALLOCATOR_ENV

HARNESS = "import torch, benchmark_core, benchmark_runner"
SOFTMAX = """
import os, sys, time
import torch
torch.set_num_threads(1)

def one():
    out = []
    for n in (1, 4):
        x = torch.rand(n, 3, 256, 256)
        f = torch.nn.Softmax(dim=1)
        for _ in range(20):
            f(x)
        batches = []
        for _ in range(10):
            t0 = time.perf_counter()
            for _ in range(10):
                f(x)
            batches.append((time.perf_counter() - t0) / 10 * 1e6)
        out.append(min(batches))
    return " ".join(f"{v:.0f}" for v in out)

if sys.argv[1] == "fresh":
    print(one())
else:
    for _ in range(int(sys.argv[1])):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(w, (one() + "\\n").encode())
            os._exit(0)
        os.close(w)
        print(os.read(r, 200).decode().strip(), flush=True)
        os.close(r)
        os.waitpid(pid, 0)
"""
FORK = f"""
import os, time
{HARNESS}
costs = []
for _ in range(10):
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    costs.append((time.perf_counter() - t0) * 1e3)
print(" ".join(f"{{c:.1f}}" for c in costs))
"""


def python(code: str, *args: str) -> str:
    env = {**os.environ, **dict(ALLOCATOR_ENV), "OMP_NUM_THREADS": "1"}
    root = corpus() / "benchmarks/operator_benchmark"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=root, env=env, capture_output=True, text=True,
                          check=True).stdout


def fresh_imports(n: int) -> None:
    walls, cpus = [], []
    for _ in range(n):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        python(HARNESS)
        walls.append(time.monotonic() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    print(f"fresh import: wall {min(walls):.2f}-{max(walls):.2f} s, cpu {min(cpus):.2f}-{max(cpus):.2f} s ({n})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=3)
    parser.add_argument("--children", type=int, default=8)
    parser.add_argument("--fresh", type=int, default=12)
    parser.add_argument("--imports", type=int, default=5)
    args = parser.parse_args()
    print(f"before: {os.getloadavg()}")
    fresh_imports(args.imports)
    forks = sorted(float(v) for v in python(FORK).split())
    print(f"fork + exit + wait: median {statistics.median(forks):.1f} ms, {forks[0]:.1f}-{forks[-1]:.1f} ms")
    for s in range(args.servers):
        print(f"server {s + 1} children (N1 N4 µs):", "; ".join(python(SOFTMAX, str(args.children)).splitlines()))
    fresh = [python(SOFTMAX, "fresh").strip() for _ in range(args.fresh)]
    print("fresh processes (N1 N4 µs):", "; ".join(fresh))
    print(f"after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
