"""CLI for `perfq run`, `perfq compare`, `perfq history` and `perfq import`."""

from __future__ import annotations

import fnmatch
import os
import shlex
import sys
import time
from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from perfq.common import sched
from perfq.common.build import build_argv
from perfq.common.render import plain, print_json
from perfq.common.sched import Priority
from perfq.config import load_config
from perfq.errors import PerfqError
from perfq.options import (
    EXIT_GATE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    FORMAT_HELP,
    PRIORITY_HELP,
    Format,
    HistoryOption,
    RepoOption,
    positive,
    resolve_history,
    resolve_repo,
)
from perfq.run import defaults
from perfq.run.plan import DEFAULT_BUDGET
from perfq.terminal import console, wide_console

if TYPE_CHECKING:  # the statistics (scipy) and the history (duckdb) load only when a command runs
    from perfq.run.report import ComparisonDocument


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



REPLAN_AFTER = 0.02  # preparing the sides took more than this share of the budget: the plan is made again to fit


def priority_line(priority: Priority, realtime: bool) -> str:
    """The one line every run prints: the priority its benchmark processes get, and why."""
    if realtime:
        return (f"priority: real-time ({sched.describe(True)}, --priority {priority.value}: permitted here), "
                "so other load on this machine cannot preempt the benchmarks")
    why = "--priority normal" if priority == Priority.normal else "real-time scheduling is not permitted here"
    return f"priority: normal (SCHED_OTHER, {why}), so other load on this machine adds noise"


_SIDES, _WHAT, _REPEATS, _RUNNER, _OUT = "Sides", "What to run", "Repeats", "Runner settings", "Output"
_WHAT_CMP, _STATS = "What to compare", "Statistics"


def _interactive() -> bool:
    return sys.stderr.isatty() and os.environ.get("CI", "").lower() not in ("true", "1")


def _settings(repo: Path, alpha: float | None = None, min_effect: float | None = None,
              max_samples: int | None = None):
    from perfq.run.compare import settings_from_config

    try:
        return settings_from_config(load_config(repo).extra, alpha=alpha, min_effect=min_effect,
                                    max_samples=max_samples)
    except (ValueError, TypeError) as exc:
        raise PerfqError(f"bad [tool.perfq.compare] config: {exc}") from None


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


def _render_comparison(doc: ComparisonDocument, fmt: Format) -> None:
    from perfq.run.report import render_markdown

    if fmt == Format.json:
        print_json(doc.to_json())
        return
    if fmt == Format.markdown:
        sys.stdout.write(render_markdown(doc))
        return
    from perfq.run.render import print_comparison

    print_comparison(wide_console(), doc)


def _render_history(doc, fmt: Format, runs: bool, what: str) -> None:
    if fmt == Format.json:
        print_json(doc.to_json())
        return
    from perfq.run.render import history_markdown, print_history_runs, print_trends

    if fmt == Format.markdown:
        sys.stdout.write(history_markdown(doc, runs))
    elif runs:
        print_history_runs(wide_console(), doc)
    else:
        print_trends(wide_console(), doc.benchmark, doc.trends, what)


