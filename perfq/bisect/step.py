"""`perfq bisect-step`: judge the checked-out commit for `git bisect run` (exit 0 good, 1 bad, 125 skip)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from common.build import run_build
from common.errors import PerfqError
from common.sched import Priority
from perfq.bisect.measure import benchmark_scheduling, run_once
from perfq.bisect.metric import MetricSpec, polarity
from perfq.bisect.search import classify


@dataclass
class StepRequest:
    """``perfq bisect-step``: judge the checked-out commit for ``git bisect run``."""

    command: list[str]
    cwd: Path
    metric: MetricSpec = field(default_factory=MetricSpec)
    build: list[str] | None = None  # argv, no shell
    good_value: float | None = None
    bad_value: float | None = None
    threshold_value: float | None = None
    lower: bool | None = None
    higher: bool | None = None
    runs: int = 3
    extra_runs: int = 5
    threshold: float = 0.30
    margin: float = 0.10
    timeout: float = 600.0
    priority: Priority = Priority.auto  # of the benchmark runs


STEP_GOOD, STEP_BAD, STEP_SKIP = 0, 1, 125


def run_step(req: StepRequest, log: Callable[[str], None]) -> int:
    """Exit status for ``git bisect run``: 0 good, 1 bad, 125 skip (failed or ambiguous)."""
    if req.threshold_value is None and (req.good_value is None or req.bad_value is None):
        raise PerfqError("bisect-step needs --good-value and --bad-value, or --threshold-value", 128)
    if req.build:
        err = run_build(req.build, req.cwd, req.timeout)
        if err:
            log(f"build failed ({err}): skip")
            return STEP_SKIP
    realtime, scheduling = benchmark_scheduling(req.priority)
    for line in scheduling:
        log(line)
    values: list[float] = []
    unit = None

    def more(n: int) -> bool:
        nonlocal unit
        for _ in range(n):
            env = {**os.environ, "PERFQ_BISECT_RUN": str(len(values) + 1)}
            reading, err = run_once(req.command, req.cwd, req.metric, req.timeout, env, realtime)
            if err or reading is None:
                log(f"benchmark failed ({err}): skip")
                return False
            unit = unit or reading.unit
            values.append(reading.value)
        return True

    def judge() -> tuple[str, bool]:
        if req.good_value is not None and req.bad_value is not None:
            return classify(values, req.good_value, req.bad_value, req.threshold, req.margin)
        lower, _ = polarity(req.lower, req.higher, unit)
        t = float(req.threshold_value)
        m = median(values)
        bad = (m - t) * (1 if lower else -1) > 0
        return ("bad" if bad else "good"), abs(m - t) <= req.margin * abs(t)

    if not more(req.runs):
        return STEP_SKIP
    verdict, near = judge()
    if near and req.extra_runs:
        log(f"median {median(values):.4g} is near the threshold: {req.extra_runs} more run(s)")
        if not more(req.extra_runs):
            return STEP_SKIP
        verdict, near = judge()
    shown = " ".join(f"{v:.4g}" for v in values)
    if near:
        log(f"ambiguous ({shown}): skip")
        return STEP_SKIP
    log(f"{verdict} ({shown}{' ' + unit if unit else ''})")
    return STEP_GOOD if verdict == "good" else STEP_BAD
