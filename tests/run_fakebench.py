"""A fake operator_benchmark tree for the `perfq run` tests (written into a temp dir).

``pt/fake_test.py`` prints PyTorch 2.6.0's text format and honours the runner flags
perfq passes. Its behaviour is driven by environment variables so the two sides of an
A/B run can differ: FAKE_SLOW (factor on every time), FAKE_NOISE (relative gaussian noise),
FAKE_NOISY_TESTS (comma list: only these get noise), FAKE_FAIL ("1": every file fails,
or the name of the one module that fails), FAKE_BAD_BYTES ("1": invalid UTF-8 bytes on stdout and stderr),
FAKE_NAN ("1": every time printed as nan), FAKE_SCHED_FILE (a file each invocation appends its
scheduling policy to: os.SCHED_FIFO under --priority realtime), FAKE_MALLOC_FILE (a file each invocation appends its
MALLOC_MMAP_THRESHOLD_ to), FAKE_FACTORS + FAKE_COUNTER (comma list of per-process speed factors, and a file counting
this side's processes: process k multiplies every time it prints by factor k, as a contended machine speeds a
whole process up or down), FAKE_SLOW_TESTS (comma list: only these get FAKE_SLOW).
A fake ``benchmark_core``/``benchmark_runner`` lets perfq run several files in one process (batch).
"""

from __future__ import annotations

from pathlib import Path

FAKE_MODULE = r"""
import argparse, json, os, random, sys

MODULE = __name__.rsplit(".", 1)[-1]
TESTS = [  # (operator, test name, tag, backward, base time in us)
    ("add", "add_M8_cpu", "short", False, 10.0),
    ("add", "add_M64_cpu", "short", False, 40.0),
    ("add", "add_M512_cpu", "long", False, 900.0),
    ("add", "add_M8_cpu_bwdall", "short", True, 25.0),
    ("mul", "mul_M8_cpu", "short", False, 12.0),
]


def process_factor():  # this process's speed factor (FAKE_FACTORS, FAKE_COUNTER), kept for every file it runs
    if "FAKE_FACTOR_NOW" not in os.environ:
        factors = [float(f) for f in os.environ.get("FAKE_FACTORS", "1").split(",")]
        counter = os.environ.get("FAKE_COUNTER")
        count = int(open(counter).read()) if counter and os.path.exists(counter) else 0
        if counter:
            open(counter, "w").write(str(count + 1))
        os.environ["FAKE_FACTOR_NOW"] = str(factors[count % len(factors)])
    return float(os.environ["FAKE_FACTOR_NOW"])


def run(args):
    if os.environ.get("FAKE_SCHED_FILE"):
        with open(os.environ["FAKE_SCHED_FILE"], "a") as f:
            f.write(f"{os.sched_getscheduler(0)}\n")
    if os.environ.get("FAKE_MALLOC_FILE"):
        with open(os.environ["FAKE_MALLOC_FILE"], "a") as f:
            f.write(os.environ.get("MALLOC_MMAP_THRESHOLD_", "-") + "\n")
    if os.environ.get("FAKE_FAIL") in ("1", MODULE):
        raise RuntimeError("fake kernel exploded")
    if os.environ.get("FAKE_BAD_BYTES") == "1":
        sys.stdout.flush()
        sys.stdout.buffer.write(b"# warmup \xff\xfe\x80 done\n")
        sys.stdout.buffer.flush()
        sys.stderr.buffer.write(b"warning: \xff bad byte\n")
    slow = float("nan") if os.environ.get("FAKE_NAN") == "1" else float(os.environ.get("FAKE_SLOW", "1"))
    slow_tests = set(filter(None, os.environ.get("FAKE_SLOW_TESTS", "").split(",")))
    factor = process_factor()
    noise = float(os.environ.get("FAKE_NOISE", "0"))
    noisy = set(filter(None, os.environ.get("FAKE_NOISY_TESTS", "").split(",")))
    rng = random.Random()
    ops = args.operators.split(",") if args.operators else None
    tag = None if args.test_name else args.tag_filter
    print(f"# Tag : {tag}")
    records = []
    for op, name, ttag, bwd, base in TESTS:
        if args.test_name and name != args.test_name:
            continue
        if ops and op not in ops:
            continue
        if tag not in (None, "all") and ttag != tag:
            continue
        value = base * (slow if not slow_tests or name in slow_tests else 1.0) * factor
        if noise and (not noisy or name in noisy):
            value *= max(0.05, 1 + rng.gauss(0, noise))
        runtime = "Compile" if getattr(args, "use_compile", False) else "Eager"
        kind = "Backward" if bwd else "Forward"
        print(f"# Benchmarking PyTorch: {op}")
        print(f"# Mode: {runtime}")
        print(f"# Name: {name}")
        print(f"# Input: M: {name.split('_')[1][1:]}, device: cpu")
        if args.num_runs > 1:
            for r in range(args.num_runs):
                print(f"Run: {r}, {kind} Execution Time (us) : {value:.3f}")
        else:
            print(f"{kind} Execution Time (us) : {value:.3f}")
        print()
        records.append({"test_name": name, "input_config": "M: 8, device: cpu", "runtime": runtime,
                        "run": kind, "latency": round(value, 3), "latency unit": "us", "device": "cpu"})
    if getattr(args, "output_json", None):
        with open(args.output_json, "w") as fh:
            json.dump(records, fh)


if __name__ == "__main__":
    import benchmark_runner
    try:
        run(benchmark_runner.parse_args())
    except RuntimeError as exc:
        print("Traceback (most recent call last):", file=sys.stderr)
        print(f"RuntimeError: {exc}", file=sys.stderr)
        sys.exit(1)
else:
    import benchmark_core
    benchmark_core.BENCHMARK_TESTER.append(run)
"""

