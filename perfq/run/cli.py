"""CLI for `perfq run`, `perfq compare`, `perfq history` and `perfq import`."""

from __future__ import annotations

import fnmatch
import shlex
import sys
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from common.errors import PerfqError
from common.render import print_json
from common.sched import Priority
from perfq.options import (
    EXIT_GATE,
    FORMAT_HELP,
    PRIORITY_HELP,
    Format,
    HistoryOpt,
    RepoOpt,
    command_started,
    positive,
    resolve_history,
    resolve_repo,
    takes_options,
)
from perfq.run import defaults
from perfq.run.plan import DEFAULT_BUDGET
from perfq.terminal import wide_console

if TYPE_CHECKING:  # the statistics (scipy) and the history (duckdb) load only when a command runs
    from perfq.run.compare import Settings
    from perfq.run.pipeline import RunRequest
    from perfq.run.report import ComparisonDocument, HistoryDocument
    from schema.results_store import HistoryRow


class SideName(str, Enum):
    base = "base"
    head = "head"


class CompareFormat(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"
    pytorch_benchmark = "pytorch-benchmark"


class Mode(str, Enum):
    eager = "eager"
    compile = "compile"
    both = "both"


_SIDES, _WHAT, _REPEATS, _RUNNER, _OUT = "Sides", "What to run", "Repeats", "Runner settings", "Output"
_WHAT_CMP, _STATS = "What to compare", "Statistics"


def _checked_threshold(ctx: typer.Context, param: typer.CallbackParam, value: float | None) -> float | None:
    """``--alpha`` in (0, 1), ``--min-effect`` finite and >= 0 (NaN refused): a usage error otherwise."""
    if value is None:
        return None
    from perfq.run.compare import check_threshold

    try:
        return check_threshold(str(param.name), value)
    except ValueError as exc:
        message = str(exc)
        raise typer.BadParameter(message[message.index("must"):]) from None


@dataclass(frozen=True, kw_only=True)
class RunArgs:
    """The command line of `perfq run`."""

    label: Annotated[str, typer.Option("--label", "-l", rich_help_panel=_OUT,
        help="Comparison label shared by base and head (runs accumulate under it).")]
    side: Annotated[SideName | None, typer.Option("--side", rich_help_panel=_SIDES,
        help="Which side this checkout is (one side per run; the other runs elsewhere).")] = None
    ab: Annotated[bool, typer.Option("--ab", rich_help_panel=_SIDES,
        help="Run both sides interleaved (A B, B A, ...) on this machine.")] = False
    python: Annotated[str | None, typer.Option("--python", rich_help_panel=_SIDES,
        help="Interpreter of both sides (default: this one).")] = None
    base_python: Annotated[str | None, typer.Option("--base-python", rich_help_panel=_SIDES,
        help="Interpreter of the base side.")] = None
    head_python: Annotated[str | None, typer.Option("--head-python", rich_help_panel=_SIDES,
        help="Interpreter of the head side.")] = None
    ref: Annotated[str | None, typer.Option("--ref", rich_help_panel=_SIDES,
        help="Ref recorded for this side (default: the checkout's commit).")] = None
    base_ref: Annotated[str | None, typer.Option("--base-ref", rich_help_panel=_SIDES,
        help="Base side's ref (--ab): its benchmark files come from a worktree at it.")] = None
    head_ref: Annotated[str | None, typer.Option("--head-ref", rich_help_panel=_SIDES,
        help="Head side's ref (--ab): its benchmark files come from a worktree at it.")] = None
    build: Annotated[str | None, typer.Option("--build", rich_help_panel=_SIDES,
        help="With refs: build each side in its worktree and venv, cached by commit; one argv, "
             "no shell, {python}: the side's interpreter.")] = None
    base_wheel: Annotated[str | None, typer.Option("--base-wheel", rich_help_panel=_SIDES,
        help="Wheel installed into the base side's venv: a path or URL, {commit}: its commit.")] = None
    head_wheel: Annotated[str | None, typer.Option("--head-wheel", rich_help_panel=_SIDES,
        help="Wheel installed into the head side's venv: a path or URL, {commit}: its commit.")] = None
    sides_dir: Annotated[Path | None, typer.Option("--sides-dir", rich_help_panel=_SIDES,
        help="Cache of the sides' worktrees and venvs (default: .git/perfq/sides).")] = None
    base_env: Annotated[list[str] | None, typer.Option("--base-env", rich_help_panel=_SIDES,
        help="KEY=VALUE set for the base side only (repeatable).")] = None
    head_env: Annotated[list[str] | None, typer.Option("--head-env", rich_help_panel=_SIDES,
        help="KEY=VALUE set for the head side only (repeatable).")] = None
    base_omp: Annotated[int | None, typer.Option("--base-omp-num-threads", rich_help_panel=_SIDES,
        help="OMP threads, base side only.")] = None
    head_omp: Annotated[int | None, typer.Option("--head-omp-num-threads", rich_help_panel=_SIDES,
        help="OMP threads, head side only.")] = None
    affected: Annotated[str | None, typer.Option("--affected", rich_help_panel=_WHAT,
        help="Run what `perfq affected REF` selects (its benchmarks and canary sets).")] = None
    bench: Annotated[list[str] | None, typer.Option("--bench", rich_help_panel=_WHAT,
        help="Benchmark to run: file stem or script name (repeatable).")] = None
    test: Annotated[list[str] | None, typer.Option("--test", rich_help_panel=_WHAT,
        help="Only these test names (with --bench; repeatable).")] = None
    operators: Annotated[str | None, typer.Option("--operators", rich_help_panel=_WHAT,
        help="Comma list passed to the runner's --operators.")] = None
    mode: Annotated[Mode | None, typer.Option("--mode", rich_help_panel=_WHAT,
        help="eager, compile or both (default eager).")] = None
    device: Annotated[str, typer.Option("--device", rich_help_panel=_WHAT,
        help="Runner --device (cpu, cuda).")] = "cpu"
    tag_filter: Annotated[str, typer.Option("--tag-filter", rich_help_panel=_WHAT,
        help="Runner --tag-filter (short, long, all).")] = "short"
    bench_root: Annotated[Path | None, typer.Option("--bench-root", rich_help_panel=_WHAT,
        help="operator_benchmark root (default: benchmarks/operator_benchmark of the repo).")] = None
    repeat: Annotated[int | None, typer.Option("--repeat", rich_help_panel=_REPEATS, min=1,
        help=f"Samples per test and side (default {defaults.REPEAT}; with sequential sampling, the first "
             f"rounds: {defaults.ADAPTIVE_REPEAT}).")] = None
    adaptive: Annotated[bool | None, typer.Option("--adaptive/--no-adaptive", rich_help_panel=_REPEATS,
        help="Sequential sampling (default with --ab): after --repeat rounds, re-run only the tests "
             "not yet decided, until all are, --max-repeat or the budget.")] = None
    max_repeat: Annotated[int, typer.Option("--max-repeat", rich_help_panel=_REPEATS, min=0,
        help="Sample ceiling per test and side (default: [tool.perfq.compare] max_samples, 20, and up to 5x that "
             "for a test still undecided there while the budget lasts).")] = 0
    budget: Annotated[str, typer.Option("--budget", rich_help_panel=_REPEATS,
        help="Time for the whole run (15m, 90s, 1h): the --affected plan fits it, adaptive rounds stop at it.")
        ] = DEFAULT_BUDGET
    run_all: Annotated[bool, typer.Option("--all", rich_help_panel=_WHAT,
        help="With --affected: run every selected test (no budget, no plan cut).")] = False
    shards: Annotated[int | None, typer.Option("--shards", rich_help_panel=_WHAT,
        help="With --affected: split the plan (N budgets) into N shards balanced by cost.")] = None
    shard: Annotated[int | None, typer.Option("--shard", rich_help_panel=_WHAT,
        help="With --shards N: run shard K (1..N).")] = None
    iterations: Annotated[int, typer.Option("--iterations", rich_help_panel=_RUNNER, min=0,
        help="Runner --iterations per measurement (0: the runner's own, slow, time-based count).")
        ] = defaults.ITERATIONS
    num_runs: Annotated[int, typer.Option("--num-runs", rich_help_panel=_RUNNER, min=0,
        help="Runner --num-runs per invocation; the fastest becomes the sample (0: the runner's).")
        ] = defaults.NUM_RUNS
    warmup: Annotated[int, typer.Option("--warmup-iterations", rich_help_panel=_RUNNER, min=0,
        help="Runner --warmup-iterations (0: the runner's own, 100).")] = defaults.WARMUP
    omp: Annotated[int, typer.Option("--omp-num-threads", rich_help_panel=_RUNNER, min=0,
        help="OMP threads, both sides (0: leave unset; more than 1 is noisy on a shared machine).")
        ] = defaults.OMP_THREADS
    mkl: Annotated[int | None, typer.Option("--mkl-num-threads", min=0, rich_help_panel=_RUNNER,
        help="MKL threads, both sides.")] = None
    batch: Annotated[bool, typer.Option("--batch/--no-batch", rich_help_panel=_RUNNER,
        help="Run benchmark files with equal flags in one process per side and round.")] = True
    timeout: Annotated[float, typer.Option("--timeout", callback=positive, rich_help_panel=_RUNNER,
        help="Seconds per benchmark invocation.")] = 900.0
    sandbox: Annotated[bool, typer.Option("--sandbox", rich_help_panel=_RUNNER,
        help="Run the benchmarks contained (a PR's code in CI): scrubbed environment, own HOME/TMPDIR; "
             "with bubblewrap also no network and a read-only file system.")] = False
    priority: Annotated[Priority, typer.Option("--priority", metavar="PRIORITY", rich_help_panel=_RUNNER,
        help=PRIORITY_HELP)] = Priority.auto
    out: Annotated[Path | None, typer.Option("--out", rich_help_panel=_OUT,
        help="Also write a portable result file (for perfq import).")] = None
    fmt: Annotated[Format, typer.Option("--format", "-f", metavar="FORMAT", rich_help_panel=_OUT,
        help="How to print the result: " + FORMAT_HELP)] = Format.table
    fail_on_regression: Annotated[bool, typer.Option("--fail-on-regression", rich_help_panel=_OUT,
        help=f"With --ab: exit {EXIT_GATE} when the comparison finds a regression.")] = False
    repo: RepoOpt = None
    history: HistoryOpt = None


@dataclass(frozen=True, kw_only=True)
class CompareArgs:
    """The command line of `perfq compare`."""

    label: Annotated[str, typer.Argument(help="Label given to perfq run.")]
    baseline: Annotated[str | None, typer.Option("--baseline", "-b", rich_help_panel=_WHAT_CMP, help=(
        "Compare LABEL's head (or only) side with another stored run: OTHER or OTHER:base|head "
        "(default side: head, or OTHER's only side)."))] = None
    fmt: Annotated[CompareFormat, typer.Option("--format", "-f", metavar="FORMAT", rich_help_panel=_OUT,
        help=FORMAT_HELP + " pytorch-benchmark: PyTorch's benchmark database records, every sample "
        "(perfq import reads them).")] = CompareFormat.table
    alpha: Annotated[float | None, typer.Option("--alpha", rich_help_panel=_STATS, callback=_checked_threshold,
        help="False discovery rate (default 0.05, or [tool.perfq.compare] alpha).")] = None
    min_effect: Annotated[float | None, typer.Option("--min-effect", rich_help_panel=_STATS,
        callback=_checked_threshold, help="Minimum relative change for a verdict (default 0.05).")] = None
    fail_on_regression: Annotated[bool, typer.Option("--fail-on-regression", rich_help_panel=_OUT,
        help=f"Exit {EXIT_GATE} on a regression, a failed benchmark or a side without a run.")] = False
    repo: RepoOpt = None
    history: HistoryOpt = None


@dataclass(frozen=True, kw_only=True)
class HistoryArgs:
    """The command line of `perfq history`."""

    bench: Annotated[str, typer.Argument(help="Benchmark (file stem) to show.")]
    test: Annotated[str | None, typer.Option("--test", rich_help_panel=_WHAT_CMP, help="Only this test.")] = None
    label: Annotated[str | None, typer.Option("--label", rich_help_panel=_WHAT_CMP,
        help="Only runs whose label matches this glob (e.g. 'nightly-*').")] = None
    side: Annotated[SideName | None, typer.Option("--side", rich_help_panel=_WHAT_CMP,
        help="Only base or only head runs (default: both).")] = None
    runs: Annotated[bool, typer.Option("--runs", rich_help_panel=_OUT,
        help="One row per run and test instead of one trend per test.")] = False
    min_effect: Annotated[float, typer.Option("--min-effect", rich_help_panel=_STATS, min=0.0,
        help="Smallest level shift reported as a step (relative).")] = 0.05
    fmt: Annotated[Format, typer.Option("--format", "-f", metavar="FORMAT", rich_help_panel=_OUT, help=FORMAT_HELP)
                   ] = Format.table
    repo: RepoOpt = None
    history: HistoryOpt = None


@dataclass(frozen=True, kw_only=True)
class ImportArgs:
    """The command line of `perfq import`."""

    files: Annotated[list[Path], typer.Argument(help="Result files (perfq run --out, or history DuckDB files).")]
    fmt: Annotated[Format, typer.Option("--format", "-f", metavar="FORMAT",
                                        help="How to print the counts: " + FORMAT_HELP)
                   ] = Format.table
    repo: RepoOpt = None
    history: HistoryOpt = None


def register(app: typer.Typer) -> None:
    """Add run, compare, history and import to ``app``."""
    app.command()(takes_options(RunArgs)(run))
    app.command()(takes_options(CompareArgs)(compare))
    app.command("history")(takes_options(HistoryArgs)(history_cmd))
    app.command("import")(takes_options(ImportArgs)(import_cmd))


def run(args: RunArgs) -> None:
    """Run the selected benchmarks as one side (or both, --ab) of a labelled comparison.

    With --ab, sampling is sequential: after --repeat rounds only the tests not yet decided
    run again, until each is decided, --max-repeat or the budget (docs/run.md). Progress: one
    bar on a terminal, one line per finished invocation in CI logs.

    Examples:

        perfq run -l pr1 --ab --base-python base/bin/python --head-python head/bin/python --affected main

        perfq run --label pr1 --side head --bench softmax --test Softmax_N1_C3_H256_W256_cpu

        perfq run --label nightly-$(date +%F) --side head --bench softmax --bench sum --out nightly.json
    """
    from perfq.run.pipeline import run_benchmarks

    outcome = run_benchmarks(run_request(args))
    if outcome.exit_code:
        raise typer.Exit(outcome.exit_code)


def compare(args: CompareArgs) -> None:
    """Compare the head side of LABEL against its base side, or against a stored baseline run.

    Examples:

        perfq compare pr123

        perfq compare pr123 --format markdown > comment.md

        perfq compare pr123 --baseline nightly-2024-06-01        # against last night's main run

        perfq compare pr123 --fail-on-regression --min-effect 0.1

        perfq compare pr123 --format pytorch-benchmark > records.json   # PyTorch's benchmark database
    """
    from perfq.run.compare_labels import settings
    from perfq.run.views import print_comparison_as

    repo = resolve_repo(args.repo)
    path = resolve_history(repo, args.history)
    doc = _comparison(path, args, settings(repo, args.alpha, args.min_effect))
    if args.fmt == CompareFormat.pytorch_benchmark:
        _print_records(path, args, doc)
    else:
        print_comparison_as(doc, Format(args.fmt.value))
    if args.fail_on_regression and doc.gate_fails():
        raise typer.Exit(EXIT_GATE)


def history_cmd(args: HistoryArgs) -> None:
    """Show a benchmark's results across stored runs: a trend per test, with the steps in it.

    Every run gives one point per test (the median of its samples), oldest first; steps are
    level shifts found by binary segmentation with a robust score (docs/run.md, "History").

    Examples:

        perfq history softmax --label 'nightly-*' --side head

        perfq history softmax --test Softmax_N1_C3_H256_W256_cpu --runs

        perfq history softmax --format json | jq '.trends[] | select(.steps != [])'
    """
    from perfq.run.opbench import normalize_name
    from perfq.run.report import HistoryDocument
    from perfq.run.trend import trends_from_rows

    bench = normalize_name(args.bench)
    rows = _history_rows(bench, args)
    if not rows:
        raise PerfqError(f"no stored results for {bench}" + (f" test {args.test}" if args.test else "")
                         + (" matching the filters" if args.label or args.side else ""))
    doc = HistoryDocument(bench, tuple(rows), tuple(trends_from_rows(rows, args.min_effect)))
    what = "".join(f" ({x})" for x in (args.label, args.side.value if args.side else None) if x)
    _render_history(doc, args.fmt, args.runs, what)


def import_cmd(args: ImportArgs) -> None:
    """Merge result files from other machines into the history (idempotent).

    Examples:

        perfq import results/*.json

        perfq import other-machine/history.duckdb --history merged.duckdb --format json
    """
    from perfq.run.results import import_files
    from perfq.run.run_report import ImportDocument

    target = resolve_history(resolve_repo(args.repo), args.history)
    doc = ImportDocument.from_counts(import_files(target, args.files), target)
    if args.fmt == Format.json:
        print_json(doc.to_json())
    elif args.fmt == Format.markdown:
        print(doc.markdown())
    else:
        print(doc.line())


def run_request(args: RunArgs) -> RunRequest:
    """The typed request of a `perfq run` command line."""
    from perfq.run.jobs import SideOptions
    from perfq.run.opbench import OpBenchSpec
    from perfq.run.pipeline import RunRequest
    from perfq.run.sides import SourceOptions

    sides = SideOptions(args.python, args.base_python, args.head_python, (), (), args.base_omp, args.head_omp,
                        args.ref, args.base_ref, args.head_ref, wheels=bool(args.base_wheel or args.head_wheel))
    runner = OpBenchSpec(name="", device=args.device, tag_filter=args.tag_filter, iterations=args.iterations or None,
                         num_runs=args.num_runs or None, warmup_iterations=args.warmup or None,
                         omp_num_threads=args.omp or None, mkl_num_threads=args.mkl)
    return RunRequest(
        label=args.label, side=args.side.value if args.side else None, ab=args.ab, sides=sides,
        base_env=tuple(args.base_env or ()), head_env=tuple(args.head_env or ()), build=args.build,
        sources=SourceOptions((), args.base_wheel, args.head_wheel, args.sides_dir), affected=args.affected,
        benches=tuple(args.bench or ()), tests=tuple(args.test or ()), operators=args.operators,
        mode=args.mode.value if args.mode else None, bench_root=args.bench_root, runner=runner,
        repeat=args.repeat, adaptive=args.adaptive, max_repeat=args.max_repeat, budget=args.budget,
        run_all=args.run_all, shards=args.shards, shard=args.shard, batch=args.batch, timeout=args.timeout,
        sandbox=args.sandbox, priority=args.priority, out=args.out, fmt=args.fmt,
        fail_on_regression=args.fail_on_regression, repo=args.repo, history=args.history,
        command=shlex.join(["perfq", *sys.argv[1:]]), started=command_started())


def _comparison(history: Path, args: CompareArgs, settings: Settings) -> ComparisonDocument:
    """LABEL's head against its base, or against the stored ``--baseline``."""
    from perfq.run.compare_labels import comparison_against, comparison_for_label

    if args.baseline:
        return comparison_against(history, args.label, args.baseline, settings)
    return comparison_for_label(history, args.label, settings)


def _print_records(history: Path, args: CompareArgs, doc: ComparisonDocument) -> None:
    """PyTorch's benchmark database records of the comparison, every sample."""
    from perfq.run import pytorch_benchmark
    from perfq.run.compare_labels import compared_runs

    runs = compared_runs(history, doc, (args.label, (args.baseline or "").partition(":")[0]))
    sys.stdout.write(pytorch_benchmark.dumps(pytorch_benchmark.comparison_records(doc, runs)))


def _history_rows(bench: str, args: HistoryArgs) -> list[HistoryRow]:
    """The stored rows of ``bench`` (and ``--test``) that match ``--label`` and ``--side``."""
    from schema.results_store import history_rows

    rows = history_rows(resolve_history(resolve_repo(args.repo), args.history), bench, args.test)
    return [r for r in rows if (args.label is None or fnmatch.fnmatchcase(r.label, args.label))
            and (args.side is None or r.side == args.side.value)]


def _render_history(doc: HistoryDocument, fmt: Format, runs: bool, what: str) -> None:
    if fmt == Format.json:
        print_json(doc.to_json())
        return
    from perfq.run.views import history_markdown, print_history_runs, print_trends

    if fmt == Format.markdown:
        sys.stdout.write(history_markdown(doc, runs))
    elif runs:
        print_history_runs(wide_console(), doc)
    else:
        print_trends(wide_console(), doc.benchmark, doc.trends, what)
