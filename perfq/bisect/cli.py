"""CLI for `perfq bisect` and `perfq bisect-step` (see docs/bisect.md)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from typer.core import TyperCommand

from common.errors import PerfqError
from common.render import print_json
from common.sched import Priority
from perfq.options import (
    EXIT_GATE,
    PRIORITY_HELP,
    DbOpt,
    Format,
    HistoryOpt,
    RepoOpt,
    finite,
    non_negative,
    positive,
    resolve_repo,
)

if TYPE_CHECKING:  # the bisection's modules load only when a command runs
    from perfq.bisect.metric import MetricSpec
    from perfq.bisect.report import BisectReport

_CMD_KEY = "perfq_bisect_command"
_BENCH, _METRIC, _SEARCH, _SESSION, _OUT = "What to measure", "Metric", "Search", "Session", "Output"
def _regex(pattern: str | None) -> str | None:
    """Typer callback: a regular expression that compiles."""
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise typer.BadParameter(f"{pattern!r} is not a regular expression ({exc})") from None
    return pattern


FormatOpt = Annotated[Format, typer.Option("--format", metavar="FORMAT", rich_help_panel=_OUT,
                                           help="table (text), markdown or json.")]
IrTargetOpt = Annotated[list[str] | None, typer.Option("--ir-target", rich_help_panel=_BENCH,
                                                       help="With --ir: compile target(s), e.g. cuda:90.")]
# options of both bisect and bisect-step
BuildOpt = Annotated[str | None, typer.Option("--build", rich_help_panel=_BENCH,
                                              help="Command run before benchmarking each commit (an argv, no shell).")]
MetricOpt = Annotated[str | None, typer.Option("--metric", callback=_regex, rich_help_panel=_METRIC,
                                               help="Regex; its first group is the value.")]
MetricJsonOpt = Annotated[str | None, typer.Option("--metric-json", rich_help_panel=_METRIC,
                                                   help="Dotted path into JSON output.")]
AggregateOpt = Annotated[str, typer.Option("--aggregate", rich_help_panel=_METRIC,
                                           help="Several --metric matches: first|last|sum|mean|min|max.")]
LowerOpt = Annotated[bool, typer.Option("--lower-is-better", rich_help_panel=_METRIC,
                                        help="Smaller values are better.")]
HigherOpt = Annotated[bool, typer.Option("--higher-is-better", rich_help_panel=_METRIC,
                                         help="Larger values are better.")]
ThresholdOpt = Annotated[float, typer.Option("--threshold", callback=finite, min=0.01, max=0.99,
                                             rich_help_panel=_SEARCH,
                                             help="Bad when past this fraction of the way from good to bad.")]
MarginOpt = Annotated[float, typer.Option("--margin", callback=finite, min=0.0, max=0.5, rich_help_panel=_SEARCH,
                                          help="Near the threshold (fraction of good-to-bad): run more.")]
ExtraRunsOpt = Annotated[int, typer.Option("--extra-runs", min=0, rich_help_panel=_SEARCH,
                                           help="Runs added when near the threshold.")]
TimeoutOpt = Annotated[float, typer.Option("--timeout", callback=positive, rich_help_panel=_BENCH,
                                           help="Seconds per build or benchmark run.")]
PriorityOpt = Annotated[Priority, typer.Option("--priority", metavar="PRIORITY", rich_help_panel=_BENCH,
                                               help=PRIORITY_HELP)]
TestNameOpt = Annotated[str | None, typer.Option("--test-name", rich_help_panel=_BENCH,
                                                 help="With --benchmark: one test, not the sum.")]


class _DashDashCommand(TyperCommand):
    """Keeps everything after the first ``--`` verbatim as the benchmark command."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        if "--" in args:
            i = args.index("--")
            ctx.meta[_CMD_KEY] = list(args[i + 1:])
            args = args[:i]
        else:
            ctx.meta[_CMD_KEY] = []
        return super().parse_args(ctx, args)


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _metric(metric: str | None, metric_json: str | None, aggregate: str):
    from perfq.bisect.metric import AGGREGATES, MetricSpec

    if metric and metric_json:
        raise PerfqError("use either --metric or --metric-json, not both")
    if aggregate not in AGGREGATES:
        raise PerfqError(f"--aggregate must be one of {', '.join(AGGREGATES)}")
    return MetricSpec(regex=metric, json_path=metric_json, aggregate=aggregate)


def _confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        return False
    return typer.confirm(question, default=False, err=True)


