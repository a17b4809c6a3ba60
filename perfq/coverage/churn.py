"""Churn for `perfq coverage`: git history of a period -> commits per operator.

Reads the period's line changes with :mod:`perfq.coverage.history`, maps them onto the
index's function extents (current extents: an approximation for older commits) and walks
the reachability graph from the touched functions up to operators.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from common.paths import git_common_dir
from perfq.coverage.history import changed_lines
from perfq.coverage.report import HistoryNote, churn_by_op, functions_touched, ops_reached
from schema.engine import duckdb
from schema.index_store import IndexStore


def op_churn(
    repo: Path,
    con: duckdb.DuckDBPyConnection,
    since: str,
    ref: str = "HEAD",
    max_depth: int | None = 24,
    reach_bound: int | None = 200,
) -> tuple[dict[str, set[str]] | None, HistoryNote]:
    """(op -> commits that changed a function reaching it, or None without history; a note for the summary).

    The note says how many commits the period holds, how many changed indexed code, how many
    changed shared infrastructure (functions reaching more than ``reach_bound`` ops, which
    count for no op), and why churn is unavailable (not a git repository, one-commit tree,
    empty period). The walk goes at most ``max_depth`` edges up from a changed function.
    """
    if git_common_dir(repo) is None:
        return None, HistoryNote(since, note=f"{repo} is not a git repository: no history, ranked by kernel size")
    store = IndexStore(con)
    known = store.indexed_paths()
    # only the top-level folders holding indexed files: keeps docs, tests and third_party out of the log
    pathspecs = sorted({":(top,literal)" + p.split("/", 1)[0] for p in known}) or None
    history = changed_lines(repo, since, ref=ref, paths=pathspecs)
    non_root = [c for c in history.commits if c not in history.root_commits]
    note = HistoryNote(since, commits=len(non_root), total_commits=history.total_commits)
    if history.total_commits <= 1 or not non_root:
        why = "a one-commit tree" if history.total_commits <= 1 else f"no commit since {since}"
        return None, replace(note, note=f"no history ({why}): ranked by kernel size, then number of dispatch keys")
    changes = [(c.commit, c.path, c.ranges) for c in history.changes if c.path in known]
    extents = store.function_extents({path for _, path, _ in changes})
    touched = functions_touched(changes, extents)
    note = replace(note, commits_with_indexed_changes=len(touched))
    if not touched:
        return {}, note
    edges, op_nodes, fn_nodes = store.reach_graph()
    starts = {commit: [fn_nodes[f] for f in fids if f in fn_nodes] for commit, fids in touched.items()}
    reach = ops_reached(edges, op_nodes, starts, max_depth=max_depth, reach_bound=reach_bound)
    note = replace(note, commits_touching_infrastructure=len(reach.infrastructure), infra_ops=reach_bound,
                   max_depth=max_depth)
    return churn_by_op(reach.ops), note
