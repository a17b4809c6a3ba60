"""Would pairing adjacent A and B invocations resolve more than the unpaired test? (issue 38, "pair what can be paired")

Reads the samples of A/A (or A/B) labels from a run history (``perfq run --ab`` stores each
sample's round: the base and head invocations of one round run next to each other, in
alternating order) and computes, per test and on the same samples:

* unpaired: perfq's verdict statistics (Yuen's trimmed test on the log-times, :mod:`perfq.run.compare`):
  the resolution R (the 90% TOST interval's farthest end); and the same untrimmed (Welch's test), the one
  to set against the paired t;
* paired t: the per-round log-ratios ``log(head_r) - log(base_r)``, a one-sample t interval
  (``scipy.stats.ttest_1samp``);
* paired trimmed: the same log-ratios, Tukey-McLaughlin's 20%-trimmed interval
  (``scipy.stats.mstats.trimmed_mean_ci``);
* round pairs: the mean log-ratio of rounds 2k and 2k+1 (A B then B A: each side once first and once
  second), a one-sample t interval: cancels what the order within a round does, with half the pairs.

Only rounds with a sample on both sides count, for all of them. Prints the spread of the raw log
samples (a side's standard deviation) beside that of the per-round log-ratios, the correlation of
the two sides' log-times over the rounds (what pairing can remove), the median and the 90th
percentile of R of each, the share of tests with R <= 5% (what `same` needs), and the tests each
would call a change (two-sided 95% interval excluding 0 after Benjamini-Hochberg, and |change| >=
5%): for an A/A every one is false; with ``--op-tests REGEX`` (benchmark/test of the tests a change
was injected into, e.g. bench/power.py's ``--keep``), those found and the false ones apart. Then
the machine's side of it: per round, each side's shared speed (the median over its tests of the
log-time less the test's median), their correlation over the rounds (a drift both sides share
makes it positive), and the first process of a round against the second (the order effect).

Usage: python bench/pairing.py HISTORY LABEL [LABEL ...] [--op-tests REGEX]
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats
from scipy.stats import mstats

from perfq.run.compare import Settings, TestKey, compare_samples
from perfq.run.store import runs_for_label

MIN_EFFECT = 0.05
ALPHA = 0.05


def rounds_of(history: Path, label: str) -> dict[tuple[str, str], dict[int, list[float]]]:
    """(benchmark, test) -> round -> [base value, head value] for rounds that have both."""
    runs = {r.side: r for r in runs_for_label(history, label)}
    by: dict[tuple[str, str], dict[int, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for side in ("base", "head"):
        for s in runs[side].samples:
            by[(s.benchmark, f"{s.test}/{s.metric}")][s.repeat_index][side] = s.value
    return {key: {r: [v["base"], v["head"]] for r, v in rounds.items() if len(v) == 2} for key, rounds in by.items()}


def resolution(low: float, high: float) -> float:
    return max(abs(math.expm1(low)), abs(math.expm1(high)))


def paired(ratios: np.ndarray) -> tuple[float, float, float, float, float]:
    """(R of the paired t, its p, R of the paired trimmed interval, its p, its estimate) on log-ratios."""
    t = stats.ttest_1samp(ratios, 0.0)
    ci = t.confidence_interval(1 - 2 * ALPHA)
    low, high = mstats.trimmed_mean_ci(ratios, limits=(0.2, 0.2), alpha=2 * ALPHA)
    est = float(stats.trim_mean(ratios, 0.2))
    # the interval's own standard error and degrees of freedom give its p (Tukey-McLaughlin)
    n = ratios.size
    df = n - 2 * int(0.2 * n) - 1
    se = (high - low) / 2 / stats.t.ppf(1 - ALPHA, df)
    p_tr = float(2 * stats.t.sf(abs(est) / se, df)) if se > 0 else float(est == 0)
    return resolution(ci.low, ci.high), float(t.pvalue), resolution(low, high), p_tr, est


def round_pairs(ratios: dict[int, float]) -> tuple[float, float]:
    """(R, p) of the one-sample t on the means of rounds 2k and 2k+1 (nan with fewer than 3 such pairs)."""
    means = [(ratios[r] + ratios[r + 1]) / 2 for r in ratios if r % 2 == 0 and r + 1 in ratios]
    if len(means) < 3:
        return math.nan, 1.0
    t = stats.ttest_1samp(means, 0.0)
    ci = t.confidence_interval(1 - 2 * ALPHA)
    return resolution(ci.low, ci.high), float(t.pvalue) if math.isfinite(t.pvalue) else 1.0


def shared_speeds(history: Path, label: str) -> tuple[list[int], np.ndarray]:
    """(rounds, per round the (base, head) shared speed): the median over a side's tests of the log-time less
    the test's median over both sides."""
    pairs = rounds_of(history, label)
    rounds = sorted({r for by in pairs.values() for r in by})
    deviations: dict[int, list[list[float]]] = {r: [[], []] for r in rounds}
    for by in pairs.values():
        logs = np.log(list(by.values()))
        center = float(np.median(logs))
        for r, (b, h) in zip(by, logs, strict=True):
            deviations[r][0].append(b - center)
            deviations[r][1].append(h - center)
    return rounds, np.array([[np.median(deviations[r][0]), np.median(deviations[r][1])] for r in rounds])


