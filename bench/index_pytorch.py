#!/usr/bin/env python3
"""Benchmark `perfq index` on the real PyTorch 2.6.0 tree (not a test).

Prints files, functions, edges, ops, benchmarks, wall time and peak RSS of cold full
indexes (three by default; benchmarks not traced: `bench/trace_pytorch.py` measures that), the time of an
incremental re-index after one file changed (the median of seven edits, against anchors timed
beside each edit), and resolution rates, each with its target.
The floor, measured in the same run (before each build and after the last; a build is set
against the mean of the two beside it, and the median ratio is reported): a header-less
libclang parse and cursor walk of every C++ file the index reads, on as many processes as the
build uses; the incremental rows' anchors: the start of a perfq process (``perfq --version``) and
``python -c "import duckdb"`` (the affected bench's anchor), also measured in the same run.
Works in a scratch worktree so the corpus stays untouched; perfq runs with its bytecode cached,
as in a user's shell (bench/child_env.py).

    python bench/index_pytorch.py [--corpus DIR] [--jobs N] [--builds N]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from child_env import CHILD_ENV

EDITS = 7  # incremental edits of each kind (each anchor is timed beside every edit)
TARGETS = {"full_s": 15.0, "rss_mib": 1024.0, "incremental_s": 0.5, "resolution_pct": 95.0}


def _parse_walk(path: str) -> int:
    """One file parsed header-less by libclang (single-file parse: no #include is read, as
    perfq's own libclang pass does) and its cursors walked."""
    from clang import cindex

    from indexer.cpp import _INCOMPLETE, _KEEP_GOING, _SINGLE_FILE_PARSE, _clang_args

    tu = cindex.Index.create().parse(path, args=_clang_args(path),
                                     options=_SINGLE_FILE_PARSE | _KEEP_GOING | _INCOMPLETE)
    return sum(1 for _ in tu.cursor.walk_preorder())


def children_cpu() -> float:
    """CPU seconds of this process's finished children (and theirs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def parse_floor(tree: Path, jobs: int) -> tuple[float, float, int]:
    """Seconds and CPU seconds to parse and walk every C++ file perfq indexes in ``tree``, on
    ``jobs`` processes."""
    from common.config import load_config
    from indexer.discover import discover

    files = [str(tree / p) for p in discover(tree, load_config(tree))["cpp"]]
    start, cpu = time.perf_counter(), children_cpu()
    pool = multiprocessing.get_context("fork").Pool(jobs)
    for _ in pool.imap_unordered(_parse_walk, files, chunksize=16):
        pass
    pool.close()
    pool.join()  # joined: their CPU time is counted
    return time.perf_counter() - start, children_cpu() - cpu, len(files)


def run(cmd: list[str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=CHILD_ENV)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {proc.stderr.strip()[-400:]}")
    return time.perf_counter() - start, proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path,
                    default=Path(os.environ.get("PERFQ_CORPUS", Path.home() / ".cache/perfq-corpus")) / "pytorch-2.6.0")
    ap.add_argument("--jobs", type=int, default=0)
    ap.add_argument("--builds", type=int, default=3, help="cold full builds (the median is reported)")
    args = ap.parse_args()
    if not (args.corpus / ".git").exists():
        sys.exit(f"no corpus at {args.corpus}: run scripts/fetch-pytorch-source.sh")
    scratch = Path(tempfile.mkdtemp(prefix="perfq-bench-index-"))
    tree = scratch / "tree"
    subprocess.run(["git", "-C", str(args.corpus), "worktree", "add", "-q", "--detach", str(tree), "HEAD"], check=True)
    db = scratch / "index.duckdb"
    perfq = [sys.executable, "-m", "perfq", "index", "--repo", str(tree), "--db", str(db), "-q", "--format", "json",
             "--no-trace"]
    if args.jobs:
        perfq += ["--jobs", str(args.jobs)]
    jobs = args.jobs or os.cpu_count() or 1
    try:
        # cold builds, the floor timed before each and after the last: this machine's speed drifts
        # by tens of percent within minutes, so each build is set against the floors beside it
        floors = [parse_floor(tree, jobs)]
        floor_files = floors[0][2]
        builds = []  # (wall, CPU, report)
        for _ in range(args.builds):
            for suffix in ("", ".facts", ".stat", ".graph"):
                db.with_name(db.name + suffix).unlink(missing_ok=True)
            cpu = children_cpu()
            wall, out = run(perfq, tree)
            builds.append((wall, children_cpu() - cpu, json.loads(out)))
            floors.append(parse_floor(tree, jobs))
        rss_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        walls = [(wall / ((floors[i][0] + floors[i + 1][0]) / 2), wall) for i, (wall, _, _) in enumerate(builds)]
        cpus = [(cpu / ((floors[i][1] + floors[i + 1][1]) / 2), cpu) for i, (_, cpu, _) in enumerate(builds)]
        ratio, full_s = sorted(walls)[len(walls) // 2]
        cpu_ratio, full_cpu = sorted(cpus)[len(cpus) // 2]
        report = builds[[w for _, w in walls].index(full_s)][2]
        kernel = tree / "aten/src/ATen/native/cpu/SoftMaxKernel.cpp"
        body_edits, new_functions = [], []  # the median of EDITS of each: a patch takes under a second
        starts, duckdbs = [], []  # the anchors, each timed beside each edit: the machine drifts within minutes

        def time_anchors() -> None:
            starts.append(run([sys.executable, "-m", "perfq", "--version"], tree)[0])
            duckdbs.append(run([sys.executable, "-c", "import duckdb"], tree)[0])

        for i in range(EDITS):
            time_anchors()
            kernel.write_text(kernel.read_text() + f"\n// perfq bench: one changed file ({i})\n")
            body_edits.append(run(perfq, tree))
        for i in range(EDITS):
            time_anchors()
            fresh = f"namespace at::native {{ void perfq_bench_new_function_{i}() {{}} }}\n"
            kernel.write_text(kernel.read_text() + fresh)
            new_functions.append(run(perfq, tree))
        inc_s, out = sorted(body_edits)[EDITS // 2]
        inc = json.loads(out)
        struct_s, out = sorted(new_functions)[EDITS // 2]
        struct = json.loads(out)
        _, stats = run([sys.executable, "-m", "perfq", "stats", "--repo", str(tree), "--db", str(db), "--format",
                        "json"], tree)
        stats = json.loads(stats)
    finally:
        subprocess.run(["git", "-C", str(args.corpus), "worktree", "remove", "--force", str(tree)], check=False)
    counts = report["counts"]
    print("perfq index on PyTorch 2.6.0")
    for key in ("files", "functions", "calls", "call_edges", "reach_edges", "ops", "kernels", "stub_impls",
                "library_impls", "benchmarks", "bench_ops"):
        print(f"  {key:<14} {counts.get(key, 0):>9}")
    print("  phases (full): " + ", ".join(f"{k} {v:.1f}s" for k, v in report["timings"].items()))
    rates = dict(stats["resolution"])
    print(f"parse floor     {', '.join(f'{f[0]:.1f}' for f in floors)} s   (libclang, header-less, {floor_files} "
          "C++ files, walked; before each build and after the last)")
    print(f"full index      {full_s:6.1f} s   target <= {TARGETS['full_s']:.0f} s   ratio to target "
          f"{full_s / TARGETS['full_s']:.2f}   ratio to the parse floor {ratio:.2f} (the median of "
          f"{len(builds)} builds: {', '.join(f'{r:.2f}' for r, _ in walls)}; each against the floors beside it)")
    print(f"  CPU time      {full_cpu:6.1f} s   (ratio to the floor's CPU {cpu_ratio:.2f}, median of "
          f"{', '.join(f'{r:.2f}' for r, _ in cpus)}; steadier than wall time on a shared machine)")
    print(f"peak RSS        {rss_mib:6.0f} MiB target <= {TARGETS['rss_mib']:.0f} MiB ratio "
          f"{rss_mib / TARGETS['rss_mib']:.2f}")
    print(f"incremental     {inc_s:6.2f} s   target <= {TARGETS['incremental_s']} s   ratio "
          f"{inc_s / TARGETS['incremental_s']:.2f}   mode {inc['mode']}, re-parsed {inc['reparsed']} file")
    print("  phases (incremental): " + ", ".join(f"{k} {v:.1f}s" for k, v in inc["timings"].items()))
    print(f"incremental, one new function {struct_s:5.2f} s   ratio "
          f"{struct_s / TARGETS['incremental_s']:.2f}   mode {struct['mode']}, re-parsed {struct['reparsed']}")
    edits = {"incremental": [t for t, _ in body_edits], "one new function": [t for t, _ in new_functions]}
    for name, times, what in (("perfq --version", starts, "this machine's start of a perfq process"),
                              ("python -c 'import duckdb'", duckdbs, "the affected bench's anchor")):
        ratios = ", ".join(f"{edit} {statistics.median(t) / statistics.median(times):.1f}x"
                           f" (min {min(t) / min(times):.1f}x)" for edit, t in edits.items())
        print(f"anchor: {name} median {statistics.median(times):.2f} s, min {min(times):.2f} s   ({what}; {ratios})")
    for name, value in rates.items():
        print(f"{name:<30} {value}")


if __name__ == "__main__":
    main()
