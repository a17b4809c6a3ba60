"""What `perfq run` runs: jobs from an affected document or from --bench names, and the sides.

Pure apart from ``list_ops`` (asks a benchmark file for its operator names) and asking the
affected service for the document.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from common import proc
from common.config import Config
from common.errors import PerfqError
from perfq.run import opbench
from perfq.run.execute import Job, SideSetup
from perfq.run.opbench import OpBenchSpec, RunnerCaps
from perfq.run.plan import RunShape, TestPlan, shard_of
from perfq.run.plan_inputs import plan_for
from perfq.run.script_bench import ScriptBench, script_benchmarks
from query.document import AffectedDoc, SelectedBenchmark
from query.service import affected_for_range


def list_ops(python: str, root: Path, name: str) -> list[str]:
    """Operator (module) names a benchmark file registers (``--list-ops``)."""
    res = proc.run([python, "-m", f"pt.{opbench.normalize_name(name)}", "--list-ops"], cwd=root, timeout=300)
    if res.error:
        return []
    names = []
    for line in res.stdout.splitlines():
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
    doc: AffectedDoc,
    root: Path,
    base: OpBenchSpec,
    scripts: dict[str, ScriptBench],
    mode: str | None = None,
    ops_resolver: Callable[[str], list[str]] | None = None,
) -> tuple[list[Job], list[str]]:
    """Jobs for the benchmarks (and canary sets) of an affected document; a benchmark of a
    triggered canary set runs whole (its selected tests, if any, are among them).

    ``ops`` become ``--operators`` when ``ops_resolver(name)`` (the file's registered
    operator names) matches some of them.
    """
    notes: list[str] = []
    merged: dict[str, dict[str, tuple[str, ...]]] = {}
    in_canary = {b.name for hit in doc.canary for b in hit.benchmarks}
    for entry in doc.all_benchmarks():
        name = opbench.normalize_name(entry.name or entry.file)
        if not name:
            continue
        whole = entry.name in in_canary
        # traced selections name the runner's own tests and their --operators modules; a
        # static one names operators only, matched against the file's registered names
        tests = entry.tests if entry.modules and not whole else ()
        ops = () if whole else entry.modules or entry.ops
        modes = tuple(m for m in entry.modes if m in ("eager", "compile"))
        if name not in merged:
            merged[name] = {"tests": tests, "ops": ops, "modes": modes}
            continue
        seen = merged[name]  # listed under two names for one file: the wider selection wins
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
        if sel["tests"]:
            ops = sel["ops"]  # the modules of the traced tests: exact --operators names
        elif sel["ops"] and ops_resolver is not None:
            ops = tuple(match_ops(list(sel["ops"]), ops_resolver(name)))
        for m in modes_for(mode, sel["modes"] or ("eager",)):
            jobs.append(opbench_job(root, name, m, base, sel["tests"], ops))
    return jobs, notes


def plan_document(doc: AffectedDoc, plan: TestPlan) -> AffectedDoc:
    """The affected document narrowed to the plan: its benchmarks with the plan's tests (a whole-file
    pick keeps the entry as selected); no canary sets, the plan holds the canary tests it runs (a
    canary benchmark the plan picks becomes a selected one, as ``all_benchmarks`` lists it)."""
    entries: dict[str, SelectedBenchmark] = {}
    for b in doc.all_benchmarks():
        entries.setdefault(opbench.normalize_name(b.name), b)
    out = []
    for bench in plan.benchmarks:
        entry = entries[bench]  # the plan's benchmarks are the document's (plan_inputs.candidates_from)
        tests = [t for t in plan.tests if t.benchmark == bench]
        if any(not t.test for t in tests):
            out.append(replace(entry, name=bench))
            continue
        out.append(replace(entry, name=bench, tests=tuple(t.test for t in tests),
                           modules=tuple(sorted({t.module for t in tests if t.module}))))
    return replace(doc, benchmarks=tuple(out), canary=())


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


@dataclass(frozen=True)
class Selection:
    """What to run, as the command line says it."""

    affected: str | None = None  # a ref: run what `perfq affected REF` selects
    benches: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()
    operators: tuple[str, ...] = ()
    mode: str | None = None  # eager | compile | both; None: the document's modes, else eager
    budget_seconds: float | None = None  # with affected: the plan's budget (None: --all, everything)
    shape: RunShape = RunShape()  # rounds, sides, batch, shards, device of the run
    shard: int = 1  # 1-based, of shape.shards


def benchmark_root(repo: Path, cfg: Config, override: Path | None) -> Path:
    """The operator_benchmark root: ``--bench-root``, else from config ``benchmark_roots``."""
    return (override or repo / opbench.default_root(cfg.benchmark_roots)).resolve()


def select_jobs(repo: Path, cfg: Config, root: Path, selection: Selection, base: OpBenchSpec,
                python: str) -> tuple[list[Job], list[str], TestPlan | None]:
    """The jobs of ``selection`` (compile jobs dropped when the runner cannot compile), notes, and the
    budgeted plan they come from (``--affected``; the plan of this shard)."""
    scripts = script_benchmarks(cfg.extra)
    if not root.is_dir() and not selection.affected and not all(b in scripts for b in selection.benches):
        raise PerfqError(f"benchmark root {root} does not exist (use --bench-root)")
    notes: list[str] = []
    plan: TestPlan | None = None
    if selection.affected:
        doc = affected_for_range(repo, selection.affected)
        plan = plan_for(repo, doc, selection.budget_seconds, selection.shape)
        if selection.shape.shards > 1:
            plan = shard_of(plan, selection.shape, selection.shard)
        jobs, notes = jobs_from_affected(plan_document(doc, plan), root, base, scripts, selection.mode,
                                         ops_resolver=lambda name: list_ops(python, root, name))
    else:
        jobs = []
        for name in selection.benches:
            if name in scripts:
                jobs.append(Job(name, script=scripts[name]))
                continue
            for m in modes_for(selection.mode):
                jobs.append(opbench_job(root, name, m, base, selection.tests, selection.operators))
    jobs, more = drop_unsupported_compile(jobs, opbench.detect_caps(root))
    return jobs, notes + more, plan


def parse_env(pairs: list[str] | None) -> tuple[tuple[str, str], ...]:
    """``KEY=VALUE`` strings as pairs; PerfqError for anything else."""
    out = []
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise PerfqError(f"expected KEY=VALUE, got {pair!r}")
        out.append((key, value))
    return tuple(out)


@dataclass(frozen=True)
class SideOptions:
    """The per-side command-line values: interpreters, environments, thread counts, refs."""

    python: str | None = None
    base_python: str | None = None
    head_python: str | None = None
    base_env: tuple[tuple[str, str], ...] = ()
    head_env: tuple[tuple[str, str], ...] = ()
    base_omp: int | None = None
    head_omp: int | None = None
    ref: str | None = None
    base_ref: str | None = None
    head_ref: str | None = None
    wheels: bool = False  # --base-wheel/--head-wheel given (perfq.run.sides installs them)


def make_sides(ab: bool, side: str | None, opts: SideOptions) -> list[SideSetup]:
    """Both sides (``ab``), or the one ``side`` this checkout is."""
    if ab:
        sourced = opts.base_ref or opts.head_ref or opts.wheels  # each side's code comes from its ref or wheel
        if not sourced and (not opts.base_python or not opts.head_python):
            raise PerfqError("--ab needs --base-python and --head-python (or --base-ref/--head-ref)")
        own = opts.python or default_python()
        return [
            SideSetup("base", opts.base_python or own, opts.base_env, omp_num_threads=opts.base_omp,
                 ref=opts.base_ref or ""),
            SideSetup("head", opts.head_python or own, opts.head_env, omp_num_threads=opts.head_omp,
                 ref=opts.head_ref or ""),
        ]
    assert side in ("base", "head")
    threads = opts.base_omp if side == "base" else opts.head_omp
    env = opts.base_env if side == "base" else opts.head_env
    return [SideSetup(side, opts.python or default_python(), env, omp_num_threads=threads, ref=opts.ref or "")]