def print_machine(history: Path, label: str) -> None:
    """The sides' shared speeds over the rounds, their correlation and the order effect within a round."""
    rounds, speed = shared_speeds(history, label)
    if len(rounds) < 3:
        return
    first = [speed[i, r % 2] for i, r in enumerate(rounds)]  # even rounds run the base first
    second = [speed[i, 1 - r % 2] for i, r in enumerate(rounds)]
    each = (f"{r}: {math.expm1(b):+.0%} {math.expm1(h):+.0%}" for r, (b, h) in zip(rounds, speed, strict=True))
    print(f"{label}: shared speed a round (base, head): {', '.join(each)}")
    print(f"{label}: correlation of the sides' shared speeds over {len(rounds)} rounds "
          f"{np.corrcoef(speed[:, 0], speed[:, 1])[0, 1]:+.2f}; first process of a round against the second: "
          f"median {math.expm1(statistics.median(a - b for a, b in zip(first, second, strict=True))):+.1%}, "
          f"{sum(a > b for a, b in zip(first, second, strict=True))}/{len(rounds)} rounds slower")


def unpaired(pairs: dict[int, list[float]], trim: float = 0.2) -> tuple[float, float, float]:
    """(R, raw p, change) of perfq's own comparison on these samples (``trim`` 0: Welch's test)."""
    key = TestKey("b", "t", "eager", "cpu", "time", "us")
    t = compare_samples([(key, v[0]) for v in pairs.values()], [(key, v[1]) for v in pairs.values()],
                        Settings(trim=trim)).tests[0]
    return t.resolution or math.inf, t.p_raw if t.p_raw is not None else 1.0, t.change or 0.0


@dataclass(frozen=True)
class Row:
    """One test's rounds: the spreads and, per method, (R, p, change)."""

    name: str
    pairs: int
    spread_raw: float  # a side's standard deviation of the log-times (mean of the two sides)
    spread_ratio: float  # the standard deviation of the per-round log-ratios
    rho: float  # correlation of the two sides' log-times over the rounds
    methods: dict[str, tuple[float, float, float]]


def row_of(name: str, pairs: dict[int, list[float]]) -> Row:
    ratios = np.log([h / b for b, h in pairs.values()])
    r_un, p_un, change = unpaired(pairs)
    r_t, p_t, r_tr, p_tr, est = paired(ratios)
    r_rp, p_rp = round_pairs(dict(zip(pairs, ratios.tolist(), strict=True)))
    logs = np.log(list(pairs.values()))
    rho = float(np.corrcoef(logs[:, 0], logs[:, 1])[0, 1]) if np.ptp(logs, axis=0).all() else math.nan
    methods = {"unpaired Yuen": (r_un, p_un, change), "unpaired Welch": unpaired(pairs, 0.0),
               "paired t": (r_t, p_t, math.expm1(float(np.mean(ratios)))),
               "paired 20%-trimmed": (r_tr, p_tr, math.expm1(est)),
               "round pairs t": (r_rp, p_rp, math.expm1(float(np.mean(ratios))))}
    return Row(name, len(pairs), float(np.mean(np.std(logs, axis=0, ddof=1))), float(np.std(ratios, ddof=1)), rho,
               methods)


def print_methods(rows: list[Row], injected: re.Pattern[str] | None) -> None:
    """Per method: R, and the tests it would call a change (the injected ones apart)."""
    for name in rows[0].methods:
        values = [r.methods[name][0] for r in rows if math.isfinite(r.methods[name][0])]
        q = stats.false_discovery_control([r.methods[name][1] for r in rows], method="bh")
        flagged = [r.name for r, qv in zip(rows, q, strict=True)
                   if qv < ALPHA and abs(r.methods[name][2]) >= MIN_EFFECT]
        found = [f for f in flagged if injected and injected.search(f.split(":", 1)[1])]
        hits = f"{len(found)}/{sum(bool(injected.search(r.name.split(':', 1)[1])) for r in rows)} injected found, " \
            if injected else ""
        print(f"{name:>20}: median R {statistics.median(values):.2%}, p90 {np.percentile(values, 90):.2%}, "
              f"R <= 5% on {sum(v <= MIN_EFFECT for v in values)}/{len(values)}; {hits}"
              f"{len(flagged) - len(found)} false changes {[f for f in flagged if f not in found][:4]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("history", type=Path)
    parser.add_argument("labels", nargs="+")
    parser.add_argument("--op-tests", help="regex on benchmark/test: the tests a change was injected into")
    args = parser.parse_args()
    rows = [row_of(f"{label}:{key[0]}/{key[1]}", pairs) for label in args.labels
            for key, pairs in sorted(rounds_of(args.history, label).items()) if len(pairs) >= 3]
    if not rows:
        sys.exit("error: no test with 3 or more paired rounds")
    print(f"{len(rows)} tests, {sum(r.pairs for r in rows)} pairs (rounds with both sides)")
    print(f"spread (median over the tests): a side's log-times {statistics.median(r.spread_raw for r in rows):.1%}, "
          f"the per-round log-ratios {statistics.median(r.spread_ratio for r in rows):.1%} "
          f"(independent sides: sqrt(2) x {statistics.median(r.spread_raw for r in rows):.1%} = "
          f"{math.sqrt(2) * statistics.median(r.spread_raw for r in rows):.1%})")
    corr = [r.rho for r in rows if math.isfinite(r.rho)]
    print(f"correlation of log(base_r) and log(head_r) over the rounds: median {statistics.median(corr):.2f} "
          f"(pairing narrows only what the two invocations of a round share)")
    print_methods(rows, re.compile(args.op_tests) if args.op_tests else None)
    for label in args.labels:
        print_machine(args.history, label)
    return 0


if __name__ == "__main__":
    sys.exit(main())
