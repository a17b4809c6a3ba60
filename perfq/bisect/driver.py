"""`perfq bisect`: validate the repository and range, stash a dirty tree (with consent), drive the
pure search in :mod:`perfq.bisect.search` with a :class:`~perfq.bisect.measure.Bench` that checks
out, builds and runs each commit, and record every measurement in the session. The original
branch/commit and the stashed changes are restored in a ``finally`` block, so success, failure
and Ctrl-C all leave the tree as it was. ``--resume`` replays the stored measurements (the search
is deterministic) and continues.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from common import git
from common.errors import PerfqError
from common.interrupt import sigterm_as_interrupt
from common.paths import default_history_path
from perfq.bisect import git as g
from perfq.bisect.hints import Hint, scan_diff
from perfq.bisect.measure import Bench, benchmark_scheduling
from perfq.bisect.metric import polarity
from perfq.bisect.report import (
    BisectReport,
    BisectStatus,
    FileStat,
    FirstBad,
    LastGood,
    MetricInfo,
    Pruned,
    RangeInfo,
    baseline_of,
    finite,
    runs_saved,
    steps_of,
)
from perfq.bisect.request import BisectRequest, apply_options, benchmark_name, ir_request, request_options
from perfq.bisect.search import Outcome, bisect, estimated_steps, relative_change
from perfq.bisect.session import Session
from query.service import affected_for_range, check_index_of


def prune_predicate(repo: Path, name: str, db: Path | None) -> Callable[[str], bool]:
    """``may_affect(commit)`` from the perfq index: does the commit's diff reach ``name``? An
    index of another repository is refused (it would prune every commit)."""
    try:
        check_index_of(repo, db)
    except PerfqError as exc:
        raise PerfqError(f"--prune needs this repository's perfq index: {exc}") from None

    def may_affect(commit: str) -> bool:
        ps = git.parents(repo, commit)
        rev = f"{ps[0]}..{commit}" if ps else commit
        try:
            doc = affected_for_range(repo, rev, db)
        except PerfqError as exc:
            raise PerfqError(f"--prune needs a perfq index: run `perfq index` first ({exc})") from None
        return name in {b.name for b in doc.all_benchmarks()}

    return may_affect


def run_bisect(req: BisectRequest, log: Callable[[str], None],
               confirm: Callable[[str], bool] | None = None) -> BisectReport:
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
    # first: a refused --priority realtime is an error before anything else (said once the range is known)
    realtime, scheduling = (False, []) if req.ir_kernel else benchmark_scheduling(req.priority)  # IR: no timing
    history = req.history or _default_history(repo)
    session = Session(history)
    try:
        if req.resume:
            stored = session.latest_resumable(repo)
            req = apply_options(req, stored)
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
        for line in scheduling:
            log(line)
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
        return _drive(repo, req, commits, session, may_affect, log, confirm, realtime)
    finally:
        session.close()


def _default_history(repo: Path) -> Path:
    return default_history_path(repo)


def _drive(repo: Path, req: BisectRequest, commits: list[str], session: Session,
           may_affect: Callable[[str], bool] | None, log: Callable[[str], None],
           confirm: Callable[[str], bool] | None, realtime: bool = False) -> BisectReport:
    def stash_ok(files: list[str]) -> bool:
        if req.yes:
            return True
        if confirm is None:
            return False
        return confirm(f"{len(files)} file(s) have uncommitted changes; stash them and restore at the end?")

    def started(origin: g.Origin) -> None:
        session.start(repo, commits, req.command, req.build, request_options(req), origin)

    polarity_note: list[str] = []
    try:
        with sigterm_as_interrupt(), g.guarded(repo, stash_ok, log, session.origin(), started,
                                               session.restored) as co:
            bench = Bench(repo, req, co, session, log, realtime)
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
    if req.ir_kernel and report.status == BisectStatus.noise:
        report = replace(report, message=f"the IR of {req.ir_kernel} is the same at GOOD and BAD: nothing to bisect")
    session.finish(report.status.value, report.to_json())
    return report


def build_report(repo: Path, out: Outcome, side: Outcome | None, merge: str | None, bench: Bench,
                 polarity_note: list[str], session_id: str, commits: list[str]) -> BisectReport:
    """The report of a finished search (and of the merge's side branch, ``--all-parents``)."""
    main, via_merge = out, None
    if side is not None and side.status in ("found", "ambiguous") and side.first_bad:
        main, via_merge = side, merge
    first_bad = last_good = None
    files: tuple[FileStat, ...] = ()
    hints: tuple[Hint, ...] = ()
    if main.first_bad:
        ci = git.commit(repo, main.first_bad)
        change = None
        if main.last_good and main.first_bad_value is not None:
            change = finite(relative_change(main.last_good_value, main.first_bad_value))
        first_bad = FirstBad(main.first_bad, ci.subject, main.first_bad_value, f"{ci.author} <{ci.email}>", ci.date,
                             change)
        if main.status in ("found", "ambiguous"):
            files = tuple(FileStat(**f) for f in g.numstat(repo, main.first_bad))
            hints = tuple(scan_diff(g.diff_text(repo, main.first_bad)))
    if main.last_good:
        last_good = LastGood(main.last_good, main.last_good_value, git.commit(repo, main.last_good).subject)
    return BisectReport(
        status=BisectStatus(main.status if main is not out else out.status),
        message=main.message,
        first_bad=first_bad,
        last_good=last_good,
        steps=steps_of(out, side),
        skipped=tuple(out.skipped + (side.skipped if side else [])),
        ambiguous=tuple(out.ambiguous + (side.ambiguous if side else [])),
        suspects=tuple(main.suspects),
        runs=out.runs + (side.runs if side else 0),
        range=RangeInfo(commits[0], commits[-1], len(commits) - 1),
        baseline=baseline_of(out),
        metric=MetricInfo(bench.units[0] if bench.units else None, out.lower_is_better,
                          polarity_note[0] if polarity_note else None),
        pruned=Pruned(out.pruned, out.candidates, runs_saved(out, bench.req.search.runs)),
        via_merge=via_merge,
        session=session_id,
        last_error=bench.last_error or None,
        files=files,
        hints=hints,
    )
