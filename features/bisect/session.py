"""Side effects of ``perfq bisect``: checkouts, builds, benchmark runs, the stored session.

``run_bisect`` validates the repository and range, stashes a dirty tree (with consent),
drives the pure search in ``perfq.bisect.search`` with a ``measure`` that checks out
each commit, runs ``--build`` and the benchmark command, and records every measurement in
the history database. The original branch/commit and the stashed changes are restored in
a ``finally`` block, so success, failure and Ctrl-C all leave the tree as it was.
``--resume`` replays the stored measurements (the search is deterministic) and continues.
"""

from __future__ import annotations

import math
import os
import signal
import sys
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from perfq.bisect import git as g
from perfq.bisect.hints import scan_diff
from perfq.bisect.metric import MetricSpec, Reading, extract, polarity
from perfq.bisect.search import Outcome, SearchConfig, bisect, estimated_steps, relative_change
from perfq.common import proc
from perfq.errors import PerfqError
from perfq.ir import api as ir_api
from perfq.schema.bisect_store import BisectStore

OPBENCH_ROOT = "benchmarks/operator_benchmark"
OPBENCH_METRIC = r"Forward Execution Time \(us\)\s*:\s*([0-9.eE+-]+)"
RESUMABLE = ("running", "interrupted")


@dataclass
class BisectRequest:
    """Everything ``perfq bisect`` was asked to do."""

    repo: Path
    good: str | None = None
    bad: str | None = None
    command: list[str] = field(default_factory=list)
    cwd: str = ""  # directory of the command, relative to the repo root
    build: str | None = None
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


def opbench_command(name: str, test_name: str | None = None) -> tuple[list[str], str, MetricSpec]:
    """(argv, cwd, metric) for operator benchmark ``name`` (``pt/<name>.py``).

    The forward time of every printed test is summed unless ``test_name`` selects one.
    """
    stem = Path(name).name.removesuffix(".py")
    argv = [sys.executable, "-m", f"pt.{stem}"]
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


def prune_predicate(repo: Path, name: str, db: Path | None) -> Callable[[str], bool]:
    """``may_affect(commit)`` from the perfq index: does the commit's diff reach ``name``?"""
    try:
        from perfq.query.affected import affected_for_range
    except ImportError:
        raise PerfqError("--prune needs a perfq index (`perfq index`), and this perfq has no "
                         "affected query") from None

    def may_affect(commit: str) -> bool:
        ps = g.parents(repo, commit)
        rev = f"{ps[0]}..{commit}" if ps else commit
        try:
            doc = affected_for_range(repo, rev, db)
        except PerfqError as exc:
            raise PerfqError(f"--prune needs a perfq index: run `perfq index` first ({exc})") from None
        names = {b.get("name") for b in doc.get("benchmarks", [])}
        for canary in doc.get("canary", []):
            names |= {b.get("name") for b in canary.get("benchmarks", [])}
        return name in names

    return may_affect


class Session:
    """The stored session: its row, the replay queue, and a writer for new measurements."""

    def __init__(self, history: Path) -> None:
        self.history = history
        self.store = BisectStore(history)
        self.id = ""
        self.replay: deque[tuple[str, int, list[float] | None, str | None]] = deque()
        self.seq = 0

    def latest_resumable(self, repo: Path) -> dict[str, Any]:
        found = self.store.latest_resumable(repo)
        if found is None:
            raise PerfqError(f"no interrupted bisect session to resume for {repo}")
        row, steps = found
        self.id = row.id
        self.replay.extend((s.commit, s.requested, s.values, s.unit) for s in steps)
        self.seq = len(self.replay)
        return {"good": row.good, "bad": row.bad, "commits": row.commits, "command": row.command,
                "build": row.build, "options": row.options}

    def has_resumable(self, repo: Path) -> bool:
        return self.store.has_resumable(repo)

    def create(self, repo: Path, commits: list[str], command: list[str], build: str | None,
               options: dict[str, Any]) -> None:
        self.id = uuid.uuid4().hex[:12]
        self.store.create(self.id, repo, commits, command, build, options)

    def record(self, commit: str, n: int, values: list[float] | None, error: str | None,
               unit: str | None) -> None:
        self.store.add_step(self.id, self.seq, commit, n, values, error, unit)
        self.seq += 1

    def finish(self, status: str, result: dict[str, Any] | None) -> None:
        self.store.finish(self.id, status, result)

    def close(self) -> None:
        """Nothing is held open between writes."""


