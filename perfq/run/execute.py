"""Orchestrate `perfq run`: pick jobs, repeat them (A/B interleaved), record samples and failures.

A *job* is one benchmark file (operator_benchmark ``pt/<name>.py`` or a configured script)
restricted to its selected tests, in one mode. One invocation of a job on one side gives
one sample per test; ``repeat`` rounds run every job once per side, sides interleaved in
alternating order (A B, B A, A B ...: :func:`round_sides`) so slow drifts of the machine hit both
sides alike and whatever the second process of a pair gains (a warm page cache, a settled clock)
falls on each side half of the time instead of always on the head. Samples are saved after
every invocation; Ctrl-C keeps them and marks the runs incomplete. A failing invocation is
recorded with its stderr tail and that job is not retried on that side; the run goes on.

The history is shared with readers (``perfq history``/``compare`` while a run goes on): a save
waits a little for them and, if the file stays busy, is retried after the next invocation (saves
are idempotent); the last save waits longer. Whatever stops the run (Ctrl-C, an error), its runs
are finalised (``incomplete``) and saved before the exception propagates: no run is left ``running``.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import TypeVar

from common import git, proc, sched
from common.errors import PerfqError
from common.interrupt import interruption
from common.sandbox import Sandbox, bwrap_problem
from perfq.run import defaults, opbench
from perfq.run.compare import (
    Settings,
    SideFailures,
    TestKey,
    columns_from_pairs,
    compare_columns,
    higher_is_better,
)
from perfq.run.machine import Contention, interpreters_info, machine_info, repo_info, side_env, snapshot
from perfq.run.opbench import Measurement, OpBenchSpec, RunnerCaps
from perfq.run.results import export_runs
from perfq.run.runs import Run, now
from perfq.run.script_bench import ScriptBench, output_line_needed, parse_output
from perfq.run.store import save_runs
from schema.db import DatabaseLocked
from schema.results_rows import RunStatus

_T = TypeVar("_T")

MAX_BATCH_FILES = 8  # files per batch process: its samples are stored when it ends (a 37-file batch ran > 10 min)
FINISH_SHARE = 0.03  # the rounds end by 97% of the budget: the last save, the comparison and its output take the rest
EXTENDED_CEILING = 5  # with a budget and no --max-repeat, an `unknown` test samples on up to this x max_samples
SAVE_WAIT = 1.0  # seconds a save during the run waits for readers before it is deferred (to the next save)
FINAL_SAVE_WAIT = 120.0  # the last save waits this long


@dataclass(frozen=True)
class SideSetup:
    """One side of the comparison: its name, interpreter and extra environment/options."""

    name: str
    python: str
    env: tuple[tuple[str, str], ...] = ()
    omp_num_threads: int | None = None
    mkl_num_threads: int | None = None
    ref: str = ""
    source: Path | None = None  # the side's worktree (its ref's files); None: the repository
    bench_root: Path | None = None  # its operator_benchmark root; None: the plan's
    provenance: tuple[tuple[str, str], ...] = ()  # what the side runs (perfq.run.sides), kept in runs.env


@dataclass(frozen=True)
class Job:
    """One benchmark file (or script) with its selected tests, in one mode."""

    benchmark: str
    spec: OpBenchSpec | None = None
    script: ScriptBench | None = None
    members: tuple[Job, ...] = ()  # a batch: several files run in one process

    @property
    def key(self) -> tuple[str, str]:
        """Identity across rounds (adaptive rounds narrow the tests, not the key)."""
        return (self.benchmark, self.spec.mode if self.spec else "")

    @property
    def title(self) -> str:
        spec = self.spec
        if self.members:
            return f"{len(self.members)} files [{spec.mode if spec else ''}]: {self.benchmark}"
        if spec is None:
            return self.benchmark
        what = f"{len(spec.tests)} tests" if spec.tests else "all tests"
        return f"{self.benchmark} [{spec.mode}, {what}]"


@dataclass
class RunSpec:
    """Everything a run needs."""

    label: str
    jobs: list[Job]
    sides: list[SideSetup]
    repeat: int = 5
    bench_root: Path = Path(".")
    repo: Path = Path(".")
    history: Path | None = None
    out: Path | None = None
    adaptive: bool = False
    max_repeat: int = 0  # adaptive ceiling (samples per side per test); 0: :func:`sample_ceiling`
    budget_seconds: float | None = None  # the whole run's wall time (side installs included); None: no budget
    started: float = field(default_factory=time.monotonic)  # when the budget's clock started (the command's start)
    batch: bool = False  # run operator_benchmark files with equal flags in one process
    timeout: float = 900.0
    sandbox: bool = False  # run the benchmarks contained (common.sandbox): a PR's code in CI
    realtime: bool = False  # benchmark processes under SCHED_FIFO (common.sched)
    settings: Settings = field(default_factory=Settings)
    command: str = ""
    notes: list[str] = field(default_factory=list)


@dataclass
class InvocationResult:
    """What one invocation produced."""

    measurements: list[Measurement]
    returncode: int | None
    stderr_tail: str
    argv: list[str]
    error: str = ""
    contention: Contention | None = None  # what the machine did while the process ran


def side_spec(spec: OpBenchSpec, side: SideSetup) -> OpBenchSpec:
    """The job's spec with the side's thread settings applied."""
    return replace(
        spec,
        omp_num_threads=side.omp_num_threads or spec.omp_num_threads,
        mkl_num_threads=side.mkl_num_threads or spec.mkl_num_threads,
    )


@dataclass(frozen=True)
class Spawned:
    """One benchmark process: its exit status, output, why it failed, and the contention it ran under."""

    returncode: int | None
    stdout: str
    stderr: str
    error: str
    contention: Contention


def _spawn(argv: list[str], cwd: Path, env: dict[str, str], plan: RunSpec, box: Sandbox | None,
           keep: Callable[[str], bool] = opbench.output_line_needed) -> Spawned:
    """One process (its output capped, keeping the lines ``keep`` accepts; contained in ``box`` when given;
    under the plan's timeout and scheduling), with the machine's counters read around it;
    Ctrl-C or SIGTERM kills its process group and propagates."""
    box = box or Sandbox(cwd, use_bwrap=False)  # no box: argv as it is
    before = snapshot()
    with box.launch(argv) as launch:
        res = proc.run(launch.argv, cwd=cwd, env=env, timeout=plan.timeout, keep=keep, realtime=plan.realtime,
                       pass_fds=launch.pass_fds, reap_orphans=True)
    return Spawned(res.returncode, res.stdout, res.stderr, res.error, Contention.between(before, snapshot(), res.usage))


def sandbox_note() -> str:
    """What ``--sandbox`` contains, for the run's notes; a PerfqError when the sandbox cannot be
    had here (a benchmark run with less than it asked for is never a silent downgrade)."""
    problem = bwrap_problem()
    if problem:
        raise PerfqError(f"--sandbox: the benchmarks cannot be contained here ({problem}); install bubblewrap, "
                         "or run without --sandbox only code you trust")
    return ("sandboxed: bubblewrap (no network, read-only file system, unprivileged user without capabilities, "
            "seccomp filter, scrubbed environment)")


def _box(plan: RunSpec, side: SideSetup, scratch: Path) -> Sandbox | None:
    """The sandbox of one invocation (``--sandbox``): it reads the repo, the benchmarks and the
    side's Python, and writes only ``scratch``."""
    if not plan.sandbox:
        return None
    python = Path(side.python)
    readable = (plan.repo, plan.bench_root, python.parent, python.resolve().parent.parent)
    own = tuple(path for path in (side.source, side.bench_root) if path is not None)  # a ref's worktree
    return Sandbox(scratch, readable + own)


def _outcome(found: list[Measurement], rc: int | None, out: str, err: str, argv: list[str],
             error: str, contention: Contention | None = None) -> InvocationResult:
    negative = [m for m in found if m.value < 0 and not higher_is_better(m.metric, m.unit)]
    found = [m for m in found if math.isfinite(m.value) and m not in negative]  # nan/inf/-5 us: no measurement
    if not error and rc != 0:
        error = f"exit status {rc}"
    elif not error and negative:
        error = f"negative time(s) in the output ({negative[0].test}: {negative[0].value:g} {negative[0].unit})"
    elif not error and not found:
        error = "no measurement found in the output"
    return InvocationResult(found, rc, proc.tail(err or out), argv, error, contention)


def invoke(job: Job, side: SideSetup, plan: RunSpec, caps: RunnerCaps) -> list[tuple[Job, InvocationResult]]:
    """Run one job once on one side; a batch job gives one outcome per member file."""
    with proc.scratch_dir("run") as tmp:
        return _invoke(job, side, plan, caps, tmp, _box(plan, side, tmp))


def _invoke(job: Job, side: SideSetup, plan: RunSpec, caps: RunnerCaps, tmp: Path,
            box: Sandbox | None) -> list[tuple[Job, InvocationResult]]:
    env = box.env(os.environ) if box is not None else dict(os.environ)  # perfq's own, scrubbed when contained
    env.update(allocator_env())
    env.update(dict(side.env))
    env.setdefault("PYTHONUNBUFFERED", "1")
    if job.script is not None:
        argv = job.script.argv(side.python)
        script = job.script
        ran = _spawn(argv, script.workdir(side.source or plan.repo), env, plan, box,
                     lambda line: output_line_needed(script, line))
        return [(job, _outcome(parse_output(job.script, ran.stdout), ran.returncode, ran.stdout, ran.stderr, argv,
                               ran.error, ran.contention))]
    # a lone file with several tests or all of them runs through the batch wrapper too (exact test filter, tags)
    members = job.members or ((job,) if job.spec is not None and opbench.runs_wrapped(job.spec) else ())
    if members:
        specs = [side_spec(m.spec, side) for m in members if m.spec is not None]
        argv, extra = opbench.build_batch_command(side.python, specs, caps)
        env.update(extra)
        ran = _spawn(argv, side.bench_root or plan.bench_root, env, plan, box)
        rc, out, err = ran.returncode, ran.stdout, ran.stderr
        parsed = opbench.parse_batch(out, specs)
        results = []
        for member, spec in zip(members, specs, strict=True):
            found, failed = parsed[opbench.normalize_name(spec.name)]
            outcome = _outcome(found, 0 if failed == "" and rc == 0 else rc, out, err, argv, ran.error or failed,
                               ran.contention)
            if failed:
                outcome.returncode = rc if rc else 1
                outcome.stderr_tail = f"{failed}\n{proc.tail(err)}".strip()
            results.append((member, outcome))
        return results
    assert job.spec is not None
    spec = side_spec(job.spec, side)
    json_file = tmp / "out.json" if caps.output_json else None
    argv, _ = opbench.build_command(side.python, spec, caps, json_file)
    env.update(opbench.thread_env(spec))
    ran = _spawn(argv, side.bench_root or plan.bench_root, env, plan, box)
    found = opbench.parse_invocation(ran.stdout, spec, json_file)
    return [(job, _outcome(found, ran.returncode, ran.stdout, ran.stderr, argv, ran.error, ran.contention))]


_UNIT_SECONDS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "ns": 1e-9}
RUNNER_WARMUP = 100  # the operator_benchmark runner's warmup iterations when none is passed


