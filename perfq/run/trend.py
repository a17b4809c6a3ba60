"""A benchmark's results over time and the steps in them (`perfq history`).

Each stored run gives one point per test: the median of its samples. Steps are found by
binary segmentation with a robust score. The noise of a series is estimated once from its
first differences, ``sigma = 1.4826 * median(|x[i+1] - x[i]|) / sqrt(2)`` (a level shift changes
one difference, a wild run two, so neither inflates it), floored at ``NOISE_FLOOR`` of the
level. For every split of a segment into a left and a right part (each at least
``MIN_SEGMENT`` points), ``score = |median(right) - median(left)| / (sigma * sqrt(1/n_left +
1/n_right))``. The best split is a step when its score is at least ``MIN_SCORE`` and the medians
differ by at least ``min_effect``; both parts are then searched again (at most ``MAX_STEPS``).
Medians make one wild run unable to create or hide a step.

A series is one side's: base and head runs of a label ran different code, so a PR label
interleaving them would show a "step" at every run. Each (test, side) gets its own trend.

Pure (numpy only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MIN_SEGMENT = 2
MIN_SCORE = 4.0
NOISE_FLOOR = 0.005  # of the level: runs of a deterministic benchmark still have a scale
MAX_STEPS = 8
SPARK = "▁▂▃▄▅▆▇█"


@dataclass(frozen=True)
class Point:
    """One run's median of one test."""

    label: str
    side: str
    ref: str
    started_at: str
    median: float
    n: int


@dataclass(frozen=True)
class Step:
    """A level shift: the series changes between point ``index - 1`` and point ``index``."""

    index: int
    label: str
    ref: str
    started_at: str
    before: float
    after: float
    change: float  # after / before - 1
    score: float


@dataclass(frozen=True)
class Trend:
    """One test's series on one side (``base`` or ``head``) and its steps."""

    test: str
    mode: str
    device: str
    metric: str
    unit: str
    points: tuple[Point, ...]
    steps: tuple[Step, ...]
    side: str = ""


def noise(values: np.ndarray) -> float:
    """The robust noise scale of a series (from its first differences), floored."""
    level = float(np.median(np.abs(values))) if len(values) else 0.0
    diffs = np.abs(np.diff(values))
    sigma = 1.4826 * float(np.median(diffs)) / np.sqrt(2) if len(diffs) else 0.0
    return max(sigma, NOISE_FLOOR * level, 1e-12)


def best_split(values: np.ndarray, sigma: float) -> tuple[int, float, float] | None:
    """(split index, score, relative change) of the strongest split, or None when too short."""
    n = len(values)
    best = None
    for k in range(MIN_SEGMENT, n - MIN_SEGMENT + 1):
        before, after = float(np.median(values[:k])), float(np.median(values[k:]))
        score = abs(after - before) / (sigma * np.sqrt(1 / k + 1 / (n - k)))
        change = after / before - 1 if before else float("inf")
        if best is None or score > best[1]:
            best = (k, float(score), change)
    return best


def find_steps(values: Sequence[float], min_effect: float = 0.05) -> list[tuple[int, float]]:
    """(index, score) of every step of ``values``, in order (binary segmentation)."""
    arr = np.asarray(values, dtype=float)
    sigma = noise(arr)
    found: list[tuple[int, float]] = []

    def search(lo: int, hi: int) -> None:
        if len(found) >= MAX_STEPS or hi - lo < 2 * MIN_SEGMENT:
            return
        split = best_split(arr[lo:hi], sigma)
        if split is None:
            return
        k, score, change = split
        if score < MIN_SCORE or abs(change) < min_effect:
            return
        found.append((lo + k, score))
        search(lo, lo + k)
        search(lo + k, hi)

    search(0, len(arr))
    return sorted(found)


def trend(key: tuple[str, str, str, str, str], points: Sequence[Point], min_effect: float = 0.05,
          side: str = "") -> Trend:
    """The trend of one test (``key``: test, mode, device, metric, unit) over ``points`` (oldest first)."""
    values = [p.median for p in points]
    found = find_steps(values, min_effect)
    steps = []
    bounds = [0, *(i for i, _ in found), len(values)]
    scores = dict(found)
    for a, b, c in zip(bounds, bounds[1:], bounds[2:], strict=False):
        before, after = float(np.median(values[a:b])), float(np.median(values[b:c]))
        p = points[b]
        steps.append(Step(b, p.label, p.ref, p.started_at, before, after, after / before - 1 if before else 0.0,
                          round(scores[b], 2)))
    return Trend(*key, tuple(points), tuple(steps), side=side)


def sparkline(values: Sequence[float], width: int = 24) -> str:
    """``values`` (the last ``width``) as block characters scaled between their min and max."""
    vals = list(values)[-width:]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    if hi - lo <= 1e-12 * max(abs(hi), 1.0):
        return SPARK[3] * len(vals)
    return "".join(SPARK[min(int((v - lo) / (hi - lo) * len(SPARK)), len(SPARK) - 1)] for v in vals)


def trends_from_rows(rows: Sequence[object], min_effect: float = 0.05) -> list[Trend]:
    """Trends of history rows (one per run and test, oldest run first), one per test/mode/device/metric
    and side: base and head samples are never merged into one series."""
    groups: dict[tuple[str, str, str, str, str, str], list[Point]] = {}
    for r in rows:
        key = (r.test, r.mode or "", r.device or "", r.metric or "", r.unit or "", r.side or "")
        groups.setdefault(key, []).append(Point(r.label, r.side, r.ref or "", r.started_at or "", float(r.median), r.n))
    return [trend(key[:5], sorted(points, key=lambda p: p.started_at), min_effect, side=key[5])
            for key, points in sorted(groups.items())]
