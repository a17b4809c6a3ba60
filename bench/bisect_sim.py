"""Accuracy and cost of perfq's bisection on a synthetic noisy history (not a test).

Drives the same pure search (``perfq.bisect.search.bisect``) that ``perfq bisect``
uses, with a simulated ``measure``: N commits, one of them a regression of R, every run
multiplied by Gaussian noise of relative standard deviation SIGMA, a fraction of commits
broken (never the culprit). Pruning is simulated by a predicate that says a fraction of
commits touch unrelated files (never the culprit, whose value only changes there).

    python bench/bisect_sim.py [--trials 100] [--commits 200] [--noise 0.10] [--regression 0.30]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from perfq.bisect.search import SearchConfig, bisect


def trial(seed: int, n: int, noise: float, regression: float, broken: float, unrelated: float,
          prune: bool, cfg: SearchConfig, model: str = "uniform") -> tuple[bool, bool, int, int, str]:
    """One seeded trial: (first_bad is the culprit, culprit among suspects, runs, pruned, status)."""
    rng = random.Random(seed)
    commits = [f"c{i:04d}" for i in range(n)]
    culprit = rng.randrange(1, n)
    base = rng.uniform(1.0, 100.0)
    is_broken = {c for c in commits[1:-1] if rng.random() < broken} - {commits[culprit]}
    touches = {c for c in commits if rng.random() >= unrelated} | {commits[culprit], commits[-1]}
    noise_rng = random.Random(seed * 7919 + 1)

    def measure(commit: str, runs: int) -> list[float] | None:
        if commit in is_broken:
            return None
        true = base * (1 + regression) if int(commit[1:]) >= culprit else base
        if model == "uniform":
            return [true * noise_rng.uniform(1.0 - noise, 1.0 + noise) for _ in range(runs)]
        return [true * max(0.05, noise_rng.gauss(1.0, noise)) for _ in range(runs)]

    out = bisect(commits, measure, cfg, may_affect=(lambda c: c in touches) if prune else None)
    right = out.first_bad == commits[culprit]
    return right, commits[culprit] in out.suspects, out.runs, out.pruned, out.status


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--commits", type=int, default=200)
    ap.add_argument("--noise", type=float, default=0.10,
                    help="run-to-run noise: each run within +-NOISE (uniform) or std dev NOISE (gauss)")
    ap.add_argument("--model", choices=("uniform", "gauss"), default="uniform")
    ap.add_argument("--regression", type=float, default=0.30)
    ap.add_argument("--broken", type=float, default=0.05, help="fraction of broken commits")
    ap.add_argument("--unrelated", type=float, default=0.70, help="fraction of commits pruning rules out")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cfg = SearchConfig()
    print(f"{args.trials} trials, {args.commits} commits, noise {args.noise:.0%} ({args.model}), "
          f"regression {args.regression:+.0%}, {args.broken:.0%} broken, "
          f"pruning rules out {args.unrelated:.0%}; runs={cfg.runs} threshold={cfg.threshold} "
          f"margin={cfg.margin} extra={cfg.extra_runs}")
    naive = SearchConfig(extra_runs=0, verify=False, pool=False)
    for prune, conf, label in ((False, cfg, "without --prune"), (True, cfg, "with --prune   "),
                               (False, naive, "naive median-of-3 bisection (no extra runs, no verify)")):
        t0 = time.perf_counter()
        rows = [trial(args.seed + k, args.commits, args.noise, args.regression, args.broken,
                      args.unrelated, prune, conf, args.model) for k in range(args.trials)]
        exact = sum(r[0] for r in rows)
        certain = sum(r[0] and r[4] == "found" for r in rows)
        wrong = sum(not r[0] and r[4] == "found" for r in rows)
        within = sum(r[1] for r in rows)
        runs = [r[2] for r in rows]
        statuses: dict[str, int] = {}
        for r in rows:
            statuses[r[4]] = statuses.get(r[4], 0) + 1
        print(f"{label}: right first-bad commit {exact}/{args.trials} ({exact / args.trials:.0%}; "
              f"{certain} with no caveat, the rest flagged next to skipped/ambiguous commits), "
              f"confidently wrong {wrong}, culprit among suspects {within}; benchmark runs mean "
              f"{statistics.mean(runs):.1f} (median {statistics.median(runs):.0f}, max {max(runs)}); "
              f"pruned commits mean {statistics.mean(r[3] for r in rows):.1f}; statuses {statuses}; "
              f"{time.perf_counter() - t0:.2f}s")


if __name__ == "__main__":
    main()