def timed_iterations(spec: OpBenchSpec | None) -> int:
    """Iterations one invocation times per test: warm-up, then iterations x runs (the runner's defaults: 100, 1)."""
    if spec is None:
        return 1
    warmup = RUNNER_WARMUP if spec.warmup_iterations is None else spec.warmup_iterations
    return warmup + (spec.iterations or 1) * (spec.num_runs or 1)


def test_shares(wall: float, outcomes: list[tuple[Job, InvocationResult]]) -> dict[tuple[str, str], float]:
    """Each measured test's share of an invocation's wall: its timed iterations (per-iteration time x
    iterations), plus an even part of the rest (process start, imports, set-up)."""
    compute: dict[tuple[str, str], float] = {}
    for job, outcome in outcomes:
        for m in outcome.measurements:
            seconds = m.value * _UNIT_SECONDS.get(m.unit, 1e-6) * timed_iterations(job.spec)
            key = (job.benchmark, m.test)
            compute[key] = compute.get(key, 0.0) + seconds  # forward and backward of one test add up
    if not compute:
        return {}
    scale = min(1.0, wall / sum(compute.values())) if sum(compute.values()) else 1.0
    rest = max(0.0, wall - sum(compute.values())) / len(compute)
    return {key: seconds * scale + rest for key, seconds in compute.items()}


