"""Do `perfq run --ab` defaults decide? An A/A of 5 operator_benchmark files at default settings.

Runs ``perfq run --ab`` with the same interpreter on both sides (an A/A: every regression or
improvement it reports is a false one) over five PyTorch 2.6.0 operator_benchmark files
(softmax, add, layernorm, sum, cat: issue 30's set), with no runner or sampling settings on the
command line (only the sides, the files and where to store results), then
``perfq compare --format json``. Prints each figure against its target (issue 30):
0 regressions or improvements, >= 90% of the tests decided "same" (no change beyond ±R) with
median R <= 5%, in <= 600 s; and the load average before and after (the machine is shared).

Usage: python bench/run_defaults.py [--rounds N] [--bench NAME ...] [-- EXTRA perfq run FLAGS]
Needs torch and the corpus at $PERFQ_CORPUS/pytorch-2.6.0 (default ~/.cache/perfq-corpus).
``--rounds N`` repeats the whole A/A N times (fresh labels).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCHES = ("softmax", "add", "layernorm", "sum", "cat")
TARGET_SECONDS = 600.0
TARGET_DECIDED = 0.90
TARGET_MEDIAN_R = 0.05


def corpus() -> Path:
    repo = Path(os.environ.get("PERFQ_CORPUS", Path.home() / ".cache/perfq-corpus")) / "pytorch-2.6.0"
    if not (repo / "benchmarks/operator_benchmark/pt").is_dir():
        sys.exit(f"error: no operator_benchmark under {repo} (set PERFQ_CORPUS)")
    return repo


def perfq(*args: str) -> subprocess.CompletedProcess:
    """The perfq CLI as CI runs it (CI=true: plain progress lines on stderr)."""
    cmd = [sys.executable, "-m", "perfq", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env={**os.environ, "CI": "true"})
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} exited {proc.returncode}\n{proc.stderr[-3000:]}")
    return proc


def one_aa(label: str, repo: Path, history: Path, benches: tuple[str, ...], extra: list[str]) -> tuple[float, dict]:
    """(seconds, comparison document) of one A/A run at defaults (+ ``extra``)."""
    args = ["run", "--label", label, "--ab", "--base-python", sys.executable, "--head-python", sys.executable,
            "--repo", str(repo), "--history", str(history)]
    for b in benches:
        args += ["--bench", b]
    start = time.monotonic()
    perfq(*args, *extra)
    seconds = time.monotonic() - start
    doc = json.loads(perfq("compare", label, "--format", "json", "--repo", str(repo), "--history",
                           str(history)).stdout)
    return seconds, doc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="A/A runs (fresh labels), default 1")
    parser.add_argument("--bench", action="append", help="benchmark files (default: the five of BENCHES)")
    parser.add_argument("extra", nargs="*", help="extra perfq run flags after --")
    args = parser.parse_args()
    repo = corpus()
    benches = tuple(args.bench or BENCHES)
    print(f"A/A of {len(benches)} files ({', '.join(benches)}), {os.cpu_count()} cpus, "
          f"load average {os.getloadavg()[0]:.1f}, extra flags: {' '.join(args.extra) or '(none: defaults)'}")
    times, tests, false, same, resolutions = [], 0, 0, 0, []
    with tempfile.TemporaryDirectory(prefix="perfq-defaults-") as tmp:
        for i in range(args.rounds):
            seconds, doc = one_aa(f"aa{i}", repo, Path(tmp) / "history.duckdb", benches, args.extra)
            s = doc["summary"]
            n = sum(s.values())
            failed = len(doc["base"]["failures"]) + len(doc["head"]["failures"])
            samples = [t["n_base"] for t in doc["tests"]]
            r_same = [t["resolution"] for t in doc["tests"] if t["verdict"] == "same"]
            print(f"round {i + 1}: {seconds:.0f} s, {n} tests: {s['regression']} regression, "
                  f"{s['improvement']} improvement, {s['same']} same, {s['unknown']} unknown, "
                  f"{failed} failed invocations; samples a side {min(samples, default=0)}-{max(samples, default=0)}"
                  f", median {statistics.median(samples) if samples else 0}")
            for t in doc["tests"]:
                if t["verdict"] != "same":
                    print(f"  {t['verdict']}: {t['benchmark']}/{t['test']} change {t['change']} ci {t['ci']} "
                          f"resolution {t['resolution']} n {t['n_base']}/{t['n_head']}")
            times.append(seconds)
            tests += n
            false += s["regression"] + s["improvement"]
            same += s["same"]
            resolutions += r_same
    worst = max(times)
    decided = same / tests if tests else 0.0
    median_r = statistics.median(resolutions) if resolutions else float("nan")
    print(f"time: {worst:.0f} s (slowest round) / target <= {TARGET_SECONDS:.0f} s")
    print(f"false regressions or improvements: {false}/{tests} / target 0")
    print(f"decided 'same' (no change beyond ±R): {same}/{tests} = {decided:.0%} / target >= {TARGET_DECIDED:.0%}")
    print(f"median R of those: {median_r:.2%} / target <= {TARGET_MEDIAN_R:.0%}"
          f" (max {max(resolutions, default=float('nan')):.2%})")
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    ok = (worst <= TARGET_SECONDS and false == 0 and decided >= TARGET_DECIDED and median_r <= TARGET_MEDIAN_R
          and tests > 0)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
