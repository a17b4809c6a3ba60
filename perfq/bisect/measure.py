"""Measuring one commit for `perfq bisect`: check it out, build it, run the benchmark (or compile
the kernel's IR), replaying stored values first when a session is resumed."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from common import proc
from common.build import run_build
from common.errors import PerfqError
from common.sched import Priority, describe, use_realtime
from perfq.bisect import git as g
from perfq.bisect.metric import MetricSpec, Reading, extract
from perfq.bisect.request import BisectRequest
from perfq.bisect.session import Session
from perfq.ir import api as ir_api


def run_once(command: list[str], cwd: Path, metric: MetricSpec, timeout: float,
             env: dict[str, str] | None = None, realtime: bool = False) -> tuple[Reading | None, str | None]:
    """Run the benchmark once (``realtime``: under SCHED_FIFO) and read its metric: (reading, None)
    or (None, why it failed)."""
    if not cwd.is_dir():
        return None, f"{cwd} does not exist at this commit"
    res = proc.run(command, cwd=cwd, env=env, timeout=timeout, realtime=realtime, reap_orphans=True)
    if res.error:
        return None, f"benchmark {res.error}"
    if res.returncode != 0:
        return None, f"benchmark exit {res.returncode} {res.last_line()}".strip()
    try:
        return extract(res.stdout + "\n" + res.stderr, metric), None
    except PerfqError as exc:
        return None, str(exc)


def benchmark_scheduling(priority: Priority) -> tuple[bool, list[str]]:
    """Whether the benchmark runs go under SCHED_FIFO (``--priority``; a refused ``realtime`` is a
    PerfqError), and the log lines that say so."""
    notes: list[str] = []
    realtime = use_realtime(priority, notes, "the benchmark runs")
    lines = [f"note: {note}" for note in notes]
    if realtime:
        lines.append(f"benchmark runs under {describe(True)}: other load on this machine cannot preempt them")
    return realtime, lines


class Bench:
    """``measure(commit, n)``: replay stored values, else check out, build and run (``realtime``:
    the benchmark runs under SCHED_FIFO; builds never are)."""

    def __init__(self, repo: Path, req: BisectRequest, co: g.Checkout, session: Session,
                 log: Callable[[str], None], realtime: bool = False) -> None:
        self.repo, self.req, self.co, self.session, self.log = repo, req, co, session, log
        self.realtime = realtime
        self.built: str | None = None
        self.units: list[str] = []
        self.last_error = ""
        self.runs_done = 0
        self.ir_good = ""
        self.ir_reference: str | None = None
        self.ir_cache: dict[str, str] = {}

    def __call__(self, commit: str, n: int) -> list[float] | None:
        if self.session.replay:
            sha, want, values, unit = self.session.replay[0]
            if sha == commit and want == n:
                self.session.replay.popleft()
                if unit:
                    self.units.append(unit)
                self.log(f"  {commit[:12]}: {n} run(s) replayed from the stored session")
                return values
            self.log("warning: stored session diverges here; measuring from now on")
            self.session.replay.clear()
        before = len(self.units)
        values, error = self._measure(commit, n)
        self.session.record(commit, n, values, error, self.units[-1] if len(self.units) > before else None)
        return values

    def _prepare(self, commit: str) -> str | None:
        """Check ``commit`` out with its tracked files as committed (a warning when the last build
        or benchmark had changed or deleted some) and build it when needed; why not, or None."""
        try:
            restored = self.co.to(commit)
        except PerfqError as exc:
            return f"checkout failed: {exc}"
        if restored:
            shown = ", ".join(restored[:5]) + (f" and {len(restored) - 5} more" if len(restored) > 5 else "")
            self.log(f"  warning: the build or benchmark changed {len(restored)} tracked file(s) ({shown}): "
                     "restored as committed before this step")
            self.built = None  # its build's changes to tracked files are gone too: build again
        if self.req.build and self.built != commit:
            self.built = None
            self.log(f"  {commit[:12]}: building")
            err = self._run_build(self.req.build)
            if err:
                return f"build failed: {err}"
            self.built = commit
        return None

    def _measure(self, commit: str, n: int) -> tuple[list[float] | None, str | None]:
        err = self._prepare(commit)
        if err:
            return self._fail(commit, err)
        if self.req.ir_kernel:
            return self._ir_values(commit, n)
        values = []
        cwd = self.repo / self.req.cwd if self.req.cwd else self.repo
        for run in range(n):
            err = self._prepare(commit) if run else None  # every run starts from the committed tree
            if err:
                return self._fail(commit, err)
            reading, err = run_once(self.req.command, cwd, self.req.metric, self.req.timeout,
                                    self._env(commit), self.realtime)
            if err or reading is None:
                return self._fail(commit, err or "no value")
            if reading.unit:
                self.units.append(reading.unit)
            values.append(reading.value)
        unit = self.units[-1] if self.units else ""
        self.log(f"  {commit[:12]}: " + " ".join(f"{v:.4g}" for v in values) + (f" {unit}" if unit else ""))
        return values, None

    def _ir_values(self, commit: str, n: int) -> tuple[list[float] | None, str | None]:
        """0.0 when the kernel's normalized IR equals GOOD's, 1.0 when it differs (one compile)."""
        fingerprint, err = self._ir_fingerprint(commit)
        if fingerprint is None:
            return self._fail(commit, err or "IR collection failed")
        if self.ir_reference is None:
            if commit != self.ir_good:
                ref, err = self._ir_fingerprint(self.ir_good)
                self.co.to(commit)
                if ref is None:
                    return self._fail(commit, f"cannot collect the IR at GOOD: {err}")
                self.ir_reference = ref
            else:
                self.ir_reference = fingerprint
        value = 0.0 if fingerprint == self.ir_reference else 1.0
        self.log(f"  {commit[:12]}: IR of {self.req.ir_kernel} "
                 + ("same as GOOD" if value == 0.0 else "changed") + f" ({fingerprint[:12]})")
        return [value] * n, None

    def _ir_fingerprint(self, commit: str) -> tuple[str | None, str | None]:
        if commit not in self.ir_cache:
            self.co.to(commit)
            try:
                self.ir_cache[commit] = ir_api.kernel_fingerprint(self.repo, self.req.ir_kernel or "",
                                                                  self.req.ir_targets)
            except PerfqError as exc:
                return None, f"IR collection failed: {exc}"
        return self.ir_cache[commit], None

    def _fail(self, commit: str, error: str) -> tuple[None, str]:
        self.last_error = error
        self.log(f"  {commit[:12]}: skipped ({error})")
        return None, error

    def _env(self, commit: str) -> dict[str, str]:
        self.runs_done += 1
        return {**os.environ, "PERFQ_BISECT_COMMIT": commit, "PERFQ_BISECT_RUN": str(self.runs_done)}

    def _run_build(self, argv: list[str]) -> str | None:
        return run_build(argv, self.repo, self.req.timeout, self._env(self.co.current or ""))
