"""Noise-robust bisection over an ordered list of commits (pure: no git, no subprocesses).

The caller supplies ``measure(commit, n) -> list[float] | None`` (``n`` benchmark runs of
``commit``; ``None`` when its build or benchmark failed) and, optionally, a pruning
predicate ``may_affect(commit) -> bool``. The search is deterministic given the values
``measure`` returns, so replaying stored values reproduces an interrupted session.

Algorithm:

1. Baselines: GOOD and BAD are run ``baseline_runs`` times (``extra_runs`` more each when
   their spread is large against the change); their medians define the regression, which
   must be at least ``min_change`` in the bad direction (else: possibly noise, or probably
   swapped commits) unless ``force``.
2. Each tested commit is classified by the median of its values against a threshold
   ``threshold`` of the way from good to bad. The good and bad references are the medians
   of all values of the commits classified so far (they start as the baselines). A median
   within ``margin`` (a fraction of the good-to-bad distance) of the threshold, or within
   ``confidence`` standard errors of it, gets rounds of ``extra_runs`` more runs (at most
   ``extra_rounds``); still within the margin, the commit is *ambiguous*: reported, never
   guessed, and treated like a skip.
3. The interval is ``lo`` = last good before ``hi`` = first bad. A failing commit is
   skipped and the untested commit nearest the midpoint (its neighbour) is tried next;
   ``max_failures`` failures in a row stop the search.
4. When ``lo`` and ``hi`` are adjacent, both are verified (more runs unless their verdict is
   ``verify_confidence`` standard errors clear); a flipped verdict reopens the search
   (noisy binary search with backtracking). Ambiguous commits left between them are
   re-judged against ``lo`` and ``hi`` themselves; what stays unresolved is reported as
   the list of suspects.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import median

Measure = Callable[[str, int], "list[float] | None"]
MayAffect = Callable[[str], bool]

GOOD, BAD, SKIP, AMBIGUOUS = "good", "bad", "skip", "ambiguous"


@dataclass(frozen=True)
class SearchConfig:
    """Knobs of the search (defaults are the documented ones)."""

    runs: int = 3
    baseline_runs: int = 3
    threshold: float = 0.30
    margin: float = 0.10
    extra_runs: int = 5
    min_change: float = 0.05
    max_failures: int = 3
    lower_is_better: bool = True
    force: bool = False
    verify: bool = True
    pool: bool = True
    extra_rounds: int = 3
    confidence: float = 2.0
    verify_confidence: float = 4.0


@dataclass
class Step:
    """One measurement of one commit and the verdict it led to."""

    commit: str
    values: list[float]
    verdict: str
    phase: str  # baseline | search | extra | verify
    note: str = ""


@dataclass
class Outcome:
    """The result of a search (``status`` says whether ``first_bad`` can be trusted)."""

    status: str  # found | noise | swapped | failures | baseline_failed | pruned_culprit | ambiguous
    message: str
    good_value: float | None = None
    bad_value: float | None = None
    threshold_value: float | None = None
    first_bad: str | None = None
    last_good: str | None = None
    first_bad_value: float | None = None
    last_good_value: float | None = None
    suspects: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    ambiguous: list[str] = field(default_factory=list)
    runs: int = 0
    candidates: int = 0
    pruned: int = 0
    lower_is_better: bool = True

    @property
    def ok(self) -> bool:
        return self.status == "found"


def relative_change(good: float, bad: float) -> float:
    """(bad - good) / |good|; infinite when good is 0 and bad differs."""
    if good == 0:
        return 0.0 if bad == good else float("inf") if bad > good else float("-inf")
    return (bad - good) / abs(good)


def noise_sd(*groups: list[float]) -> float:
    """Pooled robust standard deviation of one run: 1.4826 x the median absolute deviation
    of every value from its own group's median."""
    devs = [abs(v - median(g)) for g in groups if len(g) > 1 for v in g]
    return 1.4826 * median(devs) if devs else 0.0


def median_se(values: list[float], sd: float) -> float:
    """Standard error of the median of ``values`` for run-to-run standard deviation ``sd``."""
    return 1.2533 * sd / max(1, len(values)) ** 0.5