def register(app: typer.Typer) -> None:
    """Add ``bisect`` and ``bisect-step`` to ``app``."""
    app.command("bisect", cls=_DashDashCommand)(bisect_cmd)
    app.command("bisect-step", cls=_DashDashCommand)(bisect_step_cmd)


def bisect_cmd(
    ctx: typer.Context,
    good: Annotated[str | None, typer.Argument(help="A commit where the benchmark is fast (good).")] = None,
    bad: Annotated[str | None, typer.Argument(help="A commit where it is slow (bad); default HEAD.")] = None,
    build: BuildOpt = None,
    metric: MetricOpt = None,
    metric_json: MetricJsonOpt = None,
    aggregate: AggregateOpt = "first",
    lower: LowerOpt = False,
    higher: HigherOpt = False,
    runs: Annotated[int, typer.Option("--runs", min=1, rich_help_panel=_SEARCH,
                                      help="Runs per tested commit (median).")] = 3,
    baseline_runs: Annotated[int, typer.Option("--baseline-runs", min=1, rich_help_panel=_SEARCH,
                                               help="Runs of GOOD and BAD.")] = 3,
    threshold: ThresholdOpt = 0.30,
    margin: MarginOpt = 0.10,
    extra_runs: ExtraRunsOpt = 5,
    min_change: Annotated[float, typer.Option("--min-change", callback=non_negative, rich_help_panel=_SEARCH,
                                              help="Smaller GOOD/BAD change: noise.")] = 0.05,
    max_failures: Annotated[int, typer.Option("--max-failures", min=1, rich_help_panel=_SEARCH,
                                              help="Stop after this many in a row.")] = 3,
    force: Annotated[bool, typer.Option("--force", rich_help_panel=_SEARCH,
                                        help="Bisect even if the baselines look like noise.")] = False,
    all_parents: Annotated[bool, typer.Option("--all-parents", rich_help_panel=_SEARCH,
                                              help="When the first bad commit is a merge, descend into it.")] = False,
    timeout: TimeoutOpt = 600.0,
    priority: PriorityOpt = Priority.auto,
    yes: Annotated[bool, typer.Option("--yes", "-y", rich_help_panel=_SESSION,
                                      help="Stash a dirty tree without asking.")] = False,
    prune: Annotated[bool, typer.Option("--prune", rich_help_panel=_SEARCH,
                                        help="Skip commits the perfq index says cannot matter.")] = False,
    benchmark: Annotated[str | None, typer.Option("--benchmark", rich_help_panel=_BENCH,
                                                  help="Operator benchmark (pt/NAME.py): builds command and metric.")
                         ] = None,
    test_name: TestNameOpt = None,
    ir: Annotated[str | None, typer.Option("--ir", rich_help_panel=_BENCH,
                                           help="Bisect on 'the IR of this kernel changed' (perfq ir).")] = None,
    ir_target: IrTargetOpt = None,
    resume: Annotated[bool, typer.Option("--resume", rich_help_panel=_SESSION,
                                         help="Continue the last interrupted session.")] = False,
    fmt: FormatOpt = Format.table,
    repo: RepoOpt = None,
    db: DbOpt = None,
    history: HistoryOpt = None,
) -> None:
    """Find the commit that made a benchmark slower: perfq bisect GOOD [BAD] -- CMD...

    Examples:

        perfq bisect v2.5.0 -- python bench.py --size 4096

        perfq bisect HEAD~40 --benchmark softmax --test-name Softmax_N1_C3_H256_W256_cpu --prune

        perfq bisect --resume
    """
    from common.build import build_argv
    from perfq.bisect.driver import run_bisect
    from perfq.bisect.request import BisectRequest
    from perfq.bisect.search import SearchConfig

    command, cwd, spec, lower = _bisect_command(ctx.meta.get(_CMD_KEY, []), _metric(metric, metric_json, aggregate),
                                                benchmark, test_name, lower, higher)
    if ir and benchmark:
        raise PerfqError("give either --ir KERNEL or --benchmark NAME, not both")
    if resume and (good or command):
        raise PerfqError("--resume continues the stored session; do not give commits or a command")
    cfg = SearchConfig(runs=runs, baseline_runs=baseline_runs, threshold=threshold, margin=margin,
                       extra_runs=extra_runs, min_change=min_change, max_failures=max_failures,
                       force=force)
    req = BisectRequest(
        repo=resolve_repo(repo), good=good, bad=bad, command=command, cwd=cwd, build=build_argv(build), metric=spec,
        lower=lower or None, higher=higher or None, search=cfg, all_parents=all_parents, timeout=timeout,
        yes=yes, prune=prune, benchmark=benchmark, db=db, history=history, resume=resume,
        ir_kernel=ir, ir_targets=tuple(ir_target or ()), priority=priority,
    )
    doc = run_bisect(req, _log, _confirm)
    _print_report(doc, fmt)
    if not doc.found:
        raise typer.Exit(EXIT_GATE)