def run_build(cmd: str, cwd: Path, timeout: float, env: dict[str, str] | None = None) -> str | None:
    """Run the ``--build`` shell command; None on success, else why it failed."""
    res = proc.run(cmd, cwd=cwd, env=env, timeout=timeout, shell=True)
    if res.error:
        return res.error
    return None if res.returncode == 0 else f"exit {res.returncode} {res.last_line()}".strip()


def run_once(command: list[str], cwd: Path, metric: MetricSpec, timeout: float,
             env: dict[str, str] | None = None) -> tuple[Reading | None, str | None]:
    """Run the benchmark once and read its metric: (reading, None) or (None, why it failed)."""
    if not cwd.is_dir():
        return None, f"{cwd} does not exist at this commit"
    res = proc.run(command, cwd=cwd, env=env, timeout=timeout)
    if res.error:
        return None, f"benchmark {res.error}"
    if res.returncode != 0:
        return None, f"benchmark exit {res.returncode} {res.last_line()}".strip()
    try:
        return extract(res.stdout + "\n" + res.stderr, metric), None
    except PerfqError as exc:
        return None, str(exc)


class Bench:
    """``measure(commit, n)``: replay stored values, else check out, build and run."""

    def __init__(self, repo: Path, req: BisectRequest, co: g.Checkout, session: Session,
                 log: Callable[[str], None]) -> None:
        self.repo, self.req, self.co, self.session, self.log = repo, req, co, session, log
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

    def _measure(self, commit: str, n: int) -> tuple[list[float] | None, str | None]:
        try:
            self.co.to(commit)
        except PerfqError as exc:
            return self._fail(commit, f"checkout failed: {exc}")
        if self.req.build and self.built != commit:
            self.built = None
            self.log(f"  {commit[:12]}: building")
            err = self._run_shell(self.req.build)
            if err:
                return self._fail(commit, f"build failed: {err}")
            self.built = commit
        if self.req.ir_kernel:
            return self._ir_values(commit, n)
        values = []
        cwd = self.repo / self.req.cwd if self.req.cwd else self.repo
        for _ in range(n):
            reading, err = run_once(self.req.command, cwd, self.req.metric, self.req.timeout,
                                    self._env(commit))
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

    def _run_shell(self, cmd: str) -> str | None:
        return run_build(cmd, self.repo, self.req.timeout, self._env(self.co.current or ""))


def _options(req: BisectRequest) -> dict[str, Any]:
    return {"cwd": req.cwd, "metric": asdict(req.metric), "lower": req.lower, "higher": req.higher,
            "search": asdict(req.search), "all_parents": req.all_parents, "timeout": req.timeout,
            "prune": req.prune, "benchmark": req.benchmark, "ir_kernel": req.ir_kernel,
            "ir_targets": list(req.ir_targets)}


def _apply_options(req: BisectRequest, stored: dict[str, Any]) -> BisectRequest:
    opts = stored["options"]
    return replace(req, good=stored["good"], bad=stored["bad"], command=stored["command"],
                   build=stored["build"], cwd=opts["cwd"], metric=MetricSpec(**opts["metric"]),
                   lower=opts["lower"], higher=opts["higher"], search=_search_config(opts["search"]),
                   all_parents=opts["all_parents"], timeout=opts["timeout"], prune=opts["prune"],
                   benchmark=opts["benchmark"], ir_kernel=opts.get("ir_kernel"),
                   ir_targets=tuple(opts.get("ir_targets") or ()))


def _search_config(stored: dict[str, Any]) -> SearchConfig:
    known = {f.name for f in fields(SearchConfig)}
    return SearchConfig(**{k: v for k, v in stored.items() if k in known})


def _sigterm_to_interrupt() -> Callable[[], None]:
    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt
    try:
        old = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        return lambda: None
    return lambda: signal.signal(signal.SIGTERM, old)