def threshold_value(good: float, bad: float, fraction: float) -> float:
    """The value ``fraction`` of the way from ``good`` to ``bad``."""
    return good + fraction * (bad - good)


def classify(values: list[float], good: float, bad: float, fraction: float = 0.30,
             margin: float = 0.10) -> tuple[str, bool]:
    """(verdict, near) for ``values``: GOOD or BAD by their median against the threshold;
    ``near`` when the median is within ``margin`` x |bad - good| of it."""
    m = median(values)
    thr = threshold_value(good, bad, fraction)
    toward_bad = (m - thr) * (1 if bad >= good else -1)
    near = abs(m - thr) <= margin * abs(bad - good)
    return (BAD if toward_bad > 0 else GOOD), near


class _Search:
    def __init__(self, commits: list[str], measure: Measure, cfg: SearchConfig,
                 may_affect: MayAffect | None, on_step: Callable[[Step], None] | None,
                 polarity: Callable[[], bool] | None = None) -> None:
        self.cfg, self.measure, self.on_step, self.polarity = cfg, measure, on_step, polarity
        middle = commits[1:-1]
        cands = [c for c in middle if may_affect(c)] if may_affect else list(middle)
        self.bad_is_candidate = may_affect(commits[-1]) if may_affect else True
        self.seq = [commits[0], *cands, commits[-1]]
        self.out = Outcome(status="found", message="", candidates=len(cands) + 1,
                           pruned=len(middle) - len(cands))
        self.samples: dict[str, list[float]] = {}
        self.verdict: dict[int, str] = {}
        self.fails_in_row = 0

    # -- measuring -------------------------------------------------------------------
    def _run(self, commit: str, n: int) -> list[float] | None:
        values = self.measure(commit, n)
        self.out.runs += n
        if values is None or not values:
            self.fails_in_row += 1
            return None
        self.fails_in_row = 0
        self.samples.setdefault(commit, []).extend(values)
        return list(values)

    def _log(self, commit: str, values: list[float] | None, verdict: str, phase: str, note: str = "") -> None:
        step = Step(commit, list(values or []), verdict, phase, note)
        self.out.steps.append(step)
        if self.on_step is not None:
            self.on_step(step)

    def _judge(self, idx: int, phase: str, want: int, confidence: float | None = None) -> str:
        """Bring commit ``idx`` to at least ``want`` values, add rounds of extra runs while
        its median is near the threshold, and classify it (SKIP on failure)."""
        c, cfg = self.seq[idx], self.cfg
        have = len(self.samples.get(c, []))
        if have < want and self._run(c, want - have) is None:
            self._log(c, None, SKIP, phase, "build or benchmark failed")
            return SKIP
        good_ref, bad_ref = self._refs(c)
        cap = cfg.runs + cfg.extra_runs * cfg.extra_rounds
        while True:
            values = self.samples[c]
            verdict, near = classify(values, good_ref, bad_ref, cfg.threshold, cfg.margin)
            distance = abs(median(values) - threshold_value(good_ref, bad_ref, cfg.threshold))
            sd = noise_sd(values, *self._ref_groups(c))
            unsure = near or distance <= (confidence or cfg.confidence) * median_se(values, sd)
            if not unsure or not cfg.extra_runs or len(values) >= cap:
                break
            self._log(c, values, verdict, phase, "near the threshold: more runs")
            phase = "extra"
            if self._run(c, min(cfg.extra_runs, cap - len(values))) is None:
                self._log(c, None, SKIP, phase, "build or benchmark failed")
                return SKIP
        if near:
            verdict = AMBIGUOUS
        self._log(c, self.samples[c], verdict, phase,
                  "still within the margin of the threshold" if verdict == AMBIGUOUS else "")
        return verdict

    def _ref_groups(self, exclude: str) -> list[list[float]]:
        return [self.samples[self.seq[i]] for i, v in self.verdict.items()
                if v in (GOOD, BAD) and self.seq[i] != exclude and self.samples.get(self.seq[i])]

    def _refs(self, exclude: str) -> tuple[float, float]:
        """Good and bad reference values: medians of every value of the commits classified
        good (bad) so far, ``exclude`` aside; they start as the baselines and sharpen."""
        if not self.cfg.pool:
            return self.out.good_value, self.out.bad_value
        pools: dict[str, list[float]] = {GOOD: [], BAD: []}
        for i, v in self.verdict.items():
            c = self.seq[i]
            if v in pools and c != exclude:
                pools[v].extend(self.samples.get(c, []))
        return median(pools[GOOD]), median(pools[BAD])

    # -- the search ------------------------------------------------------------------
    def _baselines(self) -> bool:
        cfg, o = self.cfg, self.out
        good_c, bad_c = self.seq[0], self.seq[-1]
        for want in (cfg.baseline_runs, cfg.baseline_runs + cfg.extra_runs):
            for c, label in ((good_c, GOOD), (bad_c, BAD)):
                have = len(self.samples.get(c, []))
                if have >= want:
                    continue
                got = self._run(c, want - have)
                note = "" if have == 0 else "noisy baselines: more runs"
                self._log(c, self.samples.get(c, []), label if got is not None else SKIP, "baseline",
                          note if got is not None else "build or benchmark failed")
                if got is None:
                    o.status = "baseline_failed"
                    o.message = f"the {label} commit {c[:12]} failed to build or run its benchmark"
                    return False
            g, b = self.samples[good_c], self.samples[bad_c]
            if median_se(g, noise_sd(g, b)) <= cfg.margin * abs(median(b) - median(g)):
                break
        vals = {GOOD: median(self.samples[good_c]), BAD: median(self.samples[bad_c])}
        o.good_value, o.bad_value = vals[GOOD], vals[BAD]
        o.threshold_value = threshold_value(o.good_value, o.bad_value, cfg.threshold)
        lower = self.polarity() if self.polarity is not None else cfg.lower_is_better
        o.lower_is_better = lower
        change = relative_change(o.good_value, o.bad_value)
        regression = change if lower else -change
        pct = f"{change * 100:+.1f}%"
        if regression <= -cfg.min_change and not cfg.force:
            o.status = "swapped"
            o.message = (f"BAD ({o.bad_value:.4g}) is better than GOOD ({o.good_value:.4g}), {pct}: "
                         "probably swapped commits (use --force to bisect anyway)")
            return False
        if abs(regression) < cfg.min_change and not cfg.force:
            o.status = "noise"
            o.message = (f"GOOD {o.good_value:.4g} vs BAD {o.bad_value:.4g} ({pct}) is under "
                         f"{cfg.min_change * 100:.0f}%: possibly noise (use --force to bisect anyway)")
            return False
        if o.bad_value == o.good_value:
            o.status = "noise"
            o.message = "GOOD and BAD measure the same; nothing to bisect"
            return False
        self.verdict[0], self.verdict[len(self.seq) - 1] = GOOD, BAD
        return True

    def _interval(self) -> tuple[int, int]:
        hi = min(i for i, v in self.verdict.items() if v == BAD)
        lo = max(i for i, v in self.verdict.items() if v == GOOD and i < hi)
        return lo, hi

    def run(self) -> Outcome:
        cfg, o = self.cfg, self.out
        if not self._baselines():
            return self._finish_partial()
        verified: set[int] = {0, len(self.seq) - 1}
        while True:
            lo, hi = self._interval()
            untested = [i for i in range(lo + 1, hi) if i not in self.verdict]
            if untested:
                mid = (lo + hi) / 2
                idx = min(untested, key=lambda i: (abs(i - mid), i))
                self.verdict[idx] = self._judge(idx, "search", cfg.runs)
                if self.fails_in_row >= cfg.max_failures:
                    o.status = "failures"
                    o.message = (f"{self.fails_in_row} commits in a row failed to build or run; stopped "
                                 f"with the regression between {self.seq[lo][:12]} and {self.seq[hi][:12]}")
                    return self._finish_partial()
                continue
            pending = [i for i in (lo, hi) if cfg.verify and i not in verified]
            if not pending:
                break
            for i in pending:
                verified.add(i)
                self.verdict[i] = self._judge(i, "verify", cfg.runs, cfg.verify_confidence)
            if self.fails_in_row >= cfg.max_failures:
                o.status = "failures"
                o.message = f"{self.fails_in_row} commits in a row failed to build or run"
                return self._finish_partial()
        self._resolve_locally()
        return self._finish()

    def _resolve_locally(self) -> None:
        """Re-judge ambiguous commits left between the last good and the first bad against
        those two commits' own (verified) values instead of the global references: a
        baseline that was off by noise shifts the global threshold, not the local step."""
        cfg = self.cfg
        changed = True
        while changed:
            changed = False
            lo, hi = self._interval()
            if not any(self.verdict.get(i) == AMBIGUOUS for i in range(lo + 1, hi)):
                return
            cap = cfg.runs + cfg.extra_runs * cfg.extra_rounds
            for i in (lo, hi):
                c = self.seq[i]
                short = cap - len(self.samples[c])
                if short > 0 and self._run(c, short) is not None:
                    self._log(c, self.samples[c], self.verdict[i], "resolve",
                              "more runs to judge its neighbours")
            g, b = median(self.samples[self.seq[lo]]), median(self.samples[self.seq[hi]])
            for i in range(lo + 1, hi):
                if self.verdict.get(i) != AMBIGUOUS:
                    continue
                verdict, near = classify(self.samples[self.seq[i]], g, b, cfg.threshold, cfg.margin)
                if not near:
                    self.verdict[i] = verdict
                    self._log(self.seq[i], self.samples[self.seq[i]], verdict, "resolve",
                              f"judged against its neighbours {self.seq[lo][:12]} and {self.seq[hi][:12]}")
                    changed = True
                    break

    def _collect(self) -> None:
        o = self.out
        o.skipped = [self.seq[i] for i, v in sorted(self.verdict.items()) if v == SKIP]
        o.ambiguous = [self.seq[i] for i, v in sorted(self.verdict.items()) if v == AMBIGUOUS]

    def _finish_partial(self) -> Outcome:
        self._collect()
        if self.verdict:
            lo, hi = self._interval()
            self.out.last_good, self.out.first_bad = self.seq[lo], self.seq[hi]
            self._values(lo, hi)
        return self.out

    def _values(self, lo: int, hi: int) -> None:
        o = self.out
        o.last_good_value = median(self.samples[self.seq[lo]])
        o.first_bad_value = median(self.samples[self.seq[hi]])

    def _finish(self) -> Outcome:
        o = self.out
        self._collect()
        lo, hi = self._interval()
        o.last_good, o.first_bad = self.seq[lo], self.seq[hi]
        self._values(lo, hi)
        between = [self.seq[i] for i in range(lo + 1, hi)]
        if hi == len(self.seq) - 1 and not self.bad_is_candidate:
            o.status = "pruned_culprit"
            o.message = ("every candidate commit measured good: the regression comes from a commit "
                         "pruning ruled out; rerun without --prune")
            o.suspects = [o.first_bad]
            return o
        o.suspects = [*between, o.first_bad]
        if between:
            o.status = "ambiguous"
            o.message = (f"the first bad commit is one of {len(o.suspects)} (skipped or ambiguous "
                         f"commits sit between the last good and the first bad)")
        else:
            o.message = f"first bad commit: {o.first_bad[:12]}"
        return o


def bisect(commits: list[str], measure: Measure, config: SearchConfig | None = None,
           may_affect: MayAffect | None = None, on_step: Callable[[Step], None] | None = None,
           polarity: Callable[[], bool] | None = None) -> Outcome:
    """Find the first bad commit in ``commits`` (oldest first: GOOD, ..., BAD).

    ``may_affect`` prunes commits that cannot change the benchmark: they are never run and
    cannot be the answer. ``on_step`` sees every logged step as it happens. ``polarity``,
    when given, is asked after the baselines ran whether lower is better (e.g. from the unit
    the benchmark printed); otherwise ``config.lower_is_better`` decides.
    """
    if len(commits) < 2:
        raise ValueError("bisect needs at least GOOD and BAD")
    return _Search(list(commits), measure, config or SearchConfig(), may_affect, on_step, polarity).run()


def estimated_steps(n_commits: int) -> int:
    """About how many bisection steps ``n_commits`` commits take (ceil(log2(n + 1)))."""
    return max(1, (n_commits).bit_length())
