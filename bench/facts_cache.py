"""Facts cache speed: load and save of the JSON-lines facts cache of an indexed tree, against the
pickle it replaced (the anchor: the same entries pickled and unpickled in memory, as the old cache
did, cyclic GC on). Prints best-of-N seconds and the ratio (JSON / pickle; <= 1.0 is the target:
warm builds must not get slower).

    python bench/facts_cache.py [--db PATH/index.duckdb] [--runs 5]

Default: the index of $PERFQ_CORPUS/pytorch-2.6.0 (build it first with `perfq index`).
"""

from __future__ import annotations

import argparse
import gc
import os
import pickle
import tempfile
import time
from pathlib import Path

from common.paths import default_index_path
from indexer.build_info import extractor_version
from indexer.facts_cache import load_cache, save_cache


def _best(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        gc.collect()
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    corpus = Path(os.environ.get("PERFQ_CORPUS", Path.home() / ".cache/perfq-corpus")) / "pytorch-2.6.0"
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, default=None)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    db = args.db or default_index_path(corpus)
    cache = db.with_name(db.name + ".facts")
    version = extractor_version()
    entries = load_cache(cache, version)
    if not entries:
        raise SystemExit(f"no facts cache of this perfq at {cache}: run `perfq index` there first")
    blob = pickle.dumps({"version": version, "files": entries}, protocol=pickle.HIGHEST_PROTOCOL)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "facts"
        figures = {
            "load": (_best(lambda: load_cache(cache, version), args.runs),
                     _best(lambda: pickle.loads(blob), args.runs)),
            "save": (_best(lambda: save_cache(out, version, entries), args.runs),
                     _best(lambda: pickle.dumps({"version": version, "files": entries}, protocol=5), args.runs)),
        }
    print(f"facts cache {cache}: {len(entries)} entries, {cache.stat().st_size / 2**20:.1f} MiB")
    print(f"{'':6} {'json s':>8} {'pickle s':>9} {'ratio':>6}")
    for name, (json_s, pickle_s) in figures.items():
        print(f"{name:6} {json_s:8.2f} {pickle_s:9.2f} {json_s / pickle_s:6.2f}")


if __name__ == "__main__":
    main()
