"""Turning a benchmark's output into one number, and knowing which direction is better (pure).

Three ways, in order of precedence: ``--metric REGEX`` (its first group; with several
matches they are combined by ``aggregate``), ``--metric-json PATH`` (a dotted path into
JSON output, list indices allowed: ``results.0.ms``), or auto-detection of the one number
in the output that carries a unit (``time: 12.3 ms``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from common.errors import PerfqError

LOWER_UNITS = ("ns", "us", "µs", "ms", "s", "sec", "secs", "seconds", "msec", "usec", "cycles")
HIGHER_UNITS = ("GB/s", "MB/s", "KB/s", "TB/s", "GiB/s", "MiB/s", "TFLOPS", "GFLOPS", "MFLOPS",
                "TFLOP/s", "GFLOP/s", "it/s", "items/s", "samples/s", "tokens/s", "img/s", "ops/s", "qps")

_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_UNIT_ALT = "|".join(re.escape(u) for u in sorted(LOWER_UNITS + HIGHER_UNITS, key=len, reverse=True))
_WITH_UNIT = re.compile(rf"(?<![\w.])({_NUM})\s*({_UNIT_ALT})(?![\w/])", re.IGNORECASE)
_UNIT_AFTER = re.compile(rf"^\s*({_UNIT_ALT})(?![\w/])", re.IGNORECASE)

AGGREGATES = ("first", "last", "sum", "mean", "min", "max")


@dataclass(frozen=True)
class MetricSpec:
    """How to read the metric: at most one of ``regex`` / ``json_path``; none: auto-detect."""

    regex: str | None = None
    json_path: str | None = None
    aggregate: str = "first"


@dataclass(frozen=True)
class Reading:
    """One value read from one run's output, with the unit when it is known."""

    value: float
    unit: str | None = None


def unit_polarity(unit: str | None) -> bool | None:
    """True when lower is better for ``unit``, False when higher is, None when unknown."""
    if not unit:
        return None
    u = unit.strip().lower()
    if u in {x.lower() for x in LOWER_UNITS}:
        return True
    if u in {x.lower() for x in HIGHER_UNITS} or u.endswith("/s"):
        return False
    return None


def _name_polarity(key: str) -> tuple[bool | None, str | None]:
    k = key.lower()
    for unit, words in (("ms", ("_ms", "ms")), ("us", ("_us", "usec")), ("ns", ("_ns",)),
                        ("s", ("_s", "seconds", "_sec", "time", "latency", "duration"))):
        if any(k.endswith(w) for w in words):
            return True, unit
    for unit, words in (("GB/s", ("gbps", "gb_s", "bandwidth")), ("TFLOPS", ("tflops", "flops")),
                        ("it/s", ("it_s", "throughput", "per_sec", "per_second"))):
        if any(k.endswith(w) for w in words):
            return False, unit
    return None, None


def _combine(values: list[float], how: str) -> float:
    if how == "first":
        return values[0]
    if how == "last":
        return values[-1]
    if how == "sum":
        return sum(values)
    if how == "mean":
        return sum(values) / len(values)
    if how == "min":
        return min(values)
    if how == "max":
        return max(values)
    raise PerfqError(f"unknown aggregate {how!r} (one of {', '.join(AGGREGATES)})")


def _from_regex(text: str, pattern: str, how: str) -> Reading:
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise PerfqError(f"--metric {pattern!r} is not a valid regular expression: {exc}") from None
    if rx.groups < 1:
        raise PerfqError(f"--metric {pattern!r} needs a group around the number, e.g. 'time: ([0-9.]+)'")
    values, unit = [], None
    for m in rx.finditer(text):
        try:
            values.append(float(m.group(1)))
        except (TypeError, ValueError):
            raise PerfqError(f"--metric matched {m.group(1)!r}, which is not a number") from None
        after = _UNIT_AFTER.match(text[m.end(1):])
        unit = unit or (after.group(1) if after else None)
    if not values:
        raise PerfqError(f"--metric {pattern!r} matched nothing in the benchmark output")
    return Reading(_combine(values, how), unit)


def _from_json(text: str, path: str) -> Reading:
    doc = None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        for line in reversed(text.strip().splitlines()):
            try:
                doc = json.loads(line)
                break
            except json.JSONDecodeError:
                continue
    if doc is None:
        raise PerfqError("--metric-json: the benchmark output is not JSON (nor is any line of it)")
    node = doc
    for part in path.split("."):
        if isinstance(node, list) and part.lstrip("-").isdigit() and -len(node) <= int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise PerfqError(f"--metric-json: no {part!r} at {path!r} in the benchmark's JSON output")
    if isinstance(node, bool) or not isinstance(node, int | float):
        raise PerfqError(f"--metric-json: {path!r} is {node!r}, not a number")
    _, unit = _name_polarity(path.split(".")[-1])
    return Reading(float(node), unit)


def auto_detect(text: str) -> Reading:
    """The one number with a unit in ``text``; several different ones is an error."""
    found = [(float(m.group(1)), m.group(2)) for m in _WITH_UNIT.finditer(text)]
    distinct = list(dict.fromkeys(found))
    if not distinct:
        raise PerfqError("no number with a unit (ms, us, s, GB/s, TFLOPS, it/s...) in the benchmark "
                         "output; pass --metric REGEX or --metric-json PATH")
    if len(distinct) > 1:
        shown = ", ".join(f"{v:g} {u}" for v, u in distinct[:4])
        raise PerfqError(f"the benchmark output has {len(distinct)} numbers with units ({shown}); "
                         "say which one with --metric REGEX or --metric-json PATH")
    return Reading(*distinct[0])


def extract(text: str, spec: MetricSpec) -> Reading:
    """The metric value of one run's output ``text`` (PerfqError when it cannot be read)."""
    if spec.regex and spec.json_path:
        raise PerfqError("use either --metric or --metric-json, not both")
    if spec.regex:
        reading = _from_regex(text, spec.regex, spec.aggregate)
    elif spec.json_path:
        reading = _from_json(text, spec.json_path)
    else:
        reading = auto_detect(text)
    if not math.isfinite(reading.value):
        raise PerfqError(f"the metric is {reading.value}, not a finite number")
    return reading


def polarity(lower: bool | None, higher: bool | None, unit: str | None) -> tuple[bool, str]:
    """(lower_is_better, explanation) from the flags, else from the unit; PerfqError if neither."""
    if lower and higher:
        raise PerfqError("--lower-is-better and --higher-is-better contradict each other")
    if lower:
        return True, "lower is better (--lower-is-better)"
    if higher:
        return False, "higher is better (--higher-is-better)"
    inferred = unit_polarity(unit)
    if inferred is None:
        raise PerfqError("cannot tell whether lower or higher is better for this metric; "
                         "pass --lower-is-better or --higher-is-better")
    word = "lower" if inferred else "higher"
    return inferred, f"{word} is better (inferred from the unit {unit})"
