#!/usr/bin/env python3
"""Benchmark `perfq import` and `perfq compare` on a result file of 1.2 M samples (not a test).

The file has the shape of a nightly label of PyTorch's operator benchmarks merged from CI
shards: 58 benchmark files x 35 tests = 2,030 tests, eager, CPU; 10 runs per side, each with
every test x 30 repeats (1.218 M samples); 3% of the tests are 20% slower on the head side.
It is written by perfq's own exporter (``perfq run --out`` format).

Each figure is printed with its anchor measured in the same run, their ratio and the target:

* import: ``perfq import FILE`` as a process (wall time and peak RSS); anchor: DuckDB's
  ``read_json`` of the same file alone (the sample lines into a table).
* compare: ``perfq compare LABEL --format json`` as a process, best of 3 (the machine is shared:
  the fastest run is the least disturbed one; the CPU seconds of that run are printed too);
  anchor: one numpy pass over the label's samples (read from the history as columns, sorted, a
  median per test and side), best of 3 as well.

    python bench/results_pytorch.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import duckdb
import numpy as np

from perfq.run.results import export_runs
from perfq.run.runs import Run
from schema.results_rows import RunStatus, Side

FILES, TESTS_PER_FILE, RUNS_PER_SIDE, REPEATS = 58, 35, 10, 30
SLOW_SHARE, SLOWDOWN, NOISE = 0.03, 1.20, 0.03
TARGETS = {"import_s": 20.0, "import_rss_mb": 500.0, "compare_s": 5.0}
LABEL = "nightly"


class _M:
    """A measurement as Run.add_sample takes it."""

    __slots__ = ("test", "mode", "device", "metric", "unit", "value")

    def __init__(self, test: str, value: float) -> None:
        self.test, self.mode, self.device, self.metric, self.unit, self.value = (
            test, "eager", "cpu", "forward_time", "us", value)


def write_file(path: Path) -> int:
    """The result file; returns the number of samples."""
    rng = random.Random(2024)
    tests = [(f"bench{f:02d}_test", f"Case{f:02d}_{t:02d}_N{2 ** (t % 8 + 4)}_cpu", rng.uniform(5.0, 5000.0))
             for f in range(FILES) for t in range(TESTS_PER_FILE)]
    slow = set(rng.sample(range(len(tests)), round(SLOW_SHARE * len(tests))))
    runs = []
    for side in (Side.base, Side.head):
        for shard in range(RUNS_PER_SIDE):
            run = Run(label=LABEL, side=side, ref=f"{side.value}-ref", commit_sha="0" * 40, torch_version="2.6.0",
                      python="/usr/bin/python3", host=f"runner-{shard}", cpu="bench", command="perfq run",
                      status=RunStatus.complete, started_at=f"2025-01-{shard + 1:02d}T00:00:00")
            for rep in range(REPEATS):
                for i, (bench, test, base) in enumerate(tests):
                    factor = SLOWDOWN if side == Side.head and i in slow else 1.0
                    run.add_sample(rep, bench, _M(test, round(base * factor * rng.lognormvariate(0, NOISE), 3)))
            runs.append(run)
    export_runs(runs, path)
    return sum(len(r.samples) for r in runs)


class Measured(NamedTuple):
    """One perfq process: wall seconds, CPU seconds (user + system), peak RSS in MiB, stdout."""

    wall: float
    cpu: float
    rss: float
    out: str


def perfq_process(*args: str) -> Measured:
    """One perfq process measured by GNU time (wall, user + system CPU, peak RSS)."""
    marker = "perfq-bench:"
    cmd = ["/usr/bin/time", "-f", f"{marker}%U %S %M", sys.executable, "-m", "perfq", *args]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "CI": "true"})
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"perfq {' '.join(args)} failed: {proc.stderr.strip()[-800:]}")
    user, system, rss_kb = next(line[len(marker):] for line in proc.stderr.splitlines()
                                if line.startswith(marker)).split()
    return Measured(elapsed, float(user) + float(system), int(rss_kb) / 1024, proc.stdout)


def anchor_read_json(path: Path) -> float:
    """DuckDB's read_json of the file's sample lines into a table, alone."""
    con = duckdb.connect()
    start = time.perf_counter()
    con.execute(
        "CREATE TABLE s AS SELECT * FROM read_json(?, format = 'newline_delimited', columns = {'type': 'VARCHAR', "
        "'run': 'BIGINT', 'seq': 'BIGINT', 'repeat_index': 'BIGINT', 'benchmark': 'VARCHAR', 'test': 'VARCHAR', "
        "'mode': 'VARCHAR', 'device': 'VARCHAR', 'metric': 'VARCHAR', 'unit': 'VARCHAR', 'value': 'DOUBLE'}) "
        "WHERE type = 'sample'", [str(path)])
    elapsed = time.perf_counter() - start
    con.close()
    return elapsed


def anchor_numpy_pass(history: Path) -> float:
    """Read the label's samples as columns and take a median per test and side with numpy."""
    start = time.perf_counter()
    con = duckdb.connect(str(history), read_only=True)
    cols = con.execute(
        "SELECT dense_rank() OVER (ORDER BY s.benchmark, s.test) * 2 + (r.side = 'head')::INT AS g, s.value "
        "FROM samples s JOIN runs r ON r.id = s.run_id WHERE r.label = ?", [LABEL]).fetchnumpy()
    con.close()
    order = np.lexsort((cols["value"], cols["g"]))
    g, v = cols["g"][order], cols["value"][order]
    counts = np.bincount(g)
    starts = np.cumsum(counts) - counts
    has = counts > 0
    _ = (v[starts[has] + (counts[has] - 1) // 2] + v[starts[has] + counts[has] // 2]) / 2
    return time.perf_counter() - start


def row(name: str, figure: float, unit: str, anchor: float | None, target: float, cpu: float | None = None) -> bool:
    ratio = f"{figure / anchor:5.1f}x" if anchor else "   - "
    anchor_text = f"{anchor:7.2f} {unit}" if anchor is not None else "        -"
    cpu_text = f"(CPU {cpu:5.2f} s)" if cpu is not None else " " * 14
    ok = figure <= target
    print(f"{name:<20} {figure:8.2f} {unit:<3} {cpu_text}  anchor {anchor_text}  ratio {ratio}  "
          f"target <= {target:g} {unit}  {'PASS' if ok else 'FAIL'}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", type=Path, help="write the file and history here and keep them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="perfq-results-bench-") as tmpdir:
        tmp = args.keep or Path(tmpdir)
        tmp.mkdir(parents=True, exist_ok=True)
        path, history = tmp / "results.json", tmp / "history.duckdb"
        history.unlink(missing_ok=True)
        start = time.perf_counter()
        samples = write_file(path)
        print(f"result file: {samples:,} samples, {path.stat().st_size / 1e6:.0f} MB "
              f"(written in {time.perf_counter() - start:.0f} s); {os.cpu_count()} cpus, "
              f"load {os.getloadavg()[0]:.1f}")
        read_json = anchor_read_json(path)
        imported = perfq_process("import", str(path), "--history", str(history))
        print(imported.out.strip())
        again = perfq_process("import", str(path), "--history", str(history))
        assert "0 new run(s)" in again.out and " 0 new sample(s)" in again.out, again.out
        numpy_pass = min(anchor_numpy_pass(history) for _ in range(3))
        compared = min((perfq_process("compare", LABEL, "--format", "json", "--history", str(history))
                        for _ in range(3)), key=lambda m: m.wall)
        doc = json.loads(compared.out)
        print(f"compare: {len(doc['tests'])} tests, summary {doc['summary']}, peak RSS {compared.rss:.0f} MiB; "
              f"second import of the same file: {again.wall:.1f} s, nothing added; load {os.getloadavg()[0]:.1f}")
        ok = all((
            row("import (wall)", imported.wall, "s", read_json, TARGETS["import_s"], imported.cpu),
            row("import (peak RSS)", imported.rss, "MiB", None, TARGETS["import_rss_mb"]),
            row("compare (wall)", compared.wall, "s", numpy_pass, TARGETS["compare_s"], compared.cpu),
        ))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
