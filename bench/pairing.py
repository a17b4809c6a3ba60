"""Would pairing adjacent A and B invocations resolve more than the unpaired test? (issue 38, "pair what can be paired")

Reads the samples of A/A (or A/B) labels from a run history (``perfq run --ab`` stores each
sample's round: the base and head invocations of one round run next to each other, in
alternating order) and computes, per test and on the same samples:

* unpaired: perfq's verdict statistics (Yuen's trimmed test on the log-times, :mod:`perfq.run.compare`):
  the resolution R (the 90% TOST interval's farthest end);
* paired t: the per-round log-ratios ``log(head_r) - log(base_r)``, a one-sample t interval
  (``scipy.stats.ttest_1samp``);
* paired trimmed: the same log-ratios, Tukey-McLaughlin's 20%-trimmed interval
  (``scipy.stats.mstats.trimmed_mean_ci``).

Only rounds with a sample on both sides count, for all three. Prints the correlation of the two
sides' log-times over the rounds (what pairing can remove), the median and the 90th
percentile of R of each, the share of tests with R <= 5% (what `same` needs), and, for an A/A, the
tests each would call a change (two-sided 95% interval excluding 0 after Benjamini-Hochberg, and
|change| >= 5%): false positives.

Usage: python bench/pairing.py HISTORY LABEL [LABEL ...]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy import stats
from scipy.stats import mstats

from perfq.run.compare import TestKey, compare_samples
from schema.results_store import runs_for_label

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


def paired(ratios: np.ndarray) -> tuple[float, float, float, float]:
    """(R of the paired t, its p, R of the paired trimmed interval, its estimate) on log-ratios."""
    t = stats.ttest_1samp(ratios, 0.0)
    ci = t.confidence_interval(1 - 2 * ALPHA)
    low, high = mstats.trimmed_mean_ci(ratios, limits=(0.2, 0.2), alpha=2 * ALPHA)
    return resolution(ci.low, ci.high), float(t.pvalue), resolution(low, high), float(stats.trim_mean(ratios, 0.2))


def unpaired(pairs: dict[int, list[float]]) -> tuple[float, float, float]:
    """(R, raw p, change) of perfq's own comparison on these samples."""
    key = TestKey("b", "t", "eager", "cpu", "time", "us")
    t = compare_samples([(key, v[0]) for v in pairs.values()], [(key, v[1]) for v in pairs.values()]).tests[0]
    return t.resolution or math.inf, t.p_raw if t.p_raw is not None else 1.0, t.change or 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("history", type=Path)
    parser.add_argument("labels", nargs="+")
    args = parser.parse_args()
    rows = []
    for label in args.labels:
        for key, pairs in sorted(rounds_of(args.history, label).items()):
            if len(pairs) < 3:
                continue
            ratios = np.log([h / b for b, h in pairs.values()])
            r_un, p_un, change = unpaired(pairs)
            r_t, p_t, r_tr, est = paired(ratios)
            logs = np.log(list(pairs.values()))
            rho = float(np.corrcoef(logs[:, 0], logs[:, 1])[0, 1]) if np.ptp(logs, axis=0).all() else math.nan
            rows.append((f"{label}:{key[0]}/{key[1]}", len(pairs), r_un, r_t, r_tr, p_un, p_t, change, est, rho))
    if not rows:
        sys.exit("error: no test with 3 or more paired rounds")
    print(f"{len(rows)} tests, {sum(r[1] for r in rows)} pairs (rounds with both sides)")
    for name, col in (("unpaired Yuen", 2), ("paired t", 3), ("paired 20%-trimmed", 4)):
        values = [r[col] for r in rows]
        print(f"{name:>20}: median R {statistics.median(values):.2%}, p90 {np.percentile(values, 90):.2%}, "
              f"R <= 5% on {sum(v <= MIN_EFFECT for v in values)}/{len(values)}")
    corr = [r[9] for r in rows if math.isfinite(r[9])]
    print(f"correlation of log(base_r) and log(head_r) over the rounds: median {statistics.median(corr):.2f} "
          f"(pairing narrows only what the two invocations of a round share)")
    narrower = sum(r[3] < r[2] for r in rows)
    print(f"paired t narrower than unpaired on {narrower}/{len(rows)} tests; "
          f"median ratio R_paired/R_unpaired {statistics.median(r[3] / r[2] for r in rows):.2f}")
    for name, p_col, est_col in (("unpaired", 5, 7), ("paired t", 6, 8)):
        q = stats.false_discovery_control([r[p_col] for r in rows], method="bh")
        flagged = [r[0] for r, qv in zip(rows, q, strict=True)
                   if qv < ALPHA and abs(math.expm1(r[est_col]) if est_col == 8 else r[est_col]) >= MIN_EFFECT]
        print(f"{name} would call a change (q < {ALPHA}, |change| >= 5%) on {len(flagged)}: {flagged[:5]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
