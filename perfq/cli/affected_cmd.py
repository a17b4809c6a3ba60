"""CLI for ``perfq affected`` and ``perfq backtest``."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path

import typer

from perfq.common import files
from perfq.common.render import print_json
from perfq.options import EXIT_GATE, DbOption, RepoOption, resolve_repo
from perfq.run.plan import DEFAULT_BUDGET


class AffectedFormat(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"
    gha_matrix = "gha-matrix"
    names = "names"


def register(app: typer.Typer) -> None:
    """Add ``affected`` and ``backtest`` to ``app``."""

    @app.command()
    def affected(
        ref: str = typer.Argument(None, help="Base ref (HEAD is compared with merge-base(ref, HEAD)) or A..B."),
        repo: Path = RepoOption,
        db: Path = DbOption,
        diff: str = typer.Option(None, "--diff",
            rich_help_panel="What changed", help="Read the patch from FILE ('-': stdin) instead of git."),
        worktree: bool = typer.Option(False, "--worktree",
            rich_help_panel="What changed", help="Include uncommitted changes."),
        reindex: bool = typer.Option(False, "--reindex",
            rich_help_panel="What changed", help="Refresh the index first."),
        explain: bool = typer.Option(False, "--explain",
            rich_help_panel="Output", help="Print the full chain for each benchmark."),
        graph: Path = typer.Option(None, "--graph", rich_help_panel="Output",
            help="Also write the explained chains as a graph: FILE.graphml, .gexf or .gml (networkx)."),
        fmt: AffectedFormat = typer.Option(AffectedFormat.table, "--format", metavar="FORMAT",
            rich_help_panel="Output",
            help="table, json, markdown (PR comment), gha-matrix (one entry per benchmark x mode x device), names."),
        ir: str = typer.Option(
            None, "--ir",
            rich_help_panel="Triton IR",
            help="A..B: flag benchmarks whose Triton IR changed between two `perfq ir collect` labels."
        ),
        history: Path = typer.Option(None, "--history", rich_help_panel="Triton IR",
                                     help="Results history database (for --ir)."),
        fail_on_no_benchmark: bool = typer.Option(
            False, "--fail-on-no-benchmark",
            rich_help_panel="Output", help=f"Exit {EXIT_GATE} when an affected op has no benchmark."
        ),
        budget: str = typer.Option(None, "--budget", rich_help_panel="Plan",
            help="Print the test plan that fits this duration (15m, 90s, 1h) without running it."),
        shards: int = typer.Option(None, "--shards", rich_help_panel="Plan",
            help="Split the plan (N budgets, default 15m each) into N shards; gha-matrix: one entry per shard."),
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
        from perfq.errors import PerfqError
        from query.document import names
        from query.service import affected_for_ref

        root = resolve_repo(repo)
        diff_text = None
        if diff is not None:
            try:
                diff_text = sys.stdin.read() if diff == "-" else files.input_text(diff, files.InputKind.diff)
            except OSError as exc:
                raise PerfqError(f"cannot read diff {diff}: {exc.strerror or exc}") from None
            except UnicodeDecodeError as exc:
                raise PerfqError(f"cannot read diff {diff}: {exc}") from None
        doc = affected_for_ref(root, ref, db, diff_text=diff_text, worktree=worktree, reindex=reindex)
        if ir:
            from perfq.ir.api import flag_affected
            from perfq.options import resolve_history

            doc = flag_affected(doc, root, resolve_history(root, history), ir)
        if graph is not None:
            from query.chain_graph import write_chain_graph  # networkx: only when a graph is asked for

            write_chain_graph(doc, graph)
        plan = None
        if budget is not None or shards is not None:
            plan = _plan(root, doc, db, history, budget, shards)
        if fmt == AffectedFormat.json:
            print_json({**doc.to_json(), **({"plan": plan.to_json()} if plan is not None else {})})
            if fail_on_no_benchmark and doc.no_benchmark_ops:
                raise typer.Exit(EXIT_GATE)
            return
        from perfq.cli import render_affected as render  # rich: terminal and markdown views only

        if fmt == AffectedFormat.markdown:
            print(render.markdown(doc, plan))
        elif fmt == AffectedFormat.gha_matrix:
            print_json(render.gha_matrix(doc) if plan is None or plan.shards == 1 and shards is None
                       else render.shard_matrix(plan))
        elif fmt == AffectedFormat.names:
            print(" ".join(names(doc)))
        else:
            render.table(doc, explain, plan)
        if fail_on_no_benchmark and doc.no_benchmark_ops:
            raise typer.Exit(EXIT_GATE)

    def _plan(root: Path, doc, db: Path | None, history: Path | None, budget: str | None, shards: int | None):
        """The budgeted plan of ``doc``: ``budget`` per shard (default 15m), ``shards`` shards (default 1)."""
        from perfq.options import resolve_history
        from perfq.run.plan import RunShape, check_shard, parse_duration
        from perfq.run.plan_inputs import plan_for

        _, n = check_shard(None if shards is None else 1, shards)
        seconds = parse_duration(budget if budget is not None else DEFAULT_BUDGET)
        return plan_for(root, doc, seconds, RunShape(shards=n), db, resolve_history(root, history))

    @app.command()
    def backtest(
        rev_range: str = typer.Argument(..., help="A..B: replay `perfq affected` on every commit (first-parent)."),
        repo: Path = RepoOption,
        db: Path = DbOption,
        fmt: AffectedFormat = typer.Option(AffectedFormat.table, "--format", metavar="FORMAT", help="table or json."),
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
