"""What other features may call in perfq.ir (the import contracts allow this module only)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from common.config import load_config
from common.errors import PerfqError
from perfq.ir.collect import check_targets, collect, require_triton
from perfq.ir.diff import changed_kernels
from perfq.ir.manifest import load_manifest
from perfq.ir.normalize import normalize_ir
from perfq.ir.store import labels
from query.document import AffectedDoc, flag_ir_changes
from schema.engine import duckdb
from schema.history import connect_history

__all__ = ["changed_kernels", "flag_affected", "kernel_fingerprint", "stored_labels"]


def stored_labels(con: Any) -> set[str]:
    """The labels of the IR collections stored in the history ``con`` (none in a history made
    before the IR tables)."""
    try:
        return {row.label for row in labels(con)}
    except duckdb.Error:
        return set()


def flag_affected(doc: AffectedDoc, root: Path, history: Path, span: str) -> AffectedDoc:
    """`perfq affected --ir A..B`: ``doc`` with the benchmarks whose Triton IR changed between the
    collections labelled A and B in ``history`` flagged (kernels mapped by ``[tool.perfq.ir.benchmarks]``).
    A bad span, a missing history or label is a PerfqError (one line)."""
    label_a, sep, label_b = span.partition("..")
    if not sep or not label_a or not label_b:
        raise PerfqError("--ir takes two collection labels: A..B")
    if not history.exists():
        raise PerfqError(f"--ir: no results history at {history}; store IR with `perfq ir collect` first")
    con = connect_history(history, read_only=True)
    try:
        known = stored_labels(con)
        missing = [label for label in (label_a, label_b) if label not in known]
        if missing:
            shown = ", ".join(sorted(known)[:10]) or "none"
            raise PerfqError(f"--ir: no IR collection labelled {missing[0]!r} in {history} (labels: {shown})")
        kernels = changed_kernels(con, label_a, label_b)
    finally:
        con.close()
    return flag_ir_changes(doc, kernels, load_config(root).extra.get("ir", {}).get("benchmarks", {}))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def kernel_fingerprint(repo: Path, kernel: str, targets: tuple[str, ...] = ()) -> str:
    """A hash of the normalized IR of the manifest kernels matching ``kernel`` as ``repo`` has them now.

    Compiles in this process with a fresh Triton cache and freshly imported kernel modules;
    PerfqError (one line) when nothing could be compiled.
    """
    require_triton()
    spec = load_manifest(repo)
    spec = replace(spec, kernels=tuple(k for k in spec.kernels if kernel in k.kernel))
    if not spec.kernels:
        raise PerfqError(f"no manifest kernel matches {kernel}")
    result = collect(spec, check_targets(targets or spec.targets), spec.stages, repo, fresh_cache=True, reload=True)
    if not result.records:
        raise PerfqError("; ".join(result.errors) or "no IR compiled")
    keyed = sorted((r.kernel, r.specialization, r.target, r.stage, _sha(normalize_ir(r.raw, r.stage)))
                   for r in result.records)
    return hashlib.sha256(json.dumps(keyed).encode()).hexdigest()
