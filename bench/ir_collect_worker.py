"""`perfq ir collect` for bench/ir_two_compilers.py, runnable in a second environment that has
triton and perfq's runner dependencies (duckdb, pyyaml) but not every CLI dependency.

Same steps as the CLI command: load the manifest, compile, store under the label; prints
the same JSON document as ``perfq ir collect --format json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from common.errors import PerfqError
from perfq.ir.collect import check_targets, collect, git_commit
from perfq.ir.manifest import load_manifest
from perfq.ir.store import store_collection


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True)
    parser.add_argument("--manifest", type=Path, required=True)
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--history", type=Path, required=True)
    parser.add_argument("--target", action="append", default=[])
    args = parser.parse_args()
    try:
        manifest = load_manifest(args.repo, args.manifest)
        targets = check_targets(tuple(args.target) or manifest.targets)
        result = collect(manifest, targets, manifest.stages, args.repo)
        cid = store_collection(args.history, args.label, "manifest", result.records, git_commit(args.repo),
                               {"targets": targets, "stages": manifest.stages, "errors": result.errors})
    except PerfqError as exc:
        sys.exit(f"error: {exc}")
    json.dump({"label": args.label, "triton_version": result.triton_version, "stored": len(result.records),
               "compiles": result.compiles, "seconds": round(result.seconds, 2), "errors": result.errors,
               "collection_id": cid}, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
