"""``perfq backtest A..B``: replay affected on every commit of a range (first-parent)."""

from __future__ import annotations

import time
from pathlib import Path

from common import git
from common.config import load_config
from common.errors import PerfqError
from common.paths import default_index_path
from query.document import names
from query.service import affected_for_ref
from schema.index_store import IndexStore
from schema.reader import open_index


def backtest(repo: Path, rev_range: str, db: Path | None = None) -> dict:
    """Per commit: benchmarks selected, share of the suite, canary escalations, unmapped, time."""
    repo = git.require_repo(repo)
    if ".." not in rev_range:
        raise PerfqError("backtest takes a range A..B")
    commits = git.first_parent_commits(repo, rev_range)
    if not commits:
        raise PerfqError(f"{rev_range} has no commits")
    db = db or default_index_path(repo)
    with open_index(db) as con:
        suite = len(IndexStore(con).benchmarks())
    cfg = load_config(repo)
    rows = []
    for commit in commits:
        started = time.perf_counter()
        doc = affected_for_ref(repo, f"{commit}^..{commit}", db, cfg=cfg)
        selected = names(doc)
        rows.append(
            {
                "commit": commit,
                "subject": git.commit_info(repo, commit)["subject"],
                "selected": len(selected),
                "share": len(selected) / suite if suite else 0.0,
                "benchmarks": selected,
                "canary": [c.set for c in doc.canary],
                "unmapped": len(doc.unmapped_changes),
                "seconds": time.perf_counter() - started,
            }
        )
    n = len(rows)
    return {
        "range": rev_range,
        "commits": rows,
        "summary": {
            "commits": n,
            "suite": suite,
            "mean_selected": sum(r["selected"] for r in rows) / n,
            "mean_share": sum(r["share"] for r in rows) / n,
            "canary_escalations": sum(1 for r in rows if r["canary"]),
            "unmapped": sum(r["unmapped"] for r in rows),
            "mean_seconds": sum(r["seconds"] for r in rows) / n,
        },
    }