def run_bisect(req: BisectRequest, log: Callable[[str], None],
               confirm: Callable[[str], bool] | None = None) -> dict[str, Any]:
    """Run (or resume) a bisection and return the report document."""
    repo = g.toplevel(req.repo)
    if not req.resume:
        if not req.good:
            raise PerfqError("give the GOOD commit (or --resume)")
        if req.ir_kernel:
            if req.command:
                raise PerfqError("--ir bisects on the kernel's IR; do not give a command after `--`")
            req = ir_request(req)
        elif not req.command:
            raise PerfqError("give the benchmark command after `--` (or --benchmark NAME)")
    history = req.history or _default_history(repo)
    session = Session(history)
    try:
        if req.resume:
            stored = session.latest_resumable(repo)
            req = _apply_options(req, stored)
            commits = stored["commits"]
            log(f"resuming session {session.id}: {len(session.replay)} stored measurement(s) to replay")
        else:
            if session.has_resumable(repo):
                log("note: an interrupted session exists for this repo; `perfq bisect --resume` continues it")
            good = g.resolve(repo, req.good)
            bad = g.resolve(repo, req.bad or "HEAD")
            commits = g.enumerate_range(repo, good, bad)
        n = len(commits) - 1
        log(f"{n} commit(s) in {commits[0][:12]}..{commits[-1][:12]} (first-parent), "
            f"about {estimated_steps(n)} step(s)")
        if n > 100:
            log(f"warning: {n} commits is a long range; each step runs the benchmark several times")
        may_affect = None
        if req.prune:
            name = benchmark_name(req)
            if not name:
                raise PerfqError("--prune needs to know the benchmark: pass --benchmark NAME")
            pred = prune_predicate(repo, name, req.db)
            log(f"--prune: asking the index which of {n} commit(s) can reach {name}")
            reach = {c: pred(c) for c in commits[1:]}  # before any checkout: errors leave no trace
            may_affect = reach.__getitem__
            log(f"--prune: {sum(reach.values())} of {n} commit(s) can reach {name}")
        if not req.resume:
            session.create(repo, commits, req.command, req.build, _options(req))
        return _drive(repo, req, commits, session, may_affect, log, confirm)
    finally:
        session.close()


def _default_history(repo: Path) -> Path:
    from perfq.common.paths import default_history_path

    return default_history_path(repo)


def _drive(repo: Path, req: BisectRequest, commits: list[str], session: Session,
           may_affect: Callable[[str], bool] | None, log: Callable[[str], None],
           confirm: Callable[[str], bool] | None) -> dict[str, Any]:
    def stash_ok(files: list[str]) -> bool:
        if req.yes:
            return True
        if confirm is None:
            return False
        return confirm(f"{len(files)} file(s) have uncommitted changes; stash them and restore at the end?")

    polarity_note: list[str] = []
    restore_signal = _sigterm_to_interrupt()
    try:
        with g.guarded(repo, stash_ok, log) as co:
            bench = Bench(repo, req, co, session, log)
            bench.ir_good = commits[0]

            def lower_is_better() -> bool:
                lower, note = polarity(req.lower, req.higher, bench.units[0] if bench.units else None)
                polarity_note.append(note)
                log(f"metric: {note}")
                return lower

            def on_step(step: Any) -> None:
                if step.phase != "baseline" or step.verdict == "skip":
                    log(f"{step.phase}: {step.commit[:12]} -> {step.verdict}"
                        + (f" ({step.note})" if step.note else ""))

            out = bisect(commits, bench, req.search, may_affect, on_step, lower_is_better)
            outcome_side: Outcome | None = None
            merge = None
            if req.all_parents and out.first_bad and out.status == "found":
                side = g.merge_side(repo, out.first_bad)
                if side:
                    merge = out.first_bad
                    log(f"{merge[:12]} is a merge: bisecting the {len(side) - 1} commit(s) it brought in")
                    cfg = replace(req.search, force=False)
                    outcome_side = bisect(side, bench, cfg, None, on_step, lambda: out.lower_is_better)
            report = build_report(repo, out, outcome_side, merge, bench, polarity_note, session.id, commits)
    except KeyboardInterrupt:
        session.finish("interrupted", None)
        raise PerfqError("interrupted; the original checkout was restored. Continue with "
                         "`perfq bisect --resume`", exit_code=130) from None
    except BaseException:
        session.finish("interrupted", None)
        raise
    finally:
        restore_signal()
    if req.ir_kernel and report["status"] == "noise":
        report["message"] = f"the IR of {req.ir_kernel} is the same at GOOD and BAD: nothing to bisect"
    session.finish(report["status"], report)
    return report


