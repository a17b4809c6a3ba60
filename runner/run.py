"""Orchestrate `perfq run`: pick jobs, repeat them (A/B interleaved), record samples and failures.

A *job* is one benchmark file (operator_benchmark ``pt/<name>.py`` or a configured script)
restricted to its selected tests, in one mode. One invocation of a job on one side gives
one sample per test; ``repeat`` rounds run every job once per side, sides interleaved
(A B A B ...) so slow drifts of the machine hit both sides alike. Samples are saved after
every invocation; Ctrl-C keeps them and marks the runs incomplete. A failing invocation is
recorded with its stderr tail and that job is not retried on that side; the run goes on.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from perfq.query.compare import Settings, TestKey, compare_samples
from perfq.runner import opbench
from perfq.runner.opbench import Measurement, OpBenchSpec, RunnerCaps
from perfq.runner.results_store import Run, export_runs, now, save_runs
from perfq.runner.script_bench import ScriptBench, parse_output

from perfq.errors import PerfqError

STDERR_TAIL_LINES = 25


@dataclass(frozen=True)
class Side:
    """One side of the comparison: its name, interpreter and extra environment/options."""

    name: str
    python: str
    env: tuple[tuple[str, str], ...] = ()
    omp_num_threads: int | None = None
    mkl_num_threads: int | None = None
    ref: str = ""


@dataclass(frozen=True)
class Job:
    """One benchmark file (or script) with its selected tests, in one mode."""

    benchmark: str
    spec: OpBenchSpec | None = None
    script: ScriptBench | None = None

    @property
    def title(self) -> str:
        spec = self.spec
        if spec is None:
            return self.benchmark
        what = f"{len(spec.tests)} tests" if spec.tests else "all tests"
        return f"{self.benchmark} [{spec.mode}, {what}]"


@dataclass
class Plan:
    """Everything a run needs."""

    label: str
    jobs: list[Job]
    sides: list[Side]
    repeat: int = 5
    bench_root: Path = Path(".")
    repo: Path = Path(".")
    history: Path | None = None
    out: Path | None = None
    adaptive: bool = False
    max_repeat: int = 0  # adaptive ceiling (samples per side per test); 0: 3 x repeat
    budget_seconds: float | None = None
    timeout: float = 900.0
    settings: Settings = field(default_factory=Settings)
    command: str = ""
    notes: list[str] = field(default_factory=list)


@dataclass
class Outcome:
    """What one invocation produced."""

    measurements: list[Measurement]
    returncode: int | None
    stderr_tail: str
    argv: list[str]
    error: str = ""


def _tail(text: str, lines: int = STDERR_TAIL_LINES) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def side_spec(spec: OpBenchSpec, side: Side) -> OpBenchSpec:
    """The job's spec with the side's thread settings applied."""
    return replace(
        spec,
        omp_num_threads=side.omp_num_threads or spec.omp_num_threads,
        mkl_num_threads=side.mkl_num_threads or spec.mkl_num_threads,
    )


def invoke(job: Job, side: Side, plan: Plan, caps: RunnerCaps) -> Outcome:
    """Run one job once on one side (subprocess); Ctrl-C kills the child and propagates."""
    env = dict(os.environ)
    env.update(dict(side.env))
    env.setdefault("PYTHONUNBUFFERED", "1")
    json_file: Path | None = None
    with tempfile.TemporaryDirectory(prefix="perfq-run-") as tmp:
        if job.spec is not None:
            spec = side_spec(job.spec, side)
            if caps.output_json:
                json_file = Path(tmp) / "out.json"
            argv, _ = opbench.build_command(side.python, spec, caps, json_file)
            env.update(opbench.thread_env(spec))
            cwd = plan.bench_root
        else:
            assert job.script is not None
            argv = job.script.argv(side.python)
            cwd = job.script.workdir(plan.repo)
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=False,
            )
        except OSError as exc:
            return Outcome([], None, str(exc), argv, f"cannot start: {exc}")
        try:
            stdout, stderr = proc.communicate(timeout=plan.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
            return Outcome([], None, _tail(stderr), argv, f"timed out after {plan.timeout:.0f}s")
        except KeyboardInterrupt:
            proc.kill()
            proc.communicate()
            raise
        if job.spec is not None:
            found = opbench.parse_invocation(stdout, side_spec(job.spec, side), json_file)
        else:
            assert job.script is not None
            found = parse_output(job.script, stdout)
    error = ""
    if proc.returncode != 0:
        error = f"exit status {proc.returncode}"
    elif not found:
        error = "no measurement found in the output"
    return Outcome(found, proc.returncode, _tail(stderr or stdout), argv, error)


def python_info(python: str) -> dict[str, str]:
    """torch version of an interpreter (empty when torch is missing), without importing torch."""
    try:
        out = subprocess.run(
            [python, "-c", "from importlib.metadata import version; print(version('torch'))"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {"torch_version": ""}
    return {"torch_version": out.stdout.strip() if out.returncode == 0 else ""}


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} x{os.cpu_count()}"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()} x{os.cpu_count()}"


def git_commit(repo: Path) -> str:
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=False)
    return out.stdout.strip() if out.returncode == 0 else ""


def new_runs(plan: Plan) -> list[Run]:
    """One Run record per side, with the environment filled in."""
    commit = git_commit(plan.repo)
    host, cpu = socket.gethostname(), cpu_name()
    runs = []
    for side in plan.sides:
        info = python_info(side.python)
        runs.append(
            Run(
                label=plan.label,
                side=side.name,
                ref=side.ref or commit[:12],
                commit_sha=commit,
                torch_version=info["torch_version"],
                python=side.python,
                host=host,
                cpu=cpu,
                command=plan.command,
                notes="; ".join(plan.notes),
            )
        )
    return runs


def _persist(plan: Plan, runs: list[Run]) -> None:
    if plan.history is not None:
        save_runs(plan.history, runs)
    if plan.out is not None:
        export_runs(runs, plan.out)


def samples_as_pairs(run: Run) -> list[tuple[TestKey, float]]:
    """(key, value) pairs of a run, for query.compare."""
    return [(TestKey(s.benchmark, s.test, s.mode, s.device, s.metric, s.unit), s.value) for s in run.samples]


Progress = Callable[[str, Job | None, int], None]


def _quiet(event: str, job: Job | None, advance: int) -> None:
    return None


def execute(plan: Plan, progress: Progress = _quiet, runs: list[Run] | None = None) -> list[Run]:
    """Run the plan; returns the runs (also saved). Ctrl-C: runs saved as incomplete, then re-raised."""
    caps = opbench.detect_caps(plan.bench_root)
    runs = runs or new_runs(plan)
    _persist(plan, runs)
    dead: set[tuple[str, str]] = set()  # (job title, side) that failed once
    started = time.monotonic()

    def one_round(jobs: list[Job], round_index: int) -> None:
        for job in jobs:
            progress("job", job, 0)
            for side, run in zip(plan.sides, runs, strict=True):
                if (job.title, side.name) in dead:
                    progress("advance", job, 1)
                    continue
                outcome = invoke(job, side, plan, caps)
                if outcome.error:
                    dead.add((job.title, side.name))
                    run.add_failure(
                        job.benchmark,
                        " ".join(outcome.argv),
                        outcome.returncode,
                        f"{outcome.error}\n{outcome.stderr_tail}".strip(),
                    )
                    progress("failed", job, 0)
                for m in outcome.measurements:
                    run.add_sample(round_index, job.benchmark, m)
                _persist(plan, runs)
                progress("advance", job, 1)

    try:
        for r in range(plan.repeat):
            one_round(plan.jobs, r)
        if plan.adaptive and len(runs) == 2:
            ceiling = plan.max_repeat or 3 * plan.repeat
            r = plan.repeat
            while r < ceiling:
                if plan.budget_seconds is not None and time.monotonic() - started > plan.budget_seconds:
                    plan.notes.append("adaptive budget (seconds) exhausted")
                    break
                unknown = _unknown_jobs(plan, runs)
                if not unknown:
                    break
                progress("adaptive", None, len(unknown))
                one_round(unknown, r)
                r += 1
    except KeyboardInterrupt:
        for run in runs:
            run.status, run.ended_at = "incomplete", now()
            run.notes = "; ".join([*plan.notes, "interrupted (Ctrl-C)"])
        _persist(plan, runs)
        raise
    for run in runs:
        run.status = "complete"
        run.ended_at = now()
        run.notes = "; ".join(plan.notes)
    _persist(plan, runs)
    return runs


def _unknown_jobs(plan: Plan, runs: list[Run]) -> list[Job]:
    """Jobs narrowed to their tests whose verdict is still unknown."""
    result = compare_samples(samples_as_pairs(runs[0]), samples_as_pairs(runs[1]), plan.settings)
    unknown: dict[str, set[str]] = {}
    for key in result.unknown_keys():
        unknown.setdefault(key.benchmark, set()).add(key.test)
    jobs = []
    for job in plan.jobs:
        tests = unknown.get(job.benchmark)
        if not tests:
            continue
        if job.spec is not None:
            jobs.append(replace(job, spec=replace(job.spec, tests=tuple(sorted(tests)))))
        else:
            jobs.append(job)
    return jobs


# ---- selection ---------------------------------------------------------------------------


def list_ops(python: str, root: Path, name: str) -> list[str]:
    """Operator (module) names a benchmark file registers (``--list-ops``)."""
    try:
        out = subprocess.run(
            [python, "-m", f"pt.{opbench.normalize_name(name)}", "--list-ops"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    names = []
    for line in out.stdout.splitlines():
        line = line.strip()
        if line.startswith("# ") and not line.startswith("# -") and ":" not in line and " " not in line[2:]:
            names.append(line[2:])
    return names


def match_ops(wanted: list[str], available: list[str]) -> list[str]:
    """Benchmark operator names that match the affected ops (case-insensitive, aten:: and _ stripped)."""

    def norm(op: str) -> str:
        op = op.split("::")[-1].split(".")[0].lower()
        return op.strip("_").replace("_", "")

    targets = {norm(op) for op in wanted if op}
    return [name for name in available if norm(name) in targets]


def opbench_job(
    root: Path,
    name: str,
    mode: str,
    base: OpBenchSpec,
    tests: tuple[str, ...] = (),
    ops: tuple[str, ...] = (),
) -> Job:
    """A job for ``pt/<name>.py``; unknown names raise PerfqError."""
    path = opbench.module_file(root, name)
    if path is None:
        raise PerfqError(f"no operator benchmark {name!r} under {root / 'pt'}")
    spec = replace(base, name=path.stem, tests=tuple(tests), ops=tuple(ops), mode=mode)
    return Job(path.stem, spec=spec)


def modes_for(choice: str | None, default: tuple[str, ...] = ("eager",)) -> tuple[str, ...]:
    if choice == "both":
        return ("eager", "compile")
    if choice:
        return (choice,)
    return default


def jobs_from_affected(
    doc: dict[str, Any],
    root: Path,
    base: OpBenchSpec,
    scripts: dict[str, ScriptBench],
    mode: str | None = None,
    ops_resolver: Callable[[str], list[str]] | None = None,
) -> tuple[list[Job], list[str]]:
    """Jobs for the benchmarks (and canary sets) of a ``perfq affected --format json`` document.

    ``tests`` narrow a job to those test names; ``ops`` become ``--operators`` when
    ``ops_resolver(name)`` (the file's registered operator names) matches some of them.
    """
    notes: list[str] = []
    merged: dict[str, dict[str, Any]] = {}
    entries = list(doc.get("benchmarks") or [])
    for canary in doc.get("canary") or []:
        entries.extend(canary.get("benchmarks") or [])
    for entry in entries:
        name = opbench.normalize_name(str(entry.get("name") or entry.get("file") or ""))
        if not name:
            continue
        tests = tuple(entry.get("tests") or ())
        ops = tuple(entry.get("ops") or ())
        modes = tuple(m for m in entry.get("modes") or () if m in ("eager", "compile"))
        if name not in merged:
            merged[name] = {"tests": tests, "ops": ops, "modes": modes}
            continue
        seen = merged[name]  # listed twice (direct and canary): the wider selection wins
        seen["tests"] = () if not tests or not seen["tests"] else tuple(dict.fromkeys(seen["tests"] + tests))
        seen["ops"] = () if not ops or not seen["ops"] else tuple(dict.fromkeys(seen["ops"] + ops))
        seen["modes"] = tuple(dict.fromkeys(seen["modes"] + modes))
    jobs: list[Job] = []
    for name, sel in merged.items():
        if name in scripts:
            jobs.append(Job(name, script=scripts[name]))
            continue
        if opbench.module_file(root, name) is None:
            notes.append(f"{name}: not found under {root / 'pt'}; skipped")
            continue
        ops: tuple[str, ...] = ()
        if sel["ops"] and not sel["tests"] and ops_resolver is not None:
            ops = tuple(match_ops(list(sel["ops"]), ops_resolver(name)))
        for m in modes_for(mode, sel["modes"] or ("eager",)):
            jobs.append(opbench_job(root, name, m, base, sel["tests"], ops))
    return jobs, notes


def drop_unsupported_compile(jobs: list[Job], caps: RunnerCaps) -> tuple[list[Job], list[str]]:
    """Remove compile-mode jobs when the runner has no ``--use-compile``, with a clear note."""
    kept, notes = [], []
    for job in jobs:
        if job.spec is not None and job.spec.mode == "compile" and not caps.use_compile:
            notes.append(
                f"{job.benchmark}: compile mode not run: this operator_benchmark runner has no "
                "--use-compile flag (PyTorch 2.6.0 runner); eager only"
            )
            continue
        kept.append(job)
    return kept, notes


def default_python() -> str:
    return sys.executable
