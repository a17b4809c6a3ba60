#!/usr/bin/env python3
"""Trace every PyTorch 2.6.0 operator benchmark file (cold: no cache) the way `perfq index`
does, and print the time and memory against their targets, with the anchor measured in the
same run: importing torch once in a fresh interpreter (the least any tracer pays).

    python bench/trace_pytorch.py [--corpus DIR] [--jobs 2] [--json out.json] [--no-sandbox] [--no-lines]

Tracing runs contained as in `perfq index` (bubblewrap where it works); --no-sandbox measures
without bubblewrap (the environment is scrubbed all the same), to show what the sandbox costs.

Every test records its Python lines too (line coverage, as `perfq index` does); --no-lines
traces without them, to show what line coverage costs.

Needs the corpus (scripts/fetch-pytorch-source.sh) and torch. Targets: all files in <= 120 s on
2 cores with line coverage (issue 40; 60 s without, issue 10), <= 4 GiB peak memory.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from indexer.trace import TraceJob, TraceOptions, sandbox_summary, trace_files  # noqa: E402

TARGET_S = 120.0  # with line coverage (issue 40)
TARGET_MB = 4096.0


def _tree_rss_mb(root: int) -> float:
    """Resident memory of ``root`` and all its descendants (Linux /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/status") as fh:
                kb = next((int(line.split()[1]) for line in fh if line.startswith("VmRSS:")), 0)
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
        rss[int(entry)] = kb / 1024
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0.0)
        stack += children.get(pid, [])
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    corpus = Path(os.environ.get("PERFQ_CORPUS", Path.home() / ".cache/perfq-corpus")) / "pytorch-2.6.0"
    ap.add_argument("--corpus", type=Path, default=corpus)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--no-sandbox", action="store_true", help="trace without bubblewrap")
    ap.add_argument("--no-lines", action="store_true", help="trace without per-test Python line coverage")
    args = ap.parse_args()
    pt = args.corpus / "benchmarks/operator_benchmark/pt"
    files = sorted(pt.glob("*_test.py"))
    if not files:
        sys.exit(f"error: no operator benchmarks under {pt} (fetch the corpus first)")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], check=True, cwd="/tmp")
    anchor = time.perf_counter() - t0

    peak = 0.0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.2):
            peak = max(peak, _tree_rss_mb(os.getpid()))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    jobs = [TraceJob(str(p.relative_to(args.corpus)), "operator_benchmark", p) for p in files]
    t1 = time.perf_counter()
    opts = TraceOptions(parallel=args.jobs, repo=args.corpus, sandbox=not args.no_sandbox,
                        extra={"lines": not args.no_lines})
    results = trace_files(jobs, opts)
    wall = time.perf_counter() - t1
    done.set()
    sampler.join()
    own = _tree_rss_mb(os.getpid())
    peak = max(peak, own)
    status = Counter(r.status.value for r in results.values())
    modes = Counter(t.mode.value for r in results.values() for t in r.tests)
    print(f"files: {len(files)} ({dict(status)}); tests: {sum(modes.values())} ({dict(modes)})")
    for r in sorted(results.values(), key=lambda r: r.path):
        if r.status.value != "ok":
            print(f"  {r.status.value}: {r.path}: {r.reason}")
    print(f"trace time : {wall:6.1f} s   target {TARGET_S:.0f} s   ratio {wall / TARGET_S:.2f}")
    print(f"peak memory: {peak:6.0f} MB  target {TARGET_MB:.0f} MB ratio {peak / TARGET_MB:.2f}")
    print(f"anchor     : import torch {anchor:.2f} s; trace time / anchor = {wall / anchor:.1f}")
    print(f"sandbox    : {'none (--no-sandbox)' if args.no_sandbox else sandbox_summary()}")
    lines = sum(len(t.lines) for r in results.values() for t in r.tests)
    print(f"lines      : {'off (--no-lines)' if args.no_lines else f'{lines} (test, file) line sets recorded'}")
    if args.json:
        args.json.write_text(json.dumps({"seconds": wall, "peak_mb": peak, "anchor_s": anchor, "status": status}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
