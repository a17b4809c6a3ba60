"""``perfq coverage`` as a function: a typed request in, the ``CoverageReport`` out.

The stages: the configuration (the churn's infrastructure bound), the index's facts, the churn
of each operator's kernels over the git history, then the report (grouped and ranked)::

    report = coverage_report(CoverageRequest(repo, db, uncovered_only=True, top=20))
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from common.errors import PerfqError

if TYPE_CHECKING:  # the index (duckdb) loads only when a command runs
    from perfq.coverage.report import CoverageReport

DEFAULT_INFRA_OPS = 200  # a changed function reaching more operators than this is shared infrastructure


@dataclass(frozen=True)
class CoverageRequest:
    """What ``perfq coverage`` was asked (without ``--scaffold``)."""

    repo: Path
    db: Path
    since: str = "180.days"  # git approxidate
    dispatch: tuple[str, ...] = ()  # only operators with any of these dispatch keys
    top: int | None = None
    uncovered_only: bool = False
    infra_ops: int | None = None  # None: the config's, else DEFAULT_INFRA_OPS


def infra_bound(cfg_extra: dict, override: int | None) -> int:
    """The churn infrastructure bound: ``--infra-ops``, else ``[tool.perfq] coverage_infra_ops``, else 200."""
    if override is not None:
        return override
    value = cfg_extra.get("coverage_infra_ops", DEFAULT_INFRA_OPS)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise PerfqError(f"[tool.perfq] coverage_infra_ops must be a positive integer, not {value!r}")
    return value


def coverage_report(request: CoverageRequest) -> CoverageReport:
    """Load facts, compute churn from git history, build the report."""
    from common.config import load_config
    from perfq.coverage.churn import op_churn
    from perfq.coverage.facts import load_facts
    from perfq.coverage.report import build_report
    from schema.reader import open_index

    cfg = load_config(request.repo)
    bound = infra_bound(cfg.extra, request.infra_ops)
    with open_index(request.db) as con:
        facts = load_facts(con)
        op_commits, note = op_churn(request.repo, con, request.since, max_depth=cfg.max_depth, reach_bound=bound)
    return build_report(facts, op_commits, dispatch=list(request.dispatch), top=request.top,
                        uncovered_only=request.uncovered_only, history_note=note)