def batch_jobs(jobs: list[Job]) -> list[Job]:
    """Group operator_benchmark jobs with the same runner flags into one-process batch jobs of at most
    ``MAX_BATCH_FILES`` files, so that samples are stored every few minutes, not once per round."""
    order: list[tuple | Job] = []
    groups: dict[tuple, list[Job]] = {}
    for job in jobs:
        if job.spec is None or job.members:
            order.append(job)
            continue
        key = opbench.batch_key(job.spec)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(job)
    result = []
    for item in order:
        if isinstance(item, Job):
            result.append(item)
            continue
        for start in range(0, len(groups[item]), MAX_BATCH_FILES):
            members = groups[item][start:start + MAX_BATCH_FILES]
            if len(members) == 1:
                result.append(members[0])
            else:
                name = "+".join(m.benchmark for m in members)
                result.append(Job(name, spec=members[0].spec, members=tuple(members)))
    return result


def allocator_env() -> dict[str, str]:
    """The allocator settings benchmark processes get (``defaults.ALLOCATOR_ENV``) that perfq's environment lacks."""
    return {key: value for key, value in defaults.ALLOCATOR_ENV if key not in os.environ}


def _thread_overrides(plan: RunSpec, side: SideSetup) -> dict[str, str]:
    """The environment a side's benchmark processes get on top of perfq's: the allocator's, its own and the
    thread counts."""
    spec = next((j.spec for j in plan.jobs if j.spec is not None), None)
    out = {**allocator_env(), **dict(side.env)}
    if spec is not None:
        out.update(opbench.thread_env(side_spec(spec, side)))
    return out


