"""A fake operator_benchmark tree for the `perfq run` tests (written into a temp dir).

``pt/fake_test.py`` prints PyTorch 2.6.0's text format and honours the runner flags
perfq passes. Its behaviour is driven by environment variables so the two sides of an
A/B run can differ: FAKE_SLOW (factor on every time), FAKE_NOISE (relative gaussian noise),
FAKE_NOISY_TESTS (comma list: only these get noise), FAKE_FAIL (exit 1 with a stderr message).
"""

from __future__ import annotations

from pathlib import Path

FAKE_MODULE = r"""
import argparse, json, os, random, sys

TESTS = [  # (operator, test name, tag, backward, base time in us)
    ("add", "add_M8_cpu", "short", False, 10.0),
    ("add", "add_M64_cpu", "short", False, 40.0),
    ("add", "add_M512_cpu", "long", False, 900.0),
    ("add", "add_M8_cpu_bwdall", "short", True, 25.0),
    ("mul", "mul_M8_cpu", "short", False, 12.0),
]
p = argparse.ArgumentParser()
p.add_argument("--tag-filter", default="short")
p.add_argument("--test-name")
p.add_argument("--operators")
p.add_argument("--device", default="None")
p.add_argument("--iterations", type=int)
p.add_argument("--num-runs", type=int, default=1)
p.add_argument("--warmup-iterations", type=int)
p.add_argument("--omp-num-threads", type=int)
p.add_argument("--mkl-num-threads", type=int)
p.add_argument("--use-compile", action="store_true")
p.add_argument("--output-json")
args, _ = p.parse_known_args()
if os.environ.get("FAKE_FAIL"):
    print("Traceback (most recent call last):", file=sys.stderr)
    print("RuntimeError: fake kernel exploded", file=sys.stderr)
    sys.exit(1)
slow = float(os.environ.get("FAKE_SLOW", "1"))
noise = float(os.environ.get("FAKE_NOISE", "0"))
noisy = set(filter(None, os.environ.get("FAKE_NOISY_TESTS", "").split(",")))
rng = random.Random()
ops = args.operators.split(",") if args.operators else None
tag = None if args.test_name else args.tag_filter
print("# ----------------------------------------")
print("# PyTorch/Caffe2 Operator Micro-benchmarks")
print("# ----------------------------------------")
print(f"# Tag : {tag}")
print()
records = []
for op, name, ttag, bwd, base in TESTS:
    if args.test_name and name != args.test_name:
        continue
    if ops and op not in ops:
        continue
    if tag not in (None, "all") and ttag != tag:
        continue
    value = base * slow
    if noise and (not noisy or name in noisy):
        value *= max(0.05, 1 + rng.gauss(0, noise))
    runtime = "Compile" if args.use_compile else "Eager"
    kind = "Backward" if bwd else "Forward"
    print(f"# Benchmarking PyTorch: {op}")
    print(f"# Mode: {runtime}")
    print(f"# Name: {name}")
    print(f"# Input: M: {name.split('_')[1][1:]}, device: cpu")
    if args.num_runs > 1:
        for r in range(args.num_runs):
            print(f"Run: {r}, {kind} Execution Time (us) : {value:.3f}")
        print()
    else:
        print(f"{kind} Execution Time (us) : {value:.3f}")
        print()
    records.append({"test_name": name, "input_config": "M: 8, device: cpu", "runtime": runtime,
                    "run": kind, "latency": round(value, 3), "latency unit": "us", "device": "cpu"})
if args.output_json:
    with open(args.output_json, "w") as fh:
        json.dump(records, fh)
"""

NEW_RUNNER = """
parser.add_argument("--use-compile", "--use_compile")
parser.add_argument("--output-json", "--output_json")
parser.add_argument("--output-csv", "--output_csv")
"""

OLD_RUNNER = """
parser.add_argument("--tag-filter", "--tag_filter")
parser.add_argument("--warmup-iterations", "--warmup_iterations")
"""

ALL_TESTS_SHORT = {"add_M8_cpu", "add_M64_cpu", "add_M8_cpu_bwdall", "mul_M8_cpu"}


def make_bench_root(tmp: Path, new_runner: bool = False, names: tuple[str, ...] = ("fake_test",)) -> Path:
    """Write a benchmark root with ``pt/<name>.py`` fake modules; returns the root."""
    root = tmp / "operator_benchmark"
    (root / "pt").mkdir(parents=True, exist_ok=True)
    (root / "pt" / "__init__.py").write_text("")
    for name in names:
        (root / "pt" / f"{name}.py").write_text(FAKE_MODULE)
    (root / "benchmark_runner.py").write_text(NEW_RUNNER if new_runner else OLD_RUNNER)
    return root
