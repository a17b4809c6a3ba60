"""Figures for `perfq coverage` on the real PyTorch 2.6.0 index.

1. Report time: the full report (facts, history, grouping, every renderer) on the index,
   median of a few runs; plus, since the 2.6.0 tree has a single commit, the churn path
   timed on a synthetic history (random changed lines in indexed functions).
2. Scaffold check: scaffold benchmarks for 30 uncovered operators and run each once on CPU
   against the installed torch, from the 2.6.0 ``benchmarks/operator_benchmark`` dir (so that
   ``import operator_benchmark as op_bench`` resolves). Selection rule: uncovered groups of
   the report filtered on CPU-capable dispatch keys, ranked as the report ranks them, keeping
   public aten operators (no leading underscore, no ``*_backward``: those are autograd
   internals nobody calls directly) that have a function variant.

Usage: python bench/coverage_pytorch.py [--repo TREE] [--db INDEX] [--n 30] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb

from common.errors import PerfqError
from common.paths import default_index_path
from perfq.coverage import render as render
from perfq.coverage.pipeline import DEFAULT_INFRA_OPS, CoverageRequest, coverage_report
from perfq.coverage.report import functions_touched, ops_reached
from perfq.coverage.scaffold import pick_overload, scaffold
from schema.index_store import IndexStore

CORPUS = Path(os.environ.get("PERFQ_CORPUS", Path.home() / ".cache/perfq-corpus")) / "pytorch-2.6.0"
CPU_KEYS = ["CPU", "CompositeImplicitAutograd", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional"]


def time_report(repo: Path, db: Path, runs: int) -> None:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        report = coverage_report(CoverageRequest(repo, db))
        for fn in (render.to_json_text, render.to_csv, render.to_markdown, render.to_html, render.to_text):
            fn(report)
        times.append(time.perf_counter() - t0)
    s = report.summary
    print(
        f"report (load + history + rank + json/csv/markdown/html/table): median {statistics.median(times):.2f} s "
        f"over {runs} runs (min {min(times):.2f}, max {max(times):.2f})"
    )
    print(
        f"  {s.ops_covered}/{s.ops_total} operator groups covered, {s.overloads_covered}/"
        f"{s.overloads_total} overloads, {len(s.stale_benchmarks)} stale benchmark files, "
        f"{len(s.unlinked_benchmarks)} benchmark files linked to no op; history: {s.history and s.history.note or ''}"
    )


def time_synthetic_churn(db: Path, commits: int, seed: int = 0) -> None:
    """Churn path on a synthetic history: each commit changes one line in 1-4 random C++/CUDA functions."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        funcs = con.execute(
            """SELECT fi.path, f.start_line, f.end_line FROM functions f JOIN files fi ON fi.id = f.file_id
               WHERE fi.lang IN ('cpp', 'cuda')"""
        ).fetchall()
        rng = random.Random(seed)
        changes = []
        for i in range(commits):
            for path, start, end in rng.sample(funcs, rng.randint(1, 4)):
                line = rng.randint(start, end)
                changes.append((f"c{i}", path, [(line, line)]))
        t0 = time.perf_counter()
        extents = IndexStore(con).function_extents({p for _, p, _ in changes})
        touched = functions_touched(changes, extents)
        edges, op_nodes, fn_nodes = IndexStore(con).reach_graph()
        starts = {c: [fn_nodes[f] for f in fids if f in fn_nodes] for c, fids in touched.items()}
        reach = ops_reached(edges, op_nodes, starts, max_depth=24, reach_bound=DEFAULT_INFRA_OPS)
        op_commits: dict[str, int] = {}
        for ops in reach.ops.values():
            for op in ops:
                op_commits[op] = op_commits.get(op, 0) + 1
        took = time.perf_counter() - t0
    finally:
        con.close()
    per_commit = [len(v) for v in reach.ops.values()]
    print(
        f"synthetic churn: {commits} commits, {len(changes)} changed functions -> {took:.2f} s "
        f"(extents + graph load + bounded walks); ops per commit: median {statistics.median(per_commit):.0f}, "
        f"max {max(per_commit)}; {len(op_commits)} ops with churn > 0; {len(reach.infrastructure)} commits "
        f"touched shared infrastructure (> {DEFAULT_INFRA_OPS} ops)"
    )


def history_demo(repo: Path, db: Path, cases: Path, workdir: Path) -> None:
    """Real diffs as history: clone the tree (shared objects), commit each eval case diff, report churn."""
    clone = workdir / "pytorch-history"
    if clone.exists():
        subprocess.run(["rm", "-rf", str(clone)], check=True)
    subprocess.run(["git", "clone", "-q", "--shared", str(repo), str(clone)], check=True)
    env_args = ["-c", "user.name=perfq-bench", "-c", "user.email=bench@perfq"]
    applied = []
    for diff in sorted(cases.glob("*.diff")):
        proc = subprocess.run(["git", "apply", str(diff)], cwd=clone, capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"  (skipped {diff.name}: {proc.stderr.strip().splitlines()[0] if proc.stderr.strip() else ''})")
            continue
        subprocess.run(["git", *env_args, "commit", "-q", "-am", diff.stem], cwd=clone, check=True)
        applied.append(diff.stem)
    t0 = time.perf_counter()
    report = coverage_report(CoverageRequest(clone, db))
    took = time.perf_counter() - t0
    hist = report.summary.history
    print(
        f"history demo: {len(applied)} real kernel diffs committed on a clone of the tree -> report with churn "
        f"in {took:.2f} s; {hist.commits_with_indexed_changes} commits touched indexed functions, "
        f"{hist.commits_touching_infrastructure} touched shared infrastructure"
    )
    for row in [r for r in report.rows if r.churn][:20]:
        status = "covered by " + ", ".join(row.benchmarks) if row.covered else "NO BENCHMARK"
        print(f"  churn {row.churn}  {row.op:28} {status}")