def new_runs(plan: RunSpec) -> list[Run]:
    """One Run record per side, with the machine, interpreter, torch build and commit recorded."""
    commit = git.head(plan.repo)
    machine, repo = machine_info(), repo_info(plan.repo)
    runs = []
    for side, interpreter in zip(plan.sides, interpreters_info([s.python for s in plan.sides]), strict=True):
        runs.append(
            Run(
                label=plan.label,
                side=side.name,
                ref=side.ref or commit[:12],
                commit_sha=(git.rev(plan.repo, side.ref) if side.ref else None) or commit,
                torch_version=interpreter.get("torch_version", ""),
                python=side.python,
                host=machine["host"],
                cpu=f"{machine['cpu_model']} x{machine['logical_cpus']}",
                command=plan.command,
                notes="; ".join(plan.notes),
                env=side_env({**machine, "scheduling": sched.describe(plan.realtime)}, interpreter, repo,
                             _thread_overrides(plan, side), dict(side.provenance)),
                max_samples=plan.settings.max_samples,
                sample_ceiling=sample_ceiling(plan) if plan.adaptive else None,
            )
        )
    return runs


def _persist(plan: RunSpec, runs: list[Run], final: bool = False) -> None:
    """Save the runs to the history and the result file (both tried; the first error raised).

    During the run a history busy with readers is left for the next save (saves are idempotent).
    """
    errors: list[PerfqError] = []
    if plan.history is not None:
        try:
            save_runs(plan.history, runs, wait=FINAL_SAVE_WAIT if final else SAVE_WAIT)
        except DatabaseLocked as exc:
            if final:
                errors.append(exc)
        except PerfqError as exc:
            errors.append(exc)
    if plan.out is not None:
        try:
            export_runs(runs, plan.out)
        except PerfqError as exc:
            errors.append(exc)
    if errors:
        raise errors[0]


def contention_record(contention: Contention | None) -> dict[str, object] | None:
    """An invocation's contention as stored (JSON object), its verdict ``contended`` included."""
    if contention is None:
        return None
    return {**asdict(contention), "contended": contention.contended}


def contended_share(run: Run) -> tuple[int, int]:
    """(contended, measured) invocations of a run."""
    records = [json.loads(i.machine) for i in run.invocations if i.machine]
    return sum(bool(r.get("contended")) for r in records), len(records)


def contention_note(run: Run) -> str:
    """``head: 3 of 40 invocations contended (8%)``: the side's contended share, for the notes and the env."""
    contended, measured = contended_share(run)
    return f"{run.side}: {contended} of {measured} invocations contended ({contended / measured:.0%})" if measured \
        else ""


