"""Render a comparison: the JSON document of `perfq compare --format json` and the PR markdown."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from perfq.run.compare import Comparison, sorted_for_report

DETAILS_AFTER = 10  # tables longer than this are folded into a <details> block


def side_info(runs: Iterable[Any]) -> dict[str, Any]:
    """What a side ran on: refs, commits, torch versions, hosts (runs are results_store.Run)."""
    runs = list(runs)

    def uniq(attr: str) -> list[str]:
        return sorted({str(getattr(r, attr)) for r in runs if getattr(r, attr)})

    return {
        "ref": ", ".join(uniq("ref")),
        "commit": ", ".join(uniq("commit_sha")),
        "torch_version": ", ".join(uniq("torch_version")),
        "python": ", ".join(uniq("python")),
        "host": ", ".join(uniq("host")),
        "cpu": ", ".join(uniq("cpu")),
        "runs": [r.id for r in runs],
        "status": "complete" if runs and all(r.status == "complete" for r in runs) else "incomplete",
        "samples": sum(len(r.samples) for r in runs),
        "failures": [
            {"benchmark": f.benchmark, "returncode": f.returncode, "stderr_tail": f.stderr_tail}
            for r in runs
            for f in r.failures
        ],
    }


def comparison_document(label: str, base_runs: list[Any], head_runs: list[Any], result: Comparison) -> dict:
    """The `perfq compare --format json` document."""
    tests = sorted_for_report(result.tests)
    return {
        "label": label,
        "base": side_info(base_runs),
        "head": side_info(head_runs),
        "summary": result.counts(),
        "tests": [t.as_dict() for t in tests],
        "ignored": [f"{k.benchmark}/{k.test}" for k in result.ignored],
    }


def fmt_change(change: float | None) -> str:
    return "n/a" if change is None else f"{change:+.1%}"


def fmt_ci(ci: list[float] | None) -> str:
    return "n/a" if not ci else f"[{ci[0]:+.1%}, {ci[1]:+.1%}]"


def fmt_value(value: float | None, unit: str = "") -> str:
    if value is None:
        return "n/a"
    return f"{value:.4g} {unit}".strip()


def fmt_p(p: float | None) -> str:
    return "n/a" if p is None else f"{p:.2g}"


def summary_line(doc: dict) -> str:
    c = doc["summary"]
    n = sum(c.values())
    icon = ":red_circle:" if c["regression"] else ":green_circle:" if not c["unknown"] else ":white_circle:"
    return (
        f"{icon} **perfq `{doc['label']}`**: {c['regression']} regression(s), "
        f"{c['improvement']} improvement(s), {c['same']} same, {c['unknown']} unknown across {n} test(s)"
    )


def _table(rows: list[dict]) -> list[str]:
    out = [
        "| verdict | benchmark | test | mode | device | base | head | change | CI | q |",
        "|---|---|---|---|---|---:|---:|---:|---|---:|",
    ]
    for t in rows:
        out.append(
            f"| {t['verdict']} | {t['benchmark']} | `{t['test']}` | {t['mode']} | {t['device']} | "
            f"{fmt_value(t['base_median'], t['unit'])} | {fmt_value(t['head_median'], t['unit'])} | "
            f"{fmt_change(t['change'])} | {fmt_ci(t['ci'])} | {fmt_p(t['p_value'])} |"
        )
    return out


def _section(title: str, rows: list[dict], fold: bool) -> list[str]:
    if not rows:
        return []
    lines = _table(rows)
    if fold and len(rows) > DETAILS_AFTER:
        return ["", f"<details><summary>{title} ({len(rows)})</summary>", "", *lines, "", "</details>"]
    return ["", f"**{title}** ({len(rows)})", "", *lines]


def render_markdown(doc: dict) -> str:
    """PR comment: summary first, regressions first, environment and commits at the end."""
    tests = doc["tests"]
    by = {v: [t for t in tests if t["verdict"] == v] for v in ("regression", "improvement", "unknown", "same")}
    lines = [summary_line(doc)]
    lines += _section("Regressions", by["regression"], fold=False)
    lines += _section("Improvements", by["improvement"], fold=True)
    lines += _section("Unknown (more repeats may resolve these)", by["unknown"], fold=True)
    lines += _section("Same", by["same"], fold=True)
    failures = doc["base"]["failures"] + doc["head"]["failures"]
    if failures:
        lines += ["", f"<details><summary>Failed benchmarks ({len(failures)})</summary>", ""]
        for f in failures:
            lines += [f"- **{f['benchmark']}** (exit {f['returncode']})", "", "```", f["stderr_tail"], "```"]
        lines += ["", "</details>"]
    if doc.get("ignored"):
        lines += ["", f"Ignored by config: {len(doc['ignored'])} test(s)."]
    lines += ["", "**Environment**", "", "| | base | head |", "|---|---|---|"]
    for key in ("ref", "commit", "torch_version", "python", "host", "cpu", "status", "samples"):
        lines.append(f"| {key} | {doc['base'][key] or '-'} | {doc['head'][key] or '-'} |")
    lines += [
        "",
        "<sub>Verdicts: Mann-Whitney U and Kolmogorov-Smirnov p (min, x2), Benjamini-Hochberg q across all "
        "tests; regression/improvement needs q < alpha, |change| >= min effect and a CI excluding 0; "
        "same needs the CI within ± min effect.</sub>",
    ]
    return "\n".join(lines) + "\n"
