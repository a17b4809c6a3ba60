#!/usr/bin/env python3
"""Benchmark `perfq affected` latency on the PyTorch 2.6.0 index (not a test).

Whole-process timings (median of several runs, wall and CPU) for a one-file kernel change
and for a 500-file diff, each against its target and against the anchor measured in the
same run: `python -c "import duckdb"` (the issue's anchor) and `python -c "import _duckdb"`
(DuckDB's engine alone, which is what perfq imports: the least a process that opens the
index pays). CPU
seconds (user + sys of the child) hold up better than wall seconds on a busy machine. Uses
a scratch worktree of the corpus and the corpus's own index (brought up to date first).

    python bench/affected_pytorch.py [--corpus DIR] [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
from child_env import CHILD_ENV

TARGETS = {"one_file_s": 0.25, "five_hundred_files_s": 1.5}


def sh(cmd: list[str], cwd: Path) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=CHILD_ENV)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {proc.stderr.strip()[-400:]}")
    return proc.stdout


def timed(cmd: list[str], cwd: Path, runs: int) -> tuple[float, float, dict]:
    """Median wall and CPU seconds of ``cmd`` over ``runs``, and its last JSON output."""
    walls, cpus, doc = [], [], {}
    for _ in range(runs):
        before = os.times()
        start = time.perf_counter()
        out = sh(cmd, cwd)
        walls.append(time.perf_counter() - start)
        after = os.times()
        cpus.append(after.children_user - before.children_user + after.children_system - before.children_system)
        doc = json.loads(out) if out.strip().startswith("{") else {}
    return statistics.median(walls), statistics.median(cpus), doc


def edit_function_bodies(tree: Path, db: Path, n: int, seed: int = 0) -> int:
    """Add a statement before the closing line of one function in each of ``n`` C++ files
    (a change of code tokens inside a body, as a kernel edit is)."""
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute(
        "SELECT fi.path, min(f.start_line), arg_min(f.end_line, f.start_line) FROM functions f"
        " JOIN files fi ON fi.id = f.file_id"
        " WHERE fi.lang IN ('cpp', 'cuda') AND f.end_line - f.start_line >= 3 GROUP BY fi.path ORDER BY fi.path"
    ).fetchall()
    con.close()
    random.Random(seed).shuffle(rows)
    done = 0
    for path, _, end in rows[:n]:
        file = tree / path
        lines = file.read_text(encoding="utf-8", errors="surrogateescape").splitlines(keepends=True)
        lines.insert(end - 1, "  (void)0;\n")  # before the function's last line (its closing brace)
        file.write_text("".join(lines), encoding="utf-8", errors="surrogateescape")
        done += 1
    return done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--corpus",
        type=Path,
        default=Path(os.environ.get("PERFQ_CORPUS", Path.home() / ".cache/perfq-corpus")) / "pytorch-2.6.0",
    )
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    corpus = args.corpus
    db = corpus / ".git/perfq/index.duckdb"
    sh([sys.executable, "-m", "perfq", "index", "-q"], corpus)  # built if missing, re-linked if of another schema
    scratch = Path(tempfile.mkdtemp(prefix="perfq-bench-affected-"))
    tree = scratch / "tree"
    sh(["git", "-C", str(corpus), "worktree", "add", "-q", "--detach", str(tree), "HEAD"], corpus)
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    # the console script installed beside the anchors' Python, as a user runs it (python -m
    # perfq adds runpy's start-up; a `perfq` found first on PATH can be a version manager's
    # shim, pyenv's here, which adds a bash and `pyenv exec`: 50-100 ms the anchors do not pay)
    script = Path(sys.executable).parent / "perfq"
    perfq = [str(script)] if script.is_file() else [sys.executable, "-m", "perfq"]
    perfq += ["affected", "HEAD~1", "--format", "json"]
    try:
        kernel = tree / "aten/src/ATen/native/cpu/SoftMaxKernel.cpp"
        lines = kernel.read_text().splitlines(keepends=True)
        lines[167] = lines[167].replace("input_data + d0", "input_data + d0 + 0")
        kernel.write_text("".join(lines))
        sh([*git, "commit", "-qam", "one file"], tree)
        sh(perfq, tree)  # warm-up: bytecode written, files in the page cache
        anchor_wall, anchor_cpu, _ = timed([sys.executable, "-c", "import duckdb"], tree, args.runs)
        engine_wall, engine_cpu, _ = timed([sys.executable, "-c", "import _duckdb"], tree, args.runs)
        one_s, one_cpu, doc = timed(perfq, tree, args.runs)
        one_selected = [b["name"] for b in doc["benchmarks"]]
        sh(["git", "reset", "-q", "--hard", "HEAD~1"], tree)
        n = edit_function_bodies(tree, db, 500)
        sh([*git, "commit", "-qam", "500 files"], tree)
        many_s, many_cpu, doc = timed(perfq, tree, max(3, args.runs // 2))
    finally:
        subprocess.run(["git", "-C", str(corpus), "worktree", "remove", "--force", str(tree)], check=False)
    print("perfq affected on the PyTorch 2.6.0 index (whole process, median wall / CPU seconds)")
    print(f"anchor: python -c 'import duckdb'  {anchor_wall:5.2f} s wall  {anchor_cpu:5.2f} s CPU")
    print(f"engine: python -c 'import _duckdb' {engine_wall:5.2f} s wall  {engine_cpu:5.2f} s CPU")
    for label, wall, cpu, target in (
        ("one-file kernel change", one_s, one_cpu, TARGETS["one_file_s"]),
        (f"{n}-file diff", many_s, many_cpu, TARGETS["five_hundred_files_s"]),
    ):
        print(
            f"{label:24} {wall:5.2f} s wall  {cpu:5.2f} s CPU  target <= {target} s  ratio to target "
            f"{wall / target:.2f} (CPU {cpu / target:.2f})  ratio to anchor {wall / anchor_wall:.1f} "
            f"(CPU {cpu / max(anchor_cpu, 1e-6):.1f})  ratio to engine {wall / engine_wall:.1f}"
        )
    print(f"one-file selection: {one_selected}")
    print(
        f"{n}-file diff: changed functions {len(doc.get('changed_functions', []))}, "
        f"benchmarks {len(doc.get('benchmarks', []))}, canary {[c['set'] for c in doc.get('canary', [])]}"
    )


if __name__ == "__main__":
    main()