def _bisect_command(command: list[str], spec: MetricSpec, benchmark: str | None, test_name: str | None,
                    lower: bool, higher: bool) -> tuple[list[str], str, MetricSpec, bool]:
    """The command to bisect (after ``--``, or ``--benchmark``'s), its directory, metric and
    polarity (an operator benchmark's time: lower is better unless told)."""
    from perfq.bisect.request import opbench_command

    if not benchmark:
        if test_name:
            raise PerfqError("--test-name only applies with --benchmark")
        return command, "", spec, lower
    if command:
        raise PerfqError("give either --benchmark NAME or a command after `--`, not both")
    command, cwd, bench_metric = opbench_command(benchmark, test_name)
    return command, cwd, spec if (spec.regex or spec.json_path) else bench_metric, lower or not higher


def _print_report(doc: BisectReport, fmt: Format) -> None:
    from perfq.bisect.report import render_markdown, render_text

    if fmt == Format.json:
        print_json(doc.to_json())
    elif fmt == Format.markdown:
        print(render_markdown(doc))
    else:
        print(render_text(doc))


def bisect_step_cmd(
    ctx: typer.Context,
    good_value: Annotated[float | None, typer.Option("--good-value", callback=finite, rich_help_panel=_SEARCH,
                                                     help="The metric at the good commit.")] = None,
    bad_value: Annotated[float | None, typer.Option("--bad-value", callback=finite, rich_help_panel=_SEARCH,
                                                    help="The metric at the bad commit.")] = None,
    threshold_value: Annotated[float | None, typer.Option("--threshold-value", callback=finite,
                                                          rich_help_panel=_SEARCH,
                                                          help="Or: an absolute threshold (needs a polarity).")
                               ] = None,
    build: BuildOpt = None,
    metric: MetricOpt = None,
    metric_json: MetricJsonOpt = None,
    aggregate: AggregateOpt = "first",
    lower: LowerOpt = False,
    higher: HigherOpt = False,
    runs: Annotated[int, typer.Option("--runs", min=1, rich_help_panel=_SEARCH,
                                      help="Runs of this commit (median).")] = 3,
    extra_runs: ExtraRunsOpt = 5,
    threshold: ThresholdOpt = 0.30,
    margin: MarginOpt = 0.10,
    timeout: TimeoutOpt = 600.0,
    priority: PriorityOpt = Priority.auto,
    benchmark: Annotated[str | None, typer.Option("--benchmark", rich_help_panel=_BENCH,
                                                  help="Operator benchmark name (pt/NAME.py).")] = None,
    test_name: TestNameOpt = None,
) -> None:
    """One `git bisect run` step: exit 0 good, 1 bad, 125 skip (128 aborts on a usage error).

    Examples:

        git bisect run perfq bisect-step --good-value 1.2 --bad-value 1.9 -- python bench.py

        git bisect run perfq bisect-step --good-value 180 --bad-value 240 --benchmark softmax
    """
    from common.build import build_argv
    from perfq.bisect.request import opbench_command
    from perfq.bisect.step import StepRequest, run_step

    try:
        command: list[str] = ctx.meta.get(_CMD_KEY, [])
        spec = _metric(metric, metric_json, aggregate)
        cwd = Path.cwd()
        if benchmark:
            command, sub, bench_metric = opbench_command(benchmark, test_name)
            cwd = resolve_repo(None) / sub
            spec = spec if (metric or metric_json) else bench_metric
            lower = lower or not higher
        if not command:
            raise PerfqError("give the benchmark command after `--` (or --benchmark NAME)")
        req = StepRequest(command=command, cwd=cwd, metric=spec, build=build_argv(build), good_value=good_value,
                          bad_value=bad_value, threshold_value=threshold_value, lower=lower or None,
                          higher=higher or None, runs=runs, extra_runs=extra_runs, threshold=threshold,
                          margin=margin, timeout=timeout, priority=priority)
        code = run_step(req, _log)
    except PerfqError as exc:
        # git bisect run treats 1-127 (but 125) as "bad": a usage error must abort instead.
        raise PerfqError(str(exc), exit_code=128) from None
    raise typer.Exit(code)
