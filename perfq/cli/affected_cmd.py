"""CLI for ``perfq affected`` and ``perfq backtest``: the options become an ``AffectedRequest``,
``perfq.cli.affected_pipeline.affected`` answers it, and the answer is printed in the asked format."""

# no ``from __future__ import annotations``: Typer reads these signatures a dozen times while it
# builds the command, and string annotations would be compiled and evaluated on each read (~3 ms)
import contextlib
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from common.lifetime import collector_paused
from common.render import print_json
from perfq.cli.affected_pipeline import AffectedAnswer, AffectedRequest
from perfq.cli.affected_pipeline import affected as answer_affected
from perfq.options import EXIT_GATE, DbOpt, RepoOpt, resolve_repo


class AffectedFormat(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"
    gha_matrix = "gha-matrix"
    names = "names"


_CHANGED, _OUT, _IR, _PLAN = "What changed", "Output", "Triton IR", "Plan"


def register(app: typer.Typer) -> None:
    """Add ``affected`` and ``backtest`` to ``app``."""
    app.command()(affected)
    app.command()(backtest)


def affected(
    ref: Annotated[str | None, typer.Argument(
        help="Base ref (HEAD is compared with merge-base(ref, HEAD)) or A..B.")] = None,
    repo: RepoOpt = None,
    db: DbOpt = None,
    diff: Annotated[str | None, typer.Option("--diff",
        rich_help_panel=_CHANGED, help="Read the patch from FILE ('-': stdin) instead of git.")] = None,
    worktree: Annotated[bool, typer.Option("--worktree",
        rich_help_panel=_CHANGED, help="Include uncommitted changes.")] = False,
    reindex: Annotated[bool, typer.Option("--reindex",
        rich_help_panel=_CHANGED, help="Refresh the index first.")] = False,
    explain: Annotated[bool, typer.Option("--explain",
        rich_help_panel=_OUT, help="Print the full chain for each benchmark.")] = False,
    graph: Annotated[Path | None, typer.Option("--graph", rich_help_panel=_OUT,
        help="Also write the explained chains as a graph: FILE.graphml, .gexf or .gml (networkx).")] = None,
    fmt: Annotated[AffectedFormat, typer.Option("--format", metavar="FORMAT", rich_help_panel=_OUT,
        help="table, json, markdown (PR comment), gha-matrix (one entry per benchmark x mode x device), names.")
        ] = AffectedFormat.table,
    ir: Annotated[str | None, typer.Option("--ir", rich_help_panel=_IR,
        help="A..B: flag benchmarks whose Triton IR changed between two `perfq ir collect` labels.")] = None,
    history: Annotated[Path | None, typer.Option("--history", rich_help_panel=_IR,
        help="Results history database (for --ir).")] = None,
    fail_on_no_benchmark: Annotated[bool, typer.Option("--fail-on-no-benchmark",
        rich_help_panel=_OUT, help=f"Exit {EXIT_GATE} when an affected op has no benchmark.")] = False,
    budget: Annotated[str | None, typer.Option("--budget", rich_help_panel=_PLAN,
        help="Print the test plan that fits this duration (15m, 90s, 1h) without running it.")] = None,
    shards: Annotated[int | None, typer.Option("--shards", rich_help_panel=_PLAN,
        help="Split the plan (N budgets, default 15m each) into N shards; gha-matrix: one entry per shard.")
        ] = None,
) -> None:
    """Benchmarks a change can slow down, with the reason why, and ops with NO BENCHMARK.

    Examples:

        perfq affected origin/main --explain

        git diff origin/main | perfq affected --diff -

        perfq affected origin/main --format gha-matrix

        perfq affected origin/main --graph why.graphml      # the chains as a picture (yEd, Gephi)

        perfq affected origin/main --fail-on-no-benchmark      # exit 3 on an op without benchmark

        perfq affected origin/main --budget 5m                 # the test plan, not run

        perfq affected origin/main --format gha-matrix --shards 4 --budget 15m
    """
    request = AffectedRequest(repo=resolve_repo(repo), ref=ref, db=db, diff=diff, worktree=worktree,
                              reindex=reindex, ir=ir, history=history, graph=graph, budget=budget, shards=shards)
    # no collection while the query runs and prints (hundreds of gen-0 passes on a 500-file diff, for
    # little cyclic garbage); an index build (--reindex) keeps its own collector
    with contextlib.nullcontext() if reindex else collector_paused():
        answer = answer_affected(request)
        print_answer(answer, fmt, explain=explain, shards=shards)
    if fail_on_no_benchmark and answer.doc.no_benchmark_ops:
        raise typer.Exit(EXIT_GATE)


def print_answer(answer: AffectedAnswer, fmt: AffectedFormat, *, explain: bool, shards: int | None) -> None:
    """``answer`` on stdout as ``fmt`` (``shards``: as given; a gha-matrix of one shard stays per benchmark)."""
    doc, plan = answer.doc, answer.plan
    if fmt == AffectedFormat.json:
        print_json({**doc.to_json(), **({"plan": plan.to_json()} if plan is not None else {})})
        return
    from perfq.cli import render_affected as render  # rich: terminal and markdown views only

    if fmt == AffectedFormat.markdown:
        print(render.markdown(doc, plan))
    elif fmt == AffectedFormat.gha_matrix:
        print_json(render.gha_matrix(doc) if plan is None or plan.shards == 1 and shards is None
                   else render.shard_matrix(plan))
    elif fmt == AffectedFormat.names:
        from query.document import names

        print(" ".join(names(doc)))
    else:
        render.table(doc, explain, plan)


def backtest(
    rev_range: Annotated[str, typer.Argument(help="A..B: replay `perfq affected` on every commit (first-parent).")],
    repo: RepoOpt = None,
    db: DbOpt = None,
    fmt: Annotated[AffectedFormat, typer.Option("--format", metavar="FORMAT", help="table or json.")
                   ] = AffectedFormat.table,
) -> None:
    """Replay affected over a commit range: selections, canary escalations, unmapped changes, time.

    Examples:

        perfq backtest v2.5.0..v2.6.0

        perfq backtest HEAD~50..HEAD --format json
    """
    from perfq.cli import render_affected as render
    from query.backtest import backtest as run_backtest

    report = run_backtest(resolve_repo(repo), rev_range, db)
    if fmt == AffectedFormat.json:
        print_json(report)
    else:
        render.backtest_table(report)