def build_report(repo: Path, out: Outcome, side: Outcome | None, merge: str | None, bench: Bench,
                 polarity_note: list[str], session_id: str, commits: list[str]) -> dict[str, Any]:
    """The report document (the JSON shape of ``perfq bisect --format json``)."""
    main = out
    via_merge = None
    if side is not None and side.status in ("found", "ambiguous") and side.first_bad:
        main, via_merge = side, merge
    steps = [{"commit": s.commit, "values": s.values, "verdict": s.verdict, "phase": s.phase, "note": s.note}
             for o in (out, side) if o is not None for s in o.steps]
    doc: dict[str, Any] = {
        "status": out.status if side is None or main is out else main.status,
        "message": main.message if main is not out else out.message,
        "first_bad": None, "last_good": None,
        "steps": steps,
        "skipped": out.skipped + (side.skipped if side else []),
        "ambiguous": out.ambiguous + (side.ambiguous if side else []),
        "suspects": main.suspects,
        "runs": out.runs + (side.runs if side else 0),
        "range": {"good": commits[0], "bad": commits[-1], "commits": len(commits) - 1},
        "baseline": {"good": out.good_value, "bad": out.bad_value, "threshold": out.threshold_value,
                     "change": _finite(relative_change(out.good_value, out.bad_value))
                     if out.good_value is not None and out.bad_value is not None else None},
        "metric": {"unit": bench.units[0] if bench.units else None, "lower_is_better": out.lower_is_better,
                   "polarity": polarity_note[0] if polarity_note else None},
        "pruned": {"commits": out.pruned, "candidates": out.candidates,
                   "runs_saved_estimate": _runs_saved(out, bench.req.search.runs)},
        "via_merge": via_merge,
        "session": session_id,
        "last_error": bench.last_error or None,
        "files": [], "hints": [],
    }
    if main.first_bad:
        ci = g.info(repo, main.first_bad)
        doc["first_bad"] = {"commit": main.first_bad, "subject": ci.subject, "value": main.first_bad_value,
                            "author": f"{ci.author} <{ci.email}>", "date": ci.date}
    if main.last_good:
        doc["last_good"] = {"commit": main.last_good, "value": main.last_good_value,
                            "subject": g.info(repo, main.last_good).subject}
    if main.first_bad and main.last_good and main.first_bad_value is not None:
        doc["first_bad"]["change"] = _finite(relative_change(main.last_good_value, main.first_bad_value))
    if main.first_bad and main.status in ("found", "ambiguous"):
        doc["files"] = g.numstat(repo, main.first_bad)
        doc["hints"] = [asdict(h) for h in scan_diff(g.diff_text(repo, main.first_bad))]
    return doc


def _finite(x: float) -> float | None:
    """``x``, or None when it is infinite/NaN (JSON has no Infinity)."""
    return x if math.isfinite(x) else None


def _runs_saved(out: Outcome, runs_per_step: int) -> int:
    """About how many benchmark runs pruning saved: bisection steps it removed x runs per step."""
    if not out.pruned:
        return 0
    saved = estimated_steps(out.candidates + out.pruned) - estimated_steps(out.candidates)
    return max(0, saved) * runs_per_step


@dataclass
class StepRequest:
    """``perfq bisect-step``: judge the checked-out commit for ``git bisect run``."""

    command: list[str]
    cwd: Path
    metric: MetricSpec = field(default_factory=MetricSpec)
    build: str | None = None
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


STEP_GOOD, STEP_BAD, STEP_SKIP = 0, 1, 125


def run_step(req: StepRequest, log: Callable[[str], None]) -> int:
    """Exit status for ``git bisect run``: 0 good, 1 bad, 125 skip (failed or ambiguous)."""
    from statistics import median

    from perfq.bisect.search import classify

    if req.threshold_value is None and (req.good_value is None or req.bad_value is None):
        raise PerfqError("bisect-step needs --good-value and --bad-value, or --threshold-value", 128)
    if req.build:
        err = run_build(req.build, req.cwd, req.timeout)
        if err:
            log(f"build failed ({err}): skip")
            return STEP_SKIP
    values: list[float] = []
    unit = None

    def more(n: int) -> bool:
        nonlocal unit
        for _ in range(n):
            env = {**os.environ, "PERFQ_BISECT_RUN": str(len(values) + 1)}
            reading, err = run_once(req.command, req.cwd, req.metric, req.timeout, env)
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