def register(app: typer.Typer) -> None:
    """Add run, compare, history and import to ``app``."""

    @app.command()
    def run(
        label: Annotated[str, typer.Option("--label", "-l", rich_help_panel=_OUT,
            help="Comparison label shared by base and head (runs accumulate under it).")],
        side: Annotated[SideName | None, typer.Option("--side", rich_help_panel=_SIDES,
            help="Which side this checkout is (one side per run; the other runs elsewhere).")] = None,
        ab: Annotated[bool, typer.Option("--ab", rich_help_panel=_SIDES,
            help="Run both sides interleaved (A B, B A, ...) on this machine.")] = False,
        python: Annotated[str | None, typer.Option("--python", rich_help_panel=_SIDES,
            help="Interpreter of both sides (default: this one).")] = None,
        base_python: Annotated[str | None, typer.Option("--base-python", rich_help_panel=_SIDES,
            help="Interpreter of the base side.")] = None,
        head_python: Annotated[str | None, typer.Option("--head-python", rich_help_panel=_SIDES,
            help="Interpreter of the head side.")] = None,
        ref: Annotated[str | None, typer.Option("--ref", rich_help_panel=_SIDES,
            help="Ref recorded for this side (default: the checkout's commit).")] = None,
        base_ref: Annotated[str | None, typer.Option("--base-ref", rich_help_panel=_SIDES,
            help="Base side's ref (--ab): its benchmark files come from a worktree at it.")] = None,
        head_ref: Annotated[str | None, typer.Option("--head-ref", rich_help_panel=_SIDES,
            help="Head side's ref (--ab): its benchmark files come from a worktree at it.")] = None,
        build: Annotated[str | None, typer.Option("--build", rich_help_panel=_SIDES,
            help="With refs: build each side in its worktree and venv, cached by commit; one argv, "
                 "no shell, {python}: the side's interpreter.")] = None,
        base_wheel: Annotated[str | None, typer.Option("--base-wheel", rich_help_panel=_SIDES,
            help="Wheel installed into the base side's venv: a path or URL, {commit}: its commit.")] = None,
        head_wheel: Annotated[str | None, typer.Option("--head-wheel", rich_help_panel=_SIDES,
            help="Wheel installed into the head side's venv: a path or URL, {commit}: its commit.")] = None,
        sides_dir: Annotated[Path | None, typer.Option("--sides-dir", rich_help_panel=_SIDES,
            help="Cache of the sides' worktrees and venvs (default: .git/perfq/sides).")] = None,
        base_env: Annotated[list[str] | None, typer.Option("--base-env", rich_help_panel=_SIDES,
            help="KEY=VALUE set for the base side only (repeatable).")] = None,
        head_env: Annotated[list[str] | None, typer.Option("--head-env", rich_help_panel=_SIDES,
            help="KEY=VALUE set for the head side only (repeatable).")] = None,
        base_omp: Annotated[int | None, typer.Option("--base-omp-num-threads", rich_help_panel=_SIDES,
            help="OMP threads, base side only.")] = None,
        head_omp: Annotated[int | None, typer.Option("--head-omp-num-threads", rich_help_panel=_SIDES,
            help="OMP threads, head side only.")] = None,
        affected: Annotated[str | None, typer.Option("--affected", rich_help_panel=_WHAT,
            help="Run what `perfq affected REF` selects (its benchmarks and canary sets).")] = None,
        bench: Annotated[list[str] | None, typer.Option("--bench", rich_help_panel=_WHAT,
            help="Benchmark to run: file stem or script name (repeatable).")] = None,
        test: Annotated[list[str] | None, typer.Option("--test", rich_help_panel=_WHAT,
            help="Only these test names (with --bench; repeatable).")] = None,
        operators: Annotated[str | None, typer.Option("--operators", rich_help_panel=_WHAT,
            help="Comma list passed to the runner's --operators.")] = None,
        mode: Annotated[Mode | None, typer.Option("--mode", rich_help_panel=_WHAT,
            help="eager, compile or both (default eager).")] = None,
        device: Annotated[str, typer.Option("--device", rich_help_panel=_WHAT,
            help="Runner --device (cpu, cuda).")] = "cpu",
        tag_filter: Annotated[str, typer.Option("--tag-filter", rich_help_panel=_WHAT,
            help="Runner --tag-filter (short, long, all).")] = "short",
        bench_root: Annotated[Path | None, typer.Option("--bench-root", rich_help_panel=_WHAT,
            help="operator_benchmark root (default: benchmarks/operator_benchmark of the repo).")] = None,
        repeat: Annotated[int | None, typer.Option("--repeat", rich_help_panel=_REPEATS, min=1,
            help=f"Samples per test and side (default {defaults.REPEAT}; with sequential sampling, the first "
                 f"rounds: {defaults.ADAPTIVE_REPEAT}).")] = None,
        adaptive: Annotated[bool | None, typer.Option("--adaptive/--no-adaptive", rich_help_panel=_REPEATS,
            help="Sequential sampling (default with --ab): after --repeat rounds, re-run only the tests "
                 "not yet decided, until all are, --max-repeat or the budget.")] = None,
        max_repeat: Annotated[int, typer.Option("--max-repeat", rich_help_panel=_REPEATS, min=0,
            help="Sample ceiling per test and side (default: [tool.perfq.compare] max_samples, 20, and up to 5x that "
                 "for a test still undecided there while the budget lasts).")] = 0,
        budget: Annotated[str, typer.Option("--budget", rich_help_panel=_REPEATS,
            help="Time for the whole run (15m, 90s, 1h): the --affected plan fits it, adaptive rounds stop at it.")
            ] = DEFAULT_BUDGET,
        run_all: Annotated[bool, typer.Option("--all", rich_help_panel=_WHAT,
            help="With --affected: run every selected test (no budget, no plan cut).")] = False,
        shards: Annotated[int | None, typer.Option("--shards", rich_help_panel=_WHAT,
            help="With --affected: split the plan (N budgets) into N shards balanced by cost.")] = None,
        shard: Annotated[int | None, typer.Option("--shard", rich_help_panel=_WHAT,
            help="With --shards N: run shard K (1..N).")] = None,
        iterations: Annotated[int, typer.Option("--iterations", rich_help_panel=_RUNNER, min=0,
            help="Runner --iterations per measurement (0: the runner's own, slow, time-based count).")
            ] = defaults.ITERATIONS,
        num_runs: Annotated[int, typer.Option("--num-runs", rich_help_panel=_RUNNER, min=0,
            help="Runner --num-runs per invocation; the fastest becomes the sample (0: the runner's).")
            ] = defaults.NUM_RUNS,
        warmup: Annotated[int, typer.Option("--warmup-iterations", rich_help_panel=_RUNNER, min=0,
            help="Runner --warmup-iterations (0: the runner's own, 100).")] = defaults.WARMUP,
        omp: Annotated[int, typer.Option("--omp-num-threads", rich_help_panel=_RUNNER, min=0,
            help="OMP threads, both sides (0: leave unset; more than 1 is noisy on a shared machine).")
            ] = defaults.OMP_THREADS,
        mkl: Annotated[int | None, typer.Option("--mkl-num-threads", min=0, rich_help_panel=_RUNNER,
            help="MKL threads, both sides.")] = None,
        batch: Annotated[bool, typer.Option("--batch/--no-batch", rich_help_panel=_RUNNER,
            help="Run benchmark files with equal flags in one process per side and round.")] = True,
        timeout: Annotated[float, typer.Option("--timeout", callback=positive, rich_help_panel=_RUNNER,
            help="Seconds per benchmark invocation.")] = 900.0,
        sandbox: Annotated[bool, typer.Option("--sandbox", rich_help_panel=_RUNNER,
            help="Run the benchmarks contained (a PR's code in CI): scrubbed environment, own HOME/TMPDIR; "
                 "with bubblewrap also no network and a read-only file system.")] = False,
        priority: Annotated[Priority, typer.Option("--priority", metavar="PRIORITY", rich_help_panel=_RUNNER,
            help=PRIORITY_HELP)] = Priority.auto,
        out: Annotated[Path | None, typer.Option("--out", rich_help_panel=_OUT,
            help="Also write a portable result file (for perfq import).")] = None,
        fmt: Annotated[Format, typer.Option("--format", "-f", metavar="FORMAT", rich_help_panel=_OUT,
            help="How to print the result: " + FORMAT_HELP)] = Format.table,
        fail_on_regression: Annotated[bool, typer.Option("--fail-on-regression", rich_help_panel=_OUT,
            help=f"With --ab: exit {EXIT_GATE} when the comparison finds a regression.")] = False,
        repo: Path | None = RepoOption,
        history: Path | None = HistoryOption,
    ) -> None:
        """Run the selected benchmarks as one side (or both, --ab) of a labelled comparison.

        With --ab, sampling is sequential: after --repeat rounds only the tests not yet decided
        run again, until each is decided, --max-repeat or the budget (docs/run.md). Progress: one
        bar on a terminal, one line per finished invocation in CI logs.

        Examples:

            perfq run -l pr1 --ab --base-python base/bin/python --head-python head/bin/python --affected main

            perfq run --label pr1 --side head --bench softmax --test Softmax_N1_C3_H256_W256_cpu

            perfq run --label nightly-$(date +%F) --side head --bench softmax --bench sum --out nightly.json
        """
        from perfq.run import execute as runner
        from perfq.run import jobs as select
        from perfq.run.comparisons import comparison_for_label
        from perfq.run.machine import process_age
        from perfq.run.opbench import OpBenchSpec
        from perfq.run.plan import RunShape, check_shard, parse_duration
        from perfq.run.plan_render import print_plan
        from perfq.run.results import export_runs
        from perfq.run.sides import SourceOptions, prepare_sides

        if ab == (side is not None):
            raise PerfqError("give exactly one of --side base|head or --ab")
        if bool(affected) == bool(bench):
            raise PerfqError("give --affected REF or at least one --bench NAME")
        if adaptive is None:
            adaptive = ab
        if repeat is None:
            repeat = defaults.ADAPTIVE_REPEAT if adaptive else defaults.REPEAT
        if adaptive and not ab:
            raise PerfqError("--adaptive needs --ab (both sides in one run)")
        if fail_on_regression and not ab:
            raise PerfqError("--fail-on-regression needs --ab (a comparison); use perfq compare for one-side runs")
        if (shards is not None or shard is not None or run_all) and not affected:
            raise PerfqError("--all, --shards and --shard go with --affected REF (a plan)", exit_code=EXIT_USAGE)
        # the budget is the whole run's wall time: perfq's own start-up, side installs and builds count
        started = time.monotonic() - process_age()
        budget_seconds = None if run_all else parse_duration(budget)
        shard_k, shard_n = check_shard(shard, shards)
        sources = SourceOptions(tuple(build_argv(build) or ()), base_wheel, head_wheel, sides_dir)
        if sources.wanted and not ab:
            raise PerfqError("--build and --base-wheel/--head-wheel need --ab (both sides in one run)")
        repo_path = resolve_repo(repo)
        cfg = load_config(repo_path)
        root = select.benchmark_root(repo_path, cfg, bench_root)
        base_spec = OpBenchSpec(name="", device=device, tag_filter=tag_filter, iterations=iterations or None,
                                num_runs=num_runs or None, warmup_iterations=warmup or None,
                                omp_num_threads=omp or None, mkl_num_threads=mkl)
        shape = RunShape(rounds=repeat, sides=2 if ab else 1, batch=batch, shards=shard_n, device=device,
                         iterations=runner.timed_iterations(base_spec))
        selection = select.Selection(affected, tuple(bench or ()), tuple(test or ()),
                                     tuple(o for o in (operators or "").split(",") if o), mode.value if mode else None,
                                     budget_seconds, shape, shard_k)
        jobs, notes, test_plan = select.select_jobs(repo_path, cfg, root, selection, base_spec,
                                                    python or base_python or select.default_python())
        if sandbox:
            notes.append(runner.sandbox_note())
        priority_notes: list[str] = []  # stored with the run; the terminal's priority line says it before the rounds
        realtime = sched.use_realtime(priority, priority_notes)
        err = console(stderr=True)
        if test_plan is not None:  # printed before anything runs
            print_plan(err, test_plan, _interactive())
            if shard_n > 1:
                err.print(f"shard {shard_k} of {shard_n}", markup=False)
        for note in notes:
            err.print(f"note: {plain(note)}", markup=False)
        if not jobs:
            # e.g. a compile-mode matrix entry on a runner without --use-compile: not an error in CI
            err.print("nothing to run: no benchmark selected")
            if out is not None:
                export_runs([], out)
            _render_run(label, [], None, fmt)
            return
        sides = select.make_sides(ab, side.value if side else None, select.SideOptions(
            python, base_python, head_python, select.parse_env(base_env), select.parse_env(head_env), base_omp,
            head_omp, ref, base_ref, head_ref, wheels=bool(base_wheel or head_wheel)))
        preparing = time.monotonic()
        if ab:
            sides = prepare_sides(repo_path, sides, sources, root, log=lambda line: err.print(line, markup=False))
        preparing = time.monotonic() - preparing
        if test_plan is not None and budget_seconds is not None and preparing > REPLAN_AFTER * budget_seconds:
            left = max(budget_seconds - (time.monotonic() - started), 1.0)
            jobs, _, test_plan = select.select_jobs(repo_path, cfg, root, replace(selection, budget_seconds=left),
                                                    base_spec, python or base_python or select.default_python())
            err.print(f"note: preparing the sides took {preparing:.0f} s of the budget; the plan was made again "
                      f"for the remaining {left:.0f} s ({len(jobs)} job(s))", markup=False)
        plan = runner.Plan(
            label=label,
            jobs=jobs,
            sides=sides,
            repeat=repeat,
            bench_root=root,
            repo=repo_path,
            history=resolve_history(repo_path, history),
            out=out,
            adaptive=adaptive,
            max_repeat=max_repeat,
            budget_seconds=budget_seconds,
            started=started,
            batch=batch,
            timeout=timeout,
            sandbox=sandbox,
            realtime=realtime,
            settings=_settings(repo_path, max_samples=max_repeat or None),
            command=shlex.join(["perfq", *sys.argv[1:]]),
            notes=notes + priority_notes,
        )
        if ab:  # a side that cannot import torch and the harness fails here, before the first round
            runner.check_sides(plan)
        err.print(priority_line(priority, realtime), markup=False, soft_wrap=True)  # just before the rounds
        runs = _execute(plan)
        if fmt == Format.table:
            for r in runs:
                err.print(
                    f"{r.side}: {len(r.samples)} samples, {len(r.failures)} failed invocation(s), "
                    f"torch {r.torch_version or '?'}, run {r.id}"
                )
                for f in r.failures:
                    tail = f.stderr_tail.splitlines()[-1] if f.stderr_tail else ""
                    err.print(f"  [red]failed[/red] {escape(plain(f'{f.benchmark}: {tail}'))}")
        doc = comparison_for_label(plan.history, label, plan.settings) if ab else None
        _render_run(label, runs, doc, fmt)
        if any(r.failures for r in runs):  # crashed benchmarks fail the run (results and --out are written)
            raise typer.Exit(EXIT_GATE)
        if fail_on_regression and doc is not None and doc.gate_fails():
            raise typer.Exit(EXIT_GATE)

    @app.command()
    def compare(
        label: Annotated[str, typer.Argument(help="Label given to perfq run.")],
        baseline: Annotated[str | None, typer.Option("--baseline", "-b", rich_help_panel=_WHAT_CMP, help=(
            "Compare LABEL's head (or only) side with another stored run: OTHER or OTHER:base|head "
            "(default side: head, or OTHER's only side)."))] = None,
        fmt: Annotated[CompareFormat, typer.Option("--format", "-f", metavar="FORMAT", rich_help_panel=_OUT,
            help=FORMAT_HELP + " pytorch-benchmark: PyTorch's benchmark database records, every sample "
            "(perfq import reads them).")] = CompareFormat.table,
        alpha: Annotated[float | None, typer.Option("--alpha", rich_help_panel=_STATS, callback=_checked_threshold,
            help="False discovery rate (default 0.05, or [tool.perfq.compare] alpha).")] = None,
        min_effect: Annotated[float | None, typer.Option("--min-effect", rich_help_panel=_STATS,
            callback=_checked_threshold, help="Minimum relative change for a verdict (default 0.05).")] = None,
        fail_on_regression: Annotated[bool, typer.Option("--fail-on-regression", rich_help_panel=_OUT,
            help=f"Exit {EXIT_GATE} on a regression, a failed benchmark or a side without a run.")] = False,
        repo: Path | None = RepoOption,
        history: Path | None = HistoryOption,
    ) -> None:
        """Compare the head side of LABEL against its base side, or against a stored baseline run.

        Examples:

            perfq compare pr123

            perfq compare pr123 --format markdown > comment.md

            perfq compare pr123 --baseline nightly-2024-06-01        # against last night's main run

            perfq compare pr123 --fail-on-regression --min-effect 0.1

            perfq compare pr123 --format pytorch-benchmark > records.json   # PyTorch's benchmark database
        """
        from perfq.run.comparisons import compared_runs, comparison_against, comparison_for_label

        repo_path = resolve_repo(repo)
        settings = _settings(repo_path, alpha, min_effect)
        path = resolve_history(repo_path, history)
        doc = (comparison_against(path, label, baseline, settings) if baseline
               else comparison_for_label(path, label, settings))
        if fmt == CompareFormat.pytorch_benchmark:
            from perfq.run import pytorch_benchmark

            sys.stdout.write(pytorch_benchmark.dumps(pytorch_benchmark.comparison_records(
                doc, compared_runs(path, doc, (label, (baseline or "").partition(":")[0])))))
        else:
            _render_comparison(doc, Format(fmt.value))
        if fail_on_regression and doc.gate_fails():
            raise typer.Exit(EXIT_GATE)

    @app.command("history")
    def history_cmd(
        bench: Annotated[str, typer.Argument(help="Benchmark (file stem) to show.")],
        test: Annotated[str | None, typer.Option("--test", rich_help_panel=_WHAT_CMP, help="Only this test.")] = None,
        label: Annotated[str | None, typer.Option("--label", rich_help_panel=_WHAT_CMP,
            help="Only runs whose label matches this glob (e.g. 'nightly-*').")] = None,
        side: Annotated[SideName | None, typer.Option("--side", rich_help_panel=_WHAT_CMP,
            help="Only base or only head runs (default: both).")] = None,
        runs: Annotated[bool, typer.Option("--runs", rich_help_panel=_OUT,
            help="One row per run and test instead of one trend per test.")] = False,
        min_effect: Annotated[float, typer.Option("--min-effect", rich_help_panel=_STATS, min=0.0,
            help="Smallest level shift reported as a step (relative).")] = 0.05,
        fmt: Annotated[Format, typer.Option("--format", "-f", metavar="FORMAT", rich_help_panel=_OUT, help=FORMAT_HELP)
                       ] = Format.table,
        repo: Path | None = RepoOption,
        history: Path | None = HistoryOption,
    ) -> None:
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
        from schema.results_store import history_rows

        bench = normalize_name(bench)
        rows = [r for r in history_rows(resolve_history(resolve_repo(repo), history), bench, test)
                if (label is None or fnmatch.fnmatchcase(r.label, label)) and (side is None or r.side == side.value)]
        if not rows:
            raise PerfqError(f"no stored results for {bench}" + (f" test {test}" if test else "")
                             + (" matching the filters" if label or side else ""))
        doc = HistoryDocument(bench, tuple(rows), tuple(trends_from_rows(rows, min_effect)))
        what = "".join(f" ({x})" for x in (label, side.value if side else None) if x)
        _render_history(doc, fmt, runs, what)

    @app.command("import")
    def import_cmd(
        files: Annotated[list[Path], typer.Argument(help="Result files (perfq run --out, or history DuckDB files).")],
        fmt: Annotated[Format, typer.Option("--format", "-f", metavar="FORMAT",
                                            help="How to print the counts: " + FORMAT_HELP)
                       ] = Format.table,
        repo: Path | None = RepoOption,
        history: Path | None = HistoryOption,
    ) -> None:
        """Merge result files from other machines into the history (idempotent).

        Examples:

            perfq import results/*.json

            perfq import other-machine/history.duckdb --history merged.duckdb --format json
        """
        from perfq.run.results import import_files
        from perfq.run.summaries import ImportDocument

        target = resolve_history(resolve_repo(repo), history)
        doc = ImportDocument.from_counts(import_files(target, files), target)
        if fmt == Format.json:
            print_json(doc.to_json())
        elif fmt == Format.markdown:
            print(doc.markdown())
        else:
            print(doc.line())


def _execute(plan):
    """Run the plan with feedback (a bar on a terminal, plain lines in CI); Ctrl-C -> one-line error, runs kept."""
    from perfq.run import execute as runner
    from perfq.run.progress import RunFeedback

    try:
        with RunFeedback(runner.planned_invocations(plan), plan.repeat, _interactive()) as feedback:
            return runner.execute(plan, feedback)
    except KeyboardInterrupt:
        raise PerfqError(
            f"interrupted: finished samples kept in {plan.history}, runs of label {plan.label!r} marked incomplete",
            exit_code=EXIT_INTERRUPTED,
        ) from None


def _render_run(label: str, runs, doc, fmt: Format) -> None:
    """What `perfq run` prints: the comparison (--ab) as asked, or the runs' summary (one side)."""
    from perfq.run.summaries import RunDocument

    if fmt == Format.table:
        if doc is not None:
            _render_comparison(doc, fmt)
        return
    summary = RunDocument.from_runs(label, runs, doc)
    if fmt == Format.json:
        print_json(summary.to_json())
    else:
        sys.stdout.write(summary.markdown())
