"""Do `perfq run --ab` defaults decide? An A/A of 5 operator_benchmark files at default settings.

Runs ``perfq run --ab`` with the same interpreter on both sides (an A/A: every regression or
improvement it reports is a false one) over five PyTorch 2.6.0 operator_benchmark files
(softmax, add, layernorm, sum, cat: issue 30's set), with no runner or sampling settings on the
command line (only the sides, the files and where to store results), then
``perfq compare --format json``. Prints each figure against its target (issue 30):
0 regressions or improvements, >= 90% of the tests decided "same" (no change beyond ±R) with
median R <= 5%, in <= 600 s; and the load average before and after (the machine is shared).

Usage: python bench/run_defaults.py [--rounds N] [--bench NAME ...] [--contended] [--history PATH]
                                   [-- EXTRA perfq run FLAGS]
``--history PATH``: keep the runs there (labels aa0, aa1 ...; default a temporary file), e.g. for
bench/pairing.py.
``--contended``: the contended variant (issue 38): every run under bench/loadgen.py's load (4 CPU
spinners and a memory-bandwidth hog at normal priority), with its own targets: 0 false, no
``same`` wider than the minimum effect, >= 75% ``same``. ``uptime`` and /proc/pressure are printed
before and after.
Needs torch and the corpus at $PERFQ_CORPUS/pytorch-2.6.0 (default ~/.cache/perfq-corpus).
``--rounds N`` repeats the whole A/A N times (fresh labels).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import loadgen  # next to this file

BENCHES = ("softmax", "add", "layernorm", "sum", "cat")
TARGET_SECONDS = 600.0
TARGET_DECIDED = 0.90
TARGET_MEDIAN_R = 0.05
TARGET_DECIDED_CONTENDED = 0.75
MIN_EFFECT = 0.05  # perfq's default: no `same` may be wider


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
    parser.add_argument("--contended", action="store_true", help="run under bench/loadgen.py's load")
    parser.add_argument("--history", type=Path, help="keep the runs in this history (default: a temporary one)")
    parser.add_argument("extra", nargs="*", help="extra perfq run flags after --")
    args = parser.parse_args()
    repo = corpus()
    benches = tuple(args.bench or BENCHES)
    print(f"A/A of {len(benches)} files ({', '.join(benches)}), {os.cpu_count()} cpus, "
          f"extra flags: {' '.join(args.extra) or '(none: defaults)'}")
    print(f"before: {loadgen.machine_state()}")
    if args.contended:
        print(loadgen.describe())
    load = loadgen.busy(2 * TARGET_SECONDS * args.rounds) if args.contended else contextlib.nullcontext()
    times, tests, false, same, resolutions = [], 0, 0, 0, []
    wide = 0
    with load, tempfile.TemporaryDirectory(prefix="perfq-defaults-") as tmp:
        for i in range(args.rounds):
            seconds, doc = one_aa(f"aa{i}", repo, args.history or Path(tmp) / "history.duckdb", benches, args.extra)
            s = doc["summary"]
            n = sum(s.values())
            failed = len(doc["base"]["failures"]) + len(doc["head"]["failures"])
            samples = [t["n_base"] for t in doc["tests"]]
            r_same = [t["resolution"] for t in doc["tests"] if t["verdict"] == "same"]
            wide += sum(r > MIN_EFFECT for r in r_same)
            print(f"  notes: {doc['base'].get('contended', '')} (base), {doc['head'].get('contended', '')} (head)")
            print(f"round {i + 1}: {seconds:.0f} s, {n} tests: {s['regression']} regression, "
                  f"{s['improvement']} improvement, {s['same']} same, {s['unknown']} undecided, "
                  f"{failed} failed invocations; samples a side {min(samples, default=0)}-{max(samples, default=0)}"
                  f", median {statistics.median(samples) if samples else 0}")
            for t in doc["tests"]:
                if t["verdict"] != "same":
                    print(f"  {t['verdict']}: {t['benchmark']}/{t['test']} change {t['change']} ci {t['ci']} "
                          f"resolution {t['resolution']} n {t['n_base']}/{t['n_head']} ({t.get('reason', '')})")
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
    target_decided = TARGET_DECIDED_CONTENDED if args.contended else TARGET_DECIDED
    print(f"decided 'same' (no change beyond ±R): {same}/{tests} = {decided:.0%} / target >= {target_decided:.0%}")
    print(f"median R of those: {median_r:.2%} / target <= {TARGET_MEDIAN_R:.0%}"
          f" (max {max(resolutions, default=float('nan')):.2%})")
    print(f"'same' wider than the minimum effect ({MIN_EFFECT:.0%}): {wide} / target 0")
    print(f"after: {loadgen.machine_state()}")
    target = TARGET_DECIDED_CONTENDED if args.contended else TARGET_DECIDED
    ok = (worst <= TARGET_SECONDS and false == 0 and decided >= target and median_r <= TARGET_MEDIAN_R
          and tests > 0 and wide == 0)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
