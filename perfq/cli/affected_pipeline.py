"""``perfq affected`` as a function: a typed request in, the document (and its plan) out.

The stages, in order: the diff read (``--diff``), the document (``query.service``: the changed
files, the index, then the query's own stages start -> reach -> select -> canaries -> document),
the Triton IR flags (``--ir``), the chain graph (``--graph``) and the budgeted plan
(``--budget``/``--shards``). ``perfq.cli.affected_cmd`` turns the command line into an
``AffectedRequest`` and renders the ``AffectedAnswer``; Python callers use ``affected`` as they
would the command::

    answer = affected(AffectedRequest(repo=Path("."), ref="origin/main", budget="5m"))
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from common import files
from common.errors import PerfqError
from perfq.options import resolve_history

if TYPE_CHECKING:  # the index (duckdb) and the planner load only when a command runs
    from perfq.run.plan import TestPlan
    from query.document import AffectedDoc


@dataclass(frozen=True)
class AffectedRequest:
    """What ``perfq affected`` was asked (``repo`` resolved to its root)."""

    repo: Path
    ref: str | None = None  # base ref, or A..B; None with ``diff``
    db: Path | None = None
    diff: str | None = None  # a patch file, '-' for stdin
    worktree: bool = False
    reindex: bool = False
    ir: str | None = None  # A..B: two `perfq ir collect` labels
    history: Path | None = None
    graph: Path | None = None
    budget: str | None = None
    shards: int | None = None

    @property
    def wants_plan(self) -> bool:
        return self.budget is not None or self.shards is not None


@dataclass(frozen=True)
class AffectedAnswer:
    """The document, and the plan when one was asked for."""

    doc: AffectedDoc
    plan: TestPlan | None = None


def affected(request: AffectedRequest) -> AffectedAnswer:
    """Run the command's stages for ``request``."""
    doc = document(request, read_diff(request.diff))
    doc = flag_ir(request, doc)
    write_graph(request, doc)
    return AffectedAnswer(doc, plan(request, doc) if request.wants_plan else None)


def read_diff(diff: str | None) -> str | None:
    """The patch text of ``--diff`` (a file, or '-' for stdin); None without one."""
    if diff is None:
        return None
    try:
        return sys.stdin.read() if diff == "-" else files.input_text(diff, files.InputKind.diff)
    except OSError as exc:
        raise PerfqError(f"cannot read diff {diff}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise PerfqError(f"cannot read diff {diff}: {exc}") from None


def document(request: AffectedRequest, diff_text: str | None) -> AffectedDoc:
    """The affected document of the change (the query's stages run in ``query.affected``)."""
    from query.service import affected_for_ref

    return affected_for_ref(request.repo, request.ref, request.db, diff_text=diff_text,
                            worktree=request.worktree, reindex=request.reindex)


def flag_ir(request: AffectedRequest, doc: AffectedDoc) -> AffectedDoc:
    """``doc`` with the benchmarks whose Triton IR changed flagged (``--ir A..B``)."""
    if not request.ir:
        return doc
    from perfq.ir.api import flag_affected

    return flag_affected(doc, request.repo, resolve_history(request.repo, request.history), request.ir)


def write_graph(request: AffectedRequest, doc: AffectedDoc) -> None:
    """The explained chains written as a graph file (``--graph``)."""
    if request.graph is None:
        return
    from query.chain_graph import write_chain_graph  # networkx: only when a graph is asked for

    write_chain_graph(doc, request.graph)


def plan(request: AffectedRequest, doc: AffectedDoc) -> TestPlan:
    """The budgeted plan of ``doc``: ``budget`` per shard (default 15m), ``shards`` shards (default 1)."""
    from perfq.run.plan import DEFAULT_BUDGET, RunShape, check_shard, parse_duration
    from perfq.run.plan_inputs import plan_for

    _, n = check_shard(None if request.shards is None else 1, request.shards)
    seconds = parse_duration(request.budget if request.budget is not None else DEFAULT_BUDGET)
    return plan_for(request.repo, doc, seconds, RunShape(shards=n), request.db,
                    resolve_history(request.repo, request.history))