def _record_contention(runs: list[Run]) -> list[str]:
    """Each run's contended share, into its environment (``contended``); the notes' lines."""
    notes = []
    for run in runs:
        contended, measured = contended_share(run)
        if not measured:
            continue
        env = json.loads(run.env) if run.env else {}
        env["contended"] = f"{contended} of {measured} invocations ({contended / measured:.0%})"
        run.env = json.dumps(env, sort_keys=True)
        notes.append(contention_note(run))
    return notes


def _finalise(plan: RunSpec, runs: list[Run], status: RunStatus, note: str = "") -> None:
    """Mark the runs finished (``complete``) or stopped (``incomplete``), with their contended shares, and save them."""
    shares = _record_contention(runs)
    for run in runs:
        run.status, run.ended_at = status, now()
        run.notes = "; ".join([*plan.notes, *shares, *([note] if note else [])])
    _persist(plan, runs, final=True)


def samples_as_pairs(run: Run) -> list[tuple[TestKey, float, int]]:
    """(key, value, round) of a run's samples, for :func:`perfq.run.compare.columns_from_pairs` (a round's samples
    came from one invocation: their shared speed is told from a test's own change)."""
    return [(TestKey(s.benchmark, s.test, s.mode, s.device, s.metric, s.unit), s.value, s.repeat_index)
            for s in run.samples]


@dataclass
class BudgetClock:
    """The run's wall-time budget, counted from the command's start (side installs included): whether the next
    invocation of a job on a side fits, estimated from that job's last invocation there (else the side's last)."""

    started: float
    seconds: float | None  # None: no budget
    last: dict[tuple[tuple[str, str], str] | str, float] = field(default_factory=dict)  # (job key, side), side: s

    def fits(self, job: Job, side: str) -> bool:
        if self.seconds is None:
            return True
        estimate = self.last.get((job.key, side), self.last.get(side, 0.0))
        return time.monotonic() - self.started + estimate <= self.seconds

    def took(self, job: Job, side: str, seconds: float) -> None:
        self.last[(job.key, side)] = self.last[side] = seconds


class BudgetEnded(Exception):
    """The next invocation would overrun the run's budget: the rounds stop there."""


def rounds_budget(plan: RunSpec) -> float | None:
    """Seconds from the command's start by which the rounds end (None: no budget): the budget less
    ``FINISH_SHARE`` of it (a 5 min run at load 20 took 8 s after its last round to save, compare and print)."""
    return None if plan.budget_seconds is None else plan.budget_seconds * (1 - FINISH_SHARE)


def budget_note(plan: RunSpec, runs: list[Run]) -> str:
    """``time budget of 300 s reached: 3 test(s) left undecided`` (all of them without --ab)."""
    left = len(_undecided(plan, runs)) if plan.adaptive and len(runs) == 2 else len(
        {(s.benchmark, s.test, s.mode) for r in runs for s in r.samples})
    return f"time budget of {plan.budget_seconds or 0:.0f} s reached: {left} test(s) left undecided"


class TickKind(str, Enum):
    """What a progress tick reports."""

    start = "start"  # an invocation of a job on a side begins
    done = "done"  # it ended (``error`` set when it failed; ``skipped`` when a failed job is left out)
    adaptive = "adaptive"  # an adaptive round begins: ``units`` more invocations planned


@dataclass(frozen=True)
class Tick:
    """One progress event of `perfq run`: where the run is (job, side, round) and what just happened."""

    kind: TickKind
    job: Job | None
    side: str = ""
    round: int = 0  # 0-based
    units: int = 0
    seconds: float = 0.0
    samples: int = 0
    error: str = ""
    skipped: bool = False


Progress = Callable[[Tick], None]


def _quiet(tick: Tick) -> None:
    return None


def round_sides(pairs: list[_T], round_index: int) -> list[_T]:
    """The sides in the order they run in round ``round_index``: as given in even rounds, reversed in odd ones.

    With A always first, an order effect (the second process of a pair runs a few percent
    faster or slower) would read as a change of B; alternating the order cancels it over the rounds.
    """
    return pairs[::-1] if round_index % 2 else pairs


