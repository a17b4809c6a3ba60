"""The nightly's coverage trend: one row per night from `perfq coverage --format json`, kept in a JSON file."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from common import files
from common.errors import PerfqError
from common.render import md_table

KEEP_NIGHTS = 400


@dataclass(frozen=True)
class Night:
    """One night's coverage totals."""

    date: str
    commit: str
    ops_total: int
    ops_covered: int
    ops_ratio: float
    benchmarks: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def night_from_report(report: Path, commit: str, date: str | None = None) -> Night:
    """The totals of a coverage JSON report."""
    try:
        summary = json.loads(files.read_input(report, files.InputKind.report))["summary"]
        return Night(date or dt.date.today().isoformat(), commit, int(summary["ops_total"]),
                     int(summary["ops_covered"]), float(summary["ops_ratio"]), int(summary["benchmarks"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise PerfqError(f"{report}: not a `perfq coverage --format json` report ({exc})") from None


def read_trend(path: Path) -> list[Night]:
    """The nights stored so far (none when the file does not exist yet)."""
    if not path.exists():
        return []
    try:
        return [Night(**row) for row in json.loads(files.read_input(path, files.InputKind.report))["nights"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise PerfqError(f"{path}: not a coverage trend file ({exc})") from None


def add_night(nights: list[Night], night: Night) -> list[Night]:
    """``nights`` with ``night`` replacing a row of the same date and commit, the newest ``KEEP_NIGHTS`` kept."""
    kept = [n for n in nights if (n.date, n.commit) != (night.date, night.commit)]
    return sorted([*kept, night], key=lambda n: n.date)[-KEEP_NIGHTS:]


def trend_markdown(nights: list[Night], last: int = 14) -> str:
    """The last nights as a markdown table, newest first, with the change in covered operators."""
    rows = []
    shown = nights[-last:]
    for i, n in reversed(list(enumerate(shown))):
        prev = shown[i - 1] if i else None
        delta = "" if prev is None else f"{n.ops_covered - prev.ops_covered:+d}"
        rows.append((n.date, n.commit[:12], n.ops_covered, n.ops_total, f"{n.ops_ratio:.1%}", delta, n.benchmarks))
    head = ("night", "commit", "covered", "operators", "ratio", "change", "benchmarks")
    return "\n".join(["### Operator benchmark coverage, night by night", "",
                      *md_table(head, "llrrrrr", rows)]) + "\n"
