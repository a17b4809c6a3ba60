"""Real check for `perfq ir`: two real Triton compilers on the bench/ir_kernels.py micro-kernels.

Collects every kernel of bench/perfq-ir.yaml for two targets with each interpreter (one
subprocess of bench/ir_collect_worker.py, i.e. `perfq ir collect`, per environment, each from
its own copy of the kernels, as two worktrees of two refs would be), then diffs the two
collections and prints: which kernels' IR changed after normalization, what the raw
(unnormalized) comparison would say, and how long each collection took.

Setup (once)::

    pip install triton==3.9.0                       # main environment
    python -m venv /tmp/triton38
    /tmp/triton38/bin/pip install triton==3.8.0 duckdb pyyaml typer rich
    /tmp/triton38/bin/pip install -e . --no-deps    # perfq importable there

Run::

    python bench/ir_two_compilers.py [--old /tmp/triton38/bin/python] [--new python]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run_collect(python: str, label: str, checkout: Path, history: Path, targets: list[str]) -> dict:
    cmd = [python, str(HERE / "ir_collect_worker.py"), "--label", label, "--manifest",
           str(checkout / "perfq-ir.yaml"), "--repo", str(checkout), "--history", str(history)]
    for t in targets:
        cmd += ["--target", t]
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=checkout)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        sys.exit(f"collect with {python} failed ({out.returncode}):\n{out.stderr}")
    doc = json.loads(out.stdout)
    doc["wall_seconds"] = round(wall, 2)
    return doc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default="/tmp/triton38/bin/python", help="interpreter with the old Triton")
    parser.add_argument("--new", default=sys.executable, help="interpreter with the new Triton")
    parser.add_argument("--target", action="append", default=None, help="default: cuda:90 and hip:gfx942")
    parser.add_argument("--json", type=Path, help="also write the diff JSON here")
    parser.add_argument("--same-checkout", action="store_true",
                        help="both environments compile the same copy of the kernels (same paths)")
    args = parser.parse_args()
    targets = args.target or ["cuda:90", "hip:gfx942"]

    with tempfile.TemporaryDirectory(prefix="perfq-ir-bench-") as tmp:
        root = Path(tmp)
        history = root / "history.duckdb"
        docs = {}
        for side, python in (("old", args.old), ("new", args.new)):
            checkout = root / ("worktree" if args.same_checkout else f"worktree-{side}") / "bench"
            checkout.mkdir(parents=True, exist_ok=True)
            for name in ("ir_kernels.py", "perfq-ir.yaml"):
                shutil.copy(HERE / name, checkout / name)
            version = subprocess.run([python, "-c", "import triton; print(triton.__version__)"],
                                     capture_output=True, text=True).stdout.strip()
            if not version:
                sys.exit(f"{python}: triton is not importable")
            label = f"triton-{version}"
            docs[side] = (label, run_collect(python, label, checkout, history, targets))
        a, b = docs["old"][0], docs["new"][0]
        diff = subprocess.run([sys.executable, "-m", "perfq", "ir", "diff", a, b, "--history", str(history),
                               "--format", "json"], capture_output=True, text=True)
        if diff.returncode != 0:
            sys.exit(diff.stderr)
        result = json.loads(diff.stdout)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))

    print(f"## perfq ir: {a} vs {b}, {len(targets)} targets\n")
    for label, doc in (docs["old"], docs["new"]):
        print(f"- collect {label}: {doc['stored']} IRs from {doc['compiles']} compiles, "
              f"{doc['seconds']:.1f} s compiling, {doc['wall_seconds']:.1f} s wall (incl. start-up), "
              f"{len(doc['errors'])} errors")
    per_kernel: dict[str, dict[str, str]] = defaultdict(dict)
    raw_diff_kernels, raw_same = set(), 0
    for k in result["kernels"]:
        per_kernel[k["kernel"]][f"{k['target']} {k['stage']}"] = k["status"]
        if k.get("raw_identical"):
            raw_same += 1
        else:
            raw_diff_kernels.add(k["kernel"])
    cols = [f"{t} {s}" for t in targets for s in ("ttir", "ttgir", "llir")]
    short = {"identical": "=", "attributes-only": "attr", "structural": "STRUCT", "added": "+",
             "removed": "-"}
    print("\n| kernel | " + " | ".join(cols) + " | changed (normalized) | differs raw |")
    print("|---|" + "---|" * (len(cols) + 2))
    changed = []
    for kernel in sorted(per_kernel):
        cells = [short.get(per_kernel[kernel].get(c, ""), "?") for c in cols]
        is_changed = any(s != "identical" for s in per_kernel[kernel].values())
        changed += [kernel] if is_changed else []
        print(f"| {kernel} | " + " | ".join(cells) + f" | {'yes' if is_changed else 'no'} | "
              f"{'yes' if kernel in raw_diff_kernels else 'no'} |")
    summary = result["summary"]
    n = len(result["kernels"])
    print(f"\nnormalized: {n} IRs: " + ", ".join(f"{v} {k}" for k, v in summary.items() if v))
    for stage in ("ttir", "ttgir", "llir"):
        rows = [k for k in result["kernels"] if k["stage"] == stage]
        counts = defaultdict(int)
        for k in rows:
            counts[k["status"]] += 1
        print(f"  {stage}: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
              + f"; raw: {sum(not k.get('raw_identical') for k in rows)} of {len(rows)} differ")
    print(f"raw: {n - raw_same} of {n} IRs differ, "
          f"{len(raw_diff_kernels)} of {len(per_kernel)} kernels differ")
    print(f"kernels whose IR changed after normalization: {len(changed)} of {len(per_kernel)}: "
          + ", ".join(k.split(':')[1] for k in changed))
    unchanged = sorted(set(per_kernel) - set(changed))
    print("kernels identical after normalization: "
          + (", ".join(k.split(':')[1] for k in unchanged) or "none"))
    worst = max(docs["old"][1]["wall_seconds"], docs["new"][1]["wall_seconds"])
    print(f"collection time ({len(per_kernel)} kernels x {len(targets)} targets): max {worst:.1f} s wall "
          f"per environment (target <= 30 s: {'met' if worst <= 30 else 'NOT met'})")


if __name__ == "__main__":
    main()