def planned_invocations(plan: RunSpec) -> int:
    """Invocations the plan's repeats make (one per job, side and round; adaptive rounds add more)."""
    return len(batch_jobs(plan.jobs) if plan.batch else plan.jobs) * len(plan.sides) * plan.repeat


HARNESS_IMPORT = "import torch, benchmark_core, benchmark_runner"  # what every operator_benchmark process imports
HARNESS_TIMEOUT = 300.0  # seconds for that import (not --timeout, a benchmark's: torch takes 10 s on a busy machine)


def side_problem(plan: RunSpec, side: SideSetup) -> str:
    """'' when the side's interpreter imports torch and the operator_benchmark harness (from its benchmark
    root, with its environment); else the last line of why not."""
    env = {**os.environ, **dict(side.env)}
    res = proc.run([side.python, "-c", HARNESS_IMPORT], cwd=side.bench_root or plan.bench_root, env=env,
                   timeout=HARNESS_TIMEOUT)
    return "" if res.ok else res.error or res.tail(1).strip() or f"exit status {res.returncode}"


def check_sides(plan: RunSpec) -> None:
    """A PerfqError (one line) when a side cannot import torch and the harness: before the first round, not
    after the other side's rounds ran (a CUDA wheel without its libraries: ``ImportError: libcudnn.so.9``)."""
    if not any(job.spec is not None for job in plan.jobs):
        return
    with ThreadPoolExecutor(max_workers=len(plan.sides)) as pool:
        problems = list(pool.map(lambda side: side_problem(plan, side), plan.sides))
    for side, problem in zip(plan.sides, problems, strict=True):
        if problem:
            raise PerfqError(f"the {side.name} side cannot run its benchmarks ({side.python}: "
                             f"{HARNESS_IMPORT}): {problem}")


def execute(plan: RunSpec, progress: Progress = _quiet, runs: list[Run] | None = None) -> list[Run]:
    """Run the plan; returns the runs (also saved).

    Ctrl-C or any error: the runs are saved as ``incomplete`` (with what they measured), then the
    exception propagates; no run is left ``running``.
    """
    caps = opbench.detect_caps(plan.bench_root)
    runs = runs or new_runs(plan)
    dead: set[tuple[str, str]] = set()  # (job title, side) that failed once
    started = time.monotonic()
    clock = BudgetClock(plan.started, rounds_budget(plan))

    def one_round(jobs: list[Job], round_index: int) -> None:
        for job in batch_jobs(jobs) if plan.batch else jobs:
            for side, run in round_sides(list(zip(plan.sides, runs, strict=True)), round_index):
                todo = job
                if job.members:
                    alive = tuple(m for m in job.members if (m.key, side.name) not in dead)
                    todo = replace(job, members=alive) if len(alive) > 1 else (alive[0] if alive else None)
                elif (job.key, side.name) in dead:
                    todo = None
                if todo is None:
                    progress(Tick(TickKind.done, job, side.name, round_index, units=1, skipped=True))
                    continue
                if not clock.fits(job, side.name):
                    raise BudgetEnded
                progress(Tick(TickKind.start, job, side.name, round_index))
                began, began_at, errors, samples = time.monotonic(), now(), [], 0
                outcomes = invoke(todo, side, plan, caps)
                clock.took(job, side.name, time.monotonic() - began)
                contention = next((o.contention for _, o in outcomes if o.contention is not None), None)
                run.add_invocation(time.monotonic() - began, test_shares(time.monotonic() - began, outcomes), began_at,
                                   contention_record(contention))
                for member, outcome in outcomes:
                    if outcome.error:
                        dead.add((member.key, side.name))
                        run.add_failure(
                            member.benchmark,
                            " ".join(outcome.argv),
                            outcome.returncode,
                            f"{outcome.error}\n{outcome.stderr_tail}".strip(),
                        )
                        errors.append(outcome.error if outcome.error.startswith(member.benchmark)
                                      else f"{member.benchmark}: {outcome.error}")
                    for m in outcome.measurements:
                        run.add_sample(round_index, member.benchmark, m)
                    samples += len(outcome.measurements)
                _persist(plan, runs)
                progress(Tick(TickKind.done, job, side.name, round_index, units=1,
                              seconds=time.monotonic() - began, samples=samples, error="; ".join(errors)))

    try:
        _persist(plan, runs)
        for r in range(plan.repeat):
            one_round(plan.jobs, r)
        if plan.adaptive and len(runs) == 2:
            _adaptive_rounds(plan, runs, one_round, started, progress)
    except BudgetEnded:
        plan.notes.append(budget_note(plan, runs))
    except BaseException as exc:
        _stopped(plan, runs, exc)
        raise
    _finalise(plan, runs, RunStatus.complete)
    return runs