# benchmark_core / benchmark_runner with the shape perfq relies on in batch mode
FAKE_CORE = """
BENCHMARK_TESTER = []


class BenchmarkRunner:
    def __init__(self, args):
        self.args = args

    def run(self):
        for fn in BENCHMARK_TESTER:
            fn(self.args)
"""

RUNNER_HEAD = """
import argparse

parser = argparse.ArgumentParser()


def parse_args():
    parser.add_argument("--tag-filter", "--tag_filter", default="short")
    parser.add_argument("--test-name", "--test_name")
    parser.add_argument("--operators")
    parser.add_argument("--device", default="None")
    parser.add_argument("--iterations", type=int)
    parser.add_argument("--num-runs", "--num_runs", type=int, default=1)
    parser.add_argument("--warmup-iterations", "--warmup_iterations", type=int)
    parser.add_argument("--omp-num-threads", type=int)
    parser.add_argument("--mkl-num-threads", type=int)
"""

NEW_RUNNER = (
    RUNNER_HEAD
    + """
    parser.add_argument("--use-compile", "--use_compile", action="store_true")
    parser.add_argument("--output-json", "--output_json")
    parser.add_argument("--output-csv", "--output_csv")
    return parser.parse_known_args()[0]
"""
)

OLD_RUNNER = (
    RUNNER_HEAD
    + """
    return parser.parse_known_args()[0]
"""
)

ALL_TESTS_SHORT = {"add_M8_cpu", "add_M64_cpu", "add_M8_cpu_bwdall", "mul_M8_cpu"}


def make_bench_root(tmp: Path, new_runner: bool = False, names: tuple[str, ...] = ("fake_test",)) -> Path:
    """Write a benchmark root with ``pt/<name>.py`` fake modules; returns the root."""
    root = tmp / "operator_benchmark"
    (root / "pt").mkdir(parents=True, exist_ok=True)
    (root / "pt" / "__init__.py").write_text("")
    for name in names:
        (root / "pt" / f"{name}.py").write_text(FAKE_MODULE)
    (root / "benchmark_runner.py").write_text(NEW_RUNNER if new_runner else OLD_RUNNER)
    (root / "benchmark_core.py").write_text(FAKE_CORE)
    return root
