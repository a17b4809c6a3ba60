#!/usr/bin/env python3
"""Native sampling (`perfq index --native`) on an index of the PyTorch 2.6.0 corpus: sample the
tests `perfq index --native` picks for some benchmark files under perf and print the cost and
the frame-to-function match rate.

    python bench/native_pytorch.py --repo CLONE [--files softmax_test,unary_test,...] [--per-file 2]

CLONE: a clone of the corpus indexed with traces (`perfq index --trace` in it); its index is only
read. The installed torch (its libtorch_cpu.so is what perf sees) is not the indexed source:
frames of code that moved or was renamed between the two do not map, which the rate includes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common.paths import default_index_path  # noqa: E402
from indexer.native import NativeOptions, choose_tests, perf_problem, sample_native  # noqa: E402
from schema.reader import open_index  # noqa: E402

DEFAULT_FILES = "softmax_test,unary_test,binary_test,layernorm_test"


def _rows(repo: Path, files: set[str]) -> dict[str, list[tuple]]:
    with open_index(default_index_path(repo)) as con:
        return {
            "functions": con.execute("SELECT id, file_id, qualname FROM functions").fetchall(),
            "benchmarks": [r for r in con.execute("SELECT * FROM benchmarks").fetchall() if not files or r[0] in files],
            "bench_tests": con.execute("SELECT * FROM bench_tests").fetchall(),
        }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", type=Path, required=True)
    ap.add_argument("--files", default=DEFAULT_FILES, help="benchmark names, comma separated ('' = all)")
    ap.add_argument("--per-file", type=int, default=NativeOptions.per_file)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    problem = perf_problem()
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 4
    rows = _rows(args.repo, {f for f in args.files.split(",") if f})
    tests = choose_tests(args.repo, rows["benchmarks"], rows["bench_tests"], args.per_file)
    print(f"{len(rows['benchmarks'])} benchmark files, {len(tests)} tests to sample")
    t0 = time.perf_counter()
    report = sample_native(args.repo, rows, NativeOptions(per_file=args.per_file),
                           on_test=lambda t, err: print(f"  {t.bench}/{t.test}: {err or 'sampled'}", flush=True))
    seconds = time.perf_counter() - t0
    r = report.rate
    print(f"sampled {report.sampled} tests ({len(report.failed)} failed) in {seconds:.1f} s"
          f" ({seconds / max(1, len(tests)):.1f} s per test); {len(report.rows)} native_samples rows")
    print(f"match rate: frames of libtorch_cpu.so {r.frames_mapped}/{r.frames}"
          f" ({100 * r.frames_mapped / max(1, r.frames):.1f}%), samples {r.samples_mapped}/{r.samples}"
          f" ({100 * r.samples_mapped / max(1, r.samples):.1f}%)")
    if args.json:
        args.json.write_text(json.dumps({**report.to_json(), "tests": len(tests), "wall_s": round(seconds, 1)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