def _stopped(plan: RunSpec, runs: list[Run], exc: BaseException) -> None:
    """Finalise the runs of a run stopped by ``exc``; if even that fails, one error says both."""
    if isinstance(exc, KeyboardInterrupt):
        note, code = f"interrupted ({interruption()})", 130
    else:
        note, code = f"stopped: {exc or type(exc).__name__}", getattr(exc, "exit_code", None)
    try:
        _finalise(plan, runs, RunStatus.incomplete, note)
    except PerfqError as failed:
        raise PerfqError(f"{note}; the runs could not be saved either: {failed}",
                         **({"exit_code": code} if code else {})) from exc


def _adaptive_rounds(plan: RunSpec, runs: list[Run], one_round: Callable[[list[Job], int], None], started: float,
                     progress: Progress) -> None:
    """Sequential sampling: after the first rounds, re-run only the undecided tests, one round at a time.

    Stops when every test's sampling has stopped (narrow enough, or at the sample ceiling, or decided), at the
    ceiling of rounds, or when the next round (estimated from the last one) would overrun the budget
    (:class:`BudgetEnded`).
    """
    limit = rounds_budget(plan)
    budget = math.inf if limit is None else limit
    last_seconds = (time.monotonic() - started) / max(plan.repeat, 1)
    last_tests = max(len(_undecided(plan, runs, everything=True)), 1)
    for r in range(plan.repeat, sample_ceiling(plan)):
        undecided = _undecided(plan, runs)
        if not undecided:
            return
        estimate = last_seconds * len(undecided) / last_tests
        if time.monotonic() - plan.started + estimate > budget:
            raise BudgetEnded
        jobs = _narrowed_jobs(plan, undecided)
        n_jobs = len(batch_jobs(jobs) if plan.batch else jobs)
        progress(Tick(TickKind.adaptive, None, round=r, units=n_jobs * len(plan.sides)))
        began = time.monotonic()
        one_round(jobs, r)
        last_seconds, last_tests = time.monotonic() - began, len(undecided)


def _undecided(plan: RunSpec, runs: list[Run], everything: bool = False) -> list[TestKey]:
    """The tests whose sampling goes on (``everything``: every test compared)."""
    failed = SideFailures(frozenset(f.benchmark for f in runs[0].failures),
                          frozenset(f.benchmark for f in runs[1].failures))
    result = compare_columns(columns_from_pairs(samples_as_pairs(runs[0]), samples_as_pairs(runs[1])),
                             plan.settings, failed)
    return [t.key for t in result.tests] if everything else result.sampling_keys(plan.settings, sample_ceiling(plan))


def sample_ceiling(plan: RunSpec) -> int:
    """Samples a side a test may get: ``--max-repeat`` when given; else, within a budget, ``EXTENDED_CEILING`` x
    max_samples for a test still ``unknown`` at max_samples (the budget left decides, not a fixed count: a quiet
    A/A stopped 8 of 56 tests at the 20-sample ceiling with 214 of 600 s left); without a budget, max_samples."""
    if plan.max_repeat:
        return plan.max_repeat
    factor = 1 if plan.budget_seconds is None else EXTENDED_CEILING
    return plan.settings.max_samples * factor


def _narrowed_jobs(plan: RunSpec, keys: list[TestKey]) -> list[Job]:
    """The plan's jobs narrowed to the tests ``keys``."""
    unknown: dict[tuple[str, str], set[str]] = {}
    for key in keys:
        unknown.setdefault((key.benchmark, key.mode), set()).add(key.test)
    jobs = []
    for job in plan.jobs:
        if job.spec is None:
            if any(bench == job.benchmark for bench, _ in unknown):
                jobs.append(job)
            continue
        tests = unknown.get(job.key)
        if tests:
            jobs.append(replace(job, spec=replace(job.spec, tests=tuple(sorted(tests)))))
    return jobs