def select_ops(repo: Path, db: Path, n: int) -> list[tuple[str, str]]:
    """(group, chosen schema) for the first ``n`` uncovered public aten groups with a CPU-capable key."""
    report = coverage_report(CoverageRequest(repo, db, dispatch=tuple(CPU_KEYS), uncovered_only=True))
    con = duckdb.connect(str(db), read_only=True)
    chosen = []
    try:
        for row in report.rows:
            if row.op.startswith("_") or "::" in row.op or row.op.endswith("_backward") or "backward" in row.op:
                continue
            rows = con.execute(
                "SELECT schema FROM ops WHERE base = ? AND namespace = 'aten' AND variants LIKE '%function%'",
                [row.op],
            ).fetchall()
            if not rows:
                continue
            chosen.append((row.op, pick_overload([r[0] for r in rows])))
            if len(chosen) == n:
                break
    finally:
        con.close()
    return chosen


def run_one(bench_root: Path, path: Path) -> tuple[bool, str]:
    cmd = [
        sys.executable,
        str(path),
        "--iterations",
        "1",
        "--warmup-iterations",
        "0",
        "--num-runs",
        "1",
        "--device",
        "cpu",
        "--tag-filter",
        "short",
    ]
    try:
        proc = subprocess.run(
            cmd,
            cwd=bench_root,
            capture_output=True,
            text=True,
            timeout=300,
            env={"PYTHONPATH": str(bench_root), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
        )
    except subprocess.TimeoutExpired:
        return False, "timeout after 300 s"
    if proc.returncode < 0 or proc.returncode > 128:
        sig = -proc.returncode if proc.returncode < 0 else proc.returncode - 128
        return False, f"the process crashed (signal {sig}) inside the operator"
    if proc.returncode == 0 and "Forward Execution Time" in proc.stdout:
        return True, f"{proc.stdout.count('Forward Execution Time')} tests"
    lines = [ln for ln in proc.stderr.splitlines() if re.search(r"Error|error:|Exception", ln)]
    reason = (lines[-1] if lines else (proc.stderr.strip().splitlines() or ["no output"])[-1])[:240]
    return False, reason


def scaffold_check(repo: Path, db: Path, n: int, keep: Path | None) -> None:
    bench_root = repo / "benchmarks" / "operator_benchmark"
    torch_version = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True, cwd="/"
    ).stdout.strip()
    out = keep or Path(tempfile.mkdtemp(prefix="perfq-scaffolds-"))
    out.mkdir(parents=True, exist_ok=True)
    selected = select_ops(repo, db, n)
    jobs = []
    results: list[tuple[str, str, bool, str]] = []
    for group, schema in selected:
        try:
            sc = scaffold(schema)
        except PerfqError as exc:
            results.append((group, schema, False, f"not scaffolded: {exc}"))
            continue
        path = out / sc.filename
        path.write_text(sc.text)
        jobs.append((group, schema, path))
    with ThreadPoolExecutor(max_workers=2) as pool:
        for (group, schema, _), (ok, why) in zip(
            jobs, pool.map(lambda j: run_one(bench_root, j[2]), jobs), strict=True
        ):
            results.append((group, schema, ok, why))
    passed = sum(1 for r in results if r[2])
    print(
        f"scaffold check: {passed}/{len(results)} scaffolded benchmarks ran once on CPU "
        f"({100 * passed / max(len(results), 1):.0f}%) with torch {torch_version}; files in {out}"
    )
    for group, schema, ok, why in results:
        print(f"  {'OK  ' if ok else 'FAIL'} {group:32} {schema.split('(')[0]:40} {why}")
    (out / "results.json").write_text(
        json.dumps([{"op": g, "schema": s, "ok": ok, "detail": w} for g, s, ok, w in results], indent=2)
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=CORPUS)
    ap.add_argument("--db", type=Path, default=None)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--synthetic-commits", type=int, default=3000)
    ap.add_argument("--keep", type=Path, default=None, help="write the scaffolds here")
    ap.add_argument("--skip-scaffold", action="store_true")
    ap.add_argument(
        "--cases",
        type=Path,
        default=Path("/work/shared/eval/dev/cases"),
        help="diffs committed on a clone for the history demo ('' to skip)",
    )
    args = ap.parse_args()
    db = args.db or default_index_path(args.repo)
    try:
        time_report(args.repo, db, args.runs)
        if args.synthetic_commits:
            time_synthetic_churn(db, args.synthetic_commits)
        if args.cases and args.cases.is_dir():
            history_demo(args.repo, db, args.cases, Path(tempfile.mkdtemp(prefix="perfq-cov-hist-")))
        if not args.skip_scaffold:
            scaffold_check(args.repo, db, args.n, args.keep)
    except PerfqError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
