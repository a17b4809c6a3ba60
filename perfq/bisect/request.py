"""What `perfq bisect` was asked to do, how an operator benchmark becomes a command, and how a
request is stored with its session (and read back on ``--resume``)."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from common.build import build_argv
from common.sched import Priority
from common.test_names import any_process_pattern, names_an_object
from perfq.bisect.metric import MetricSpec
from perfq.bisect.search import SearchConfig

OPBENCH_ROOT = "benchmarks/operator_benchmark"
OPBENCH_METRIC = r"Forward Execution Time \(us\)\s*:\s*([0-9.eE+-]+)"


@dataclass
class BisectRequest:
    """Everything ``perfq bisect`` was asked to do."""

    repo: Path
    good: str | None = None
    bad: str | None = None
    command: list[str] = field(default_factory=list)
    cwd: str = ""  # directory of the command, relative to the repo root
    build: list[str] | None = None  # argv run after each checkout (never through a shell)
    metric: MetricSpec = field(default_factory=MetricSpec)
    lower: bool | None = None
    higher: bool | None = None
    search: SearchConfig = field(default_factory=SearchConfig)
    all_parents: bool = False
    timeout: float = 600.0
    yes: bool = False
    prune: bool = False
    benchmark: str | None = None  # operator benchmark name (also what --prune looks for)
    ir_kernel: str | None = None  # bisect on "the IR of this kernel changed" (perfq ir collect)
    ir_targets: tuple[str, ...] = ()
    db: Path | None = None
    history: Path | None = None
    resume: bool = False
    priority: Priority = Priority.auto  # of the benchmark runs (not stored: a resume asks the machine again)


def stored_build(value: str | None) -> list[str] | None:
    """The build argv of a stored session (a JSON list; an older perfq stored the shell text)."""
    if not value:
        return None
    try:
        argv = json.loads(value)
    except json.JSONDecodeError:
        return build_argv(value)
    if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv):
        return argv
    return build_argv(value) if isinstance(argv, str) else None


def opbench_command(name: str, test_name: str | None = None) -> tuple[list[str], str, MetricSpec]:
    """(argv, cwd, metric) for operator benchmark ``name`` (``pt/<name>.py``).

    The forward time of every printed test is summed unless ``test_name`` selects one. A name holding an
    object (cat_test's lambda sizes: a new address in every process) is never the runner's exact ``--test-name``:
    every test runs and the metric is that test's, found by its stable name (:mod:`common.test_names`).
    """
    stem = Path(name).name.removesuffix(".py")
    argv = [sys.executable, "-m", f"pt.{stem}"]
    if test_name and names_an_object(test_name):
        named = rf"# Name: {any_process_pattern(test_name)}\n(?:#.*\n)*{OPBENCH_METRIC}"
        return [*argv, "--tag-filter", "all", "--device", "cpu"], OPBENCH_ROOT, MetricSpec(regex=named,
                                                                                            aggregate="first")
    argv += ["--test-name", test_name] if test_name else ["--tag-filter", "short"]
    argv += ["--device", "cpu"]
    return argv, OPBENCH_ROOT, MetricSpec(regex=OPBENCH_METRIC, aggregate="first" if test_name else "sum")


def ir_request(req: BisectRequest) -> BisectRequest:
    """The request for ``--ir KERNEL``: one deterministic compile per commit (value 0.0 = same
    IR as GOOD, 1.0 = changed), no extra runs, no noise checks."""
    cfg = replace(req.search, runs=1, baseline_runs=1, extra_runs=0, min_change=0.5, verify=False,
                  lower_is_better=True)
    return replace(req, search=cfg, lower=True, higher=None,
                   command=["perfq", "ir", "collect", "--kernel", req.ir_kernel or ""])


def benchmark_name(req: BisectRequest) -> str | None:
    """The benchmark (file stem) ``--prune`` checks reachability for."""
    if req.benchmark:
        return Path(req.benchmark).name.removesuffix(".py")
    for i, tok in enumerate(req.command):
        if tok == "-m" and i + 1 < len(req.command) and req.command[i + 1].startswith("pt."):
            return req.command[i + 1][3:]
        if tok.endswith(".py"):
            return Path(tok).stem
    return None


def request_options(req: BisectRequest) -> dict[str, Any]:
    return {"cwd": req.cwd, "metric": asdict(req.metric), "lower": req.lower, "higher": req.higher,
            "search": asdict(req.search), "all_parents": req.all_parents, "timeout": req.timeout,
            "prune": req.prune, "benchmark": req.benchmark, "ir_kernel": req.ir_kernel,
            "ir_targets": list(req.ir_targets)}


def apply_options(req: BisectRequest, stored: dict[str, Any]) -> BisectRequest:
    opts = stored["options"]
    return replace(req, good=stored["good"], bad=stored["bad"], command=stored["command"],
                   build=stored_build(stored["build"]), cwd=opts["cwd"], metric=MetricSpec(**opts["metric"]),
                   lower=opts["lower"], higher=opts["higher"], search=_search_config(opts["search"]),
                   all_parents=opts["all_parents"], timeout=opts["timeout"], prune=opts["prune"],
                   benchmark=opts["benchmark"], ir_kernel=opts.get("ir_kernel"),
                   ir_targets=tuple(opts.get("ir_targets") or ()))


def _search_config(stored: dict[str, Any]) -> SearchConfig:
    known = {f.name for f in fields(SearchConfig)}
    return SearchConfig(**{k: v for k, v in stored.items() if k in known})
