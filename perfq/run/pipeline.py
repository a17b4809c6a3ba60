"""`perfq run` as a function: a typed request through named stages, plan -> sample -> decide -> store -> report.

``perfq.run.cli`` turns the command line into a :class:`RunRequest` and calls :func:`run_benchmarks`;
anything else (a script, a test, another tool) may call it the same way. The stages print to
stderr what the command prints there (the plan, notes, progress, the priority line) and the
report goes to stdout, as the command's does.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

from rich.console import Console
from rich.markup import escape

from common import sched
from common.build import build_argv
from common.config import Config, load_config
from common.errors import PerfqError
from common.render import plain, print_json
from common.sched import Priority
from perfq.options import EXIT_GATE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, Format, resolve_history, resolve_repo
from perfq.run import defaults
from perfq.run.compare_labels import comparison_for_label, settings
from perfq.run.execute import (
    Job,
    RunSpec,
    SideSetup,
    check_sides,
    execute,
    planned_invocations,
    sandbox_note,
    timed_iterations,
)
from perfq.run.jobs import Selection, SideOptions, benchmark_root, default_python, make_sides, parse_env, select_jobs
from perfq.run.opbench import OpBenchSpec
from perfq.run.plan import DEFAULT_BUDGET, RunShape, TestPlan, check_shard, parse_duration
from perfq.run.plan_view import print_plan
from perfq.run.progress import RunFeedback
from perfq.run.report import ComparisonDocument
from perfq.run.results import export_runs
from perfq.run.run_report import RunDocument
from perfq.run.runs import Run
from perfq.run.sides import SourceOptions, prepare_sides
from perfq.run.views import print_comparison_as
from perfq.terminal import console

REPLAN_AFTER = 0.02  # preparing the sides took more than this share of the budget: the plan is made again to fit


@dataclass(frozen=True)
class RunRequest:
    """What `perfq run` is asked to do: its command line as values (``None``: the option's default)."""

    label: str
    side: str | None = None  # base | head: the one side this checkout is; None with ``ab``
    ab: bool = False  # both sides, interleaved, on this machine
    sides: SideOptions = SideOptions()  # interpreters, thread counts, refs; the environments come from:
    base_env: tuple[str, ...] = ()  # KEY=VALUE (checked when the sides are made)
    head_env: tuple[str, ...] = ()
    build: str | None = None  # --build's argv template (split when the request is planned)
    sources: SourceOptions = SourceOptions()  # wheels and the sides' cache (its ``build`` comes from ``build``)
    affected: str | None = None
    benches: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()
    operators: str | None = None  # comma list
    mode: str | None = None  # eager | compile | both
    bench_root: Path | None = None
    runner: OpBenchSpec = OpBenchSpec("")  # the runner's flags for every operator_benchmark job
    repeat: int | None = None
    adaptive: bool | None = None  # None: with ``ab``
    max_repeat: int = 0
    budget: str = DEFAULT_BUDGET
    run_all: bool = False
    shards: int | None = None
    shard: int | None = None
    batch: bool = True
    timeout: float = 900.0
    sandbox: bool = False
    priority: Priority = Priority.auto
    out: Path | None = None
    fmt: Format = Format.table
    started: float | None = None  # when the command started (time.monotonic()); None: when it is planned
    fail_on_regression: bool = False
    repo: Path | None = None
    history: Path | None = None
    command: str = ""  # the command line, recorded with the runs


@dataclass(frozen=True)
class RunOutcome:
    """What a run ended with: its runs, the comparison (``ab``), and the command's exit status."""

    runs: tuple[Run, ...]
    comparison: ComparisonDocument | None
    exit_code: int


class Rounds(NamedTuple):
    """How many rounds a request runs and for how long: its checked repeat, budget and shard."""

    repeat: int
    adaptive: bool
    budget_seconds: float | None
    shard: int
    shards: int


def run_benchmarks(request: RunRequest) -> RunOutcome:
    """Run ``request``: plan -> sample -> decide -> store -> report; the outcome says the exit status."""
    plan = plan_run(request)
    runs = sample(plan, request.fmt)
    comparison = decide(plan, request.ab)
    store(plan, runs)
    report(request, runs, comparison)
    return RunOutcome(tuple(runs), comparison, exit_code(request, runs, comparison))


def priority_line(priority: Priority, realtime: bool) -> str:
    """The one line every run prints: the priority its benchmark processes get, and why."""
    if realtime:
        return (f"priority: real-time ({sched.describe(True)}, --priority {priority.value}: permitted here), "
                "so other load on this machine cannot preempt the benchmarks")
    why = "--priority normal" if priority == Priority.normal else "real-time scheduling is not permitted here"
    return f"priority: normal (SCHED_OTHER, {why}), so other load on this machine adds noise"


def interactive() -> bool:
    """A person watches stderr (a terminal outside CI): a rich table and a bar, else plain lines."""
    return sys.stderr.isatty() and os.environ.get("CI", "").lower() not in ("true", "1")


# --- plan: the request checked, the jobs selected, the sides prepared ----------------------------------------


def plan_run(request: RunRequest) -> RunSpec:
    """The run's plan; one with no jobs when nothing is selected (said on stderr, nothing prepared)."""
    # the budget is the whole run's wall time: perfq's own start-up, side installs and builds count
    started = request.started if request.started is not None else time.monotonic()
    rounds = checked_rounds(request)
    sources = replace(request.sources, build=tuple(build_argv(request.build) or ()))
    if sources.wanted and not request.ab:
        raise PerfqError("--build and --base-wheel/--head-wheel need --ab (both sides in one run)")
    repo = resolve_repo(request.repo)
    cfg = load_config(repo)
    root = benchmark_root(repo, cfg, request.bench_root)
    selection = _selection(request, rounds, root)
    jobs, notes, test_plan = _select(request, repo, cfg, root, selection)
    if request.sandbox:
        notes.append(sandbox_note())
    priority_notes: list[str] = []  # stored with the run; the priority line says it before the rounds
    realtime = sched.use_realtime(request.priority, priority_notes)
    err = console(stderr=True)
    _say_plan(err, test_plan, rounds, notes)
    if not jobs:  # e.g. a compile-mode matrix entry on a runner without --use-compile: not an error in CI
        err.print("nothing to run: no benchmark selected")
        return RunSpec(label=request.label, jobs=[], sides=[], out=request.out)
    sides, jobs = _prepared_sides(request, repo, cfg, root, selection, sources, started, jobs, test_plan, err)
    plan = RunSpec(label=request.label, jobs=jobs, sides=sides, repeat=rounds.repeat, bench_root=root, repo=repo,
                history=resolve_history(repo, request.history), out=request.out, adaptive=rounds.adaptive,
                max_repeat=request.max_repeat, budget_seconds=rounds.budget_seconds, started=started,
                batch=request.batch, timeout=request.timeout, sandbox=request.sandbox, realtime=realtime,
                settings=settings(repo, max_samples=request.max_repeat or None), command=request.command,
                notes=notes + priority_notes)
    if request.ab:  # a side that cannot import torch and the harness fails here, before the first round
        check_sides(plan)
    err.print(priority_line(request.priority, realtime), markup=False, soft_wrap=True)  # just before the rounds
    return plan


def checked_rounds(request: RunRequest) -> Rounds:
    """The request's options checked against each other; its repeat, sampling, budget and shard."""
    if request.ab == (request.side is not None):
        raise PerfqError("give exactly one of --side base|head or --ab")
    if bool(request.affected) == bool(request.benches):
        raise PerfqError("give --affected REF or at least one --bench NAME")
    adaptive = request.ab if request.adaptive is None else request.adaptive
    repeat = request.repeat or (defaults.ADAPTIVE_REPEAT if adaptive else defaults.REPEAT)
    if adaptive and not request.ab:
        raise PerfqError("--adaptive needs --ab (both sides in one run)")
    if request.fail_on_regression and not request.ab:
        raise PerfqError("--fail-on-regression needs --ab (a comparison); use perfq compare for one-side runs")
    if (request.shards is not None or request.shard is not None or request.run_all) and not request.affected:
        raise PerfqError("--all, --shards and --shard go with --affected REF (a plan)", exit_code=EXIT_USAGE)
    budget_seconds = None if request.run_all else parse_duration(request.budget)
    shard, shards = check_shard(request.shard, request.shards)
    return Rounds(repeat, adaptive, budget_seconds, shard, shards)


def _selection(request: RunRequest, rounds: Rounds, root: Path) -> Selection:
    shape = RunShape(rounds=rounds.repeat, sides=2 if request.ab else 1, batch=request.batch, shards=rounds.shards,
                     device=request.runner.device, iterations=timed_iterations(request.runner))
    operators = tuple(o for o in (request.operators or "").split(",") if o)
    return Selection(request.affected, request.benches, request.tests, operators, request.mode,
                     rounds.budget_seconds, shape, rounds.shard)


def _select(request: RunRequest, repo: Path, cfg: Config, root: Path,
            selection: Selection) -> tuple[list[Job], list[str], TestPlan | None]:
    python = request.sides.python or request.sides.base_python or default_python()
    return select_jobs(repo, cfg, root, selection, request.runner, python)


def _say_plan(err: Console, test_plan: TestPlan | None, rounds: Rounds, notes: list[str]) -> None:
    """The budgeted plan (``--affected``) and the notes, printed before anything runs."""
    if test_plan is not None:
        print_plan(err, test_plan, interactive())
        if rounds.shards > 1:
            err.print(f"shard {rounds.shard} of {rounds.shards}", markup=False)
    for note in notes:
        err.print(f"note: {plain(note)}", markup=False)


def _prepared_sides(request: RunRequest, repo: Path, cfg: Config, root: Path, selection: Selection,
                    sources: SourceOptions, started: float, jobs: list[Job], test_plan: TestPlan | None,
                    err: Console) -> tuple[list[SideSetup], list[Job]]:
    """The sides (with ``ab``: worktrees, venvs, builds prepared); the jobs planned again when that took
    more than REPLAN_AFTER of the budget."""
    options = replace(request.sides, base_env=parse_env(list(request.base_env)),
                      head_env=parse_env(list(request.head_env)))
    sides = make_sides(request.ab, request.side, options)
    preparing = time.monotonic()
    if request.ab:
        sides = prepare_sides(repo, sides, sources, root, log=lambda line: err.print(line, markup=False))
    preparing = time.monotonic() - preparing
    budget = selection.budget_seconds
    if test_plan is not None and budget is not None and preparing > REPLAN_AFTER * budget:
        left = max(budget - (time.monotonic() - started), 1.0)
        jobs, _, test_plan = _select(request, repo, cfg, root, replace(selection, budget_seconds=left))
        err.print(f"note: preparing the sides took {preparing:.0f} s of the budget; the plan was made again "
                  f"for the remaining {left:.0f} s ({len(jobs)} job(s))", markup=False)
    return sides, jobs


# --- sample, decide, store ------------------------------------------------------------------------------------


def sample(plan: RunSpec, fmt: Format) -> list[Run]:
    """The rounds run with feedback (a bar on a terminal, plain lines in CI); each side's failures said on a
    terminal. The history and ``--out`` are saved after every invocation (a Ctrl-C keeps them: one-line error)."""
    if not plan.jobs:
        return []
    try:
        with RunFeedback(planned_invocations(plan), plan.repeat, interactive()) as feedback:
            runs = execute(plan, feedback)
    except KeyboardInterrupt:
        raise PerfqError(
            f"interrupted: finished samples kept in {plan.history}, runs of label {plan.label!r} marked incomplete",
            exit_code=EXIT_INTERRUPTED,
        ) from None
    if fmt == Format.table:
        _say_sides(console(stderr=True), runs)
    return runs


def _say_sides(err: Console, runs: list[Run]) -> None:
    for r in runs:
        err.print(f"{r.side}: {len(r.samples)} samples, {len(r.failures)} failed invocation(s), "
                  f"torch {r.torch_version or '?'}, run {r.id}")
        for f in r.failures:
            tail = f.stderr_tail.splitlines()[-1] if f.stderr_tail else ""
            err.print(f"  [red]failed[/red] {escape(plain(f'{f.benchmark}: {tail}'))}")


def decide(plan: RunSpec, ab: bool) -> ComparisonDocument | None:
    """The verdicts of both sides (``ab``), read back from the history the sampling saved them to."""
    if not ab or not plan.jobs or plan.history is None:
        return None
    return comparison_for_label(plan.history, plan.label, plan.settings)


def store(plan: RunSpec, runs: list[Run]) -> None:
    """The result file of a run that sampled nothing (``--out``: an empty one, as CI's artifact upload expects);
    the sampling stored every other run's history and result file after each invocation."""
    if not plan.jobs and plan.out is not None:
        export_runs(runs, plan.out)


# --- report ---------------------------------------------------------------------------------------------------


def report(request: RunRequest, runs: list[Run], comparison: ComparisonDocument | None) -> None:
    """What `perfq run` prints on stdout: the comparison (``ab``) as asked, or the runs' summary (one side)."""
    if request.fmt == Format.table:
        if comparison is not None:
            print_comparison_as(comparison, Format.table)
        return
    summary = RunDocument.from_runs(request.label, runs, comparison)
    if request.fmt == Format.json:
        print_json(summary.to_json())
    else:
        sys.stdout.write(summary.markdown())


def exit_code(request: RunRequest, runs: list[Run], comparison: ComparisonDocument | None) -> int:
    """EXIT_GATE when a benchmark crashed (results and ``--out`` are written) or, with ``--fail-on-regression``,
    the comparison fails the gate."""
    if any(r.failures for r in runs):
        return EXIT_GATE
    if request.fail_on_regression and comparison is not None and comparison.gate_fails():
        return EXIT_GATE
    return EXIT_OK
