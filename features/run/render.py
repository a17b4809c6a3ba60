"""Terminal views of `perfq compare` and `perfq history`: legible at 80 columns.

Identifiers fold instead of being cut, columns whose value is the same in every row are
dropped (and said once above the table), units move into the header when shared, and
large changes are written compactly (``+1226%``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.console import Console
from rich.markup import escape

from perfq.common.render import folded_table
from perfq.run.compare import Verdict
from perfq.run.report import VOLATILE_ENV, ComparisonDocument, env_differences, fmt_p, summary_line
from perfq.run.trend import Trend, sparkline

COLORS = {Verdict.regression: "red", Verdict.improvement: "green", Verdict.same: "dim", Verdict.unknown: "yellow",
          Verdict.failed: "bold red"}


def pct(change: float | None) -> str:
    """``+12.3%``, ``+1226%`` (no decimals from 100%), ``n/a``."""
    if change is None:
        return "n/a"
    return f"{change:+.0%}" if abs(change) >= 1 else f"{change:+.1%}"


def ci_text(ci: Sequence[float] | None) -> str:
    return "n/a" if not ci else f"{pct(ci[0])}..{pct(ci[1])}"


def num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


table = folded_table


def constant_columns(rows: Sequence[object], fields: Sequence[str]) -> dict[str, str]:
    """The fields whose value is the same in every row (with that value)."""
    out = {}
    for f in fields:
        values = {str(getattr(r, f)) for r in rows}
        if len(values) == 1:
            out[f] = values.pop()
    return out


def print_comparison(con: Console, doc: ComparisonDocument) -> None:
    """The comparison as a summary line, the shared facts, one table, failures and environment differences."""
    con.print(escape(summary_line(doc).replace("**", "")))
    for problem in doc.problems:
        con.print(f"[red]{escape(problem)}[/red]")
    rows = list(doc.tests)
    shared = constant_columns(rows, ("benchmark", "mode", "device", "unit")) if rows else {}
    if rows:
        facts = [f"{k} {v}" for k, v in shared.items() if k != "unit" and v]
        if facts:
            con.print(escape("all tests: " + ", ".join(facts)), style="dim")
        unit = f" ({shared['unit']})" if shared.get("unit") else ""
        cols: list[tuple[str, str]] = [("verdict", "l"), ("test" if "benchmark" in shared else "benchmark/test", "f")]
        cols += [(name, "l") for name in ("mode", "device") if name not in shared]
        cols += [(f"base{unit}", "r"), (f"head{unit}", "r"), ("change", "r"), ("95% CI", "r"), ("q", "r")]
        t = table(*cols)
        for r in rows:
            value: Callable[[float | None], str] = num if unit else (lambda v, u=r.unit: f"{num(v)} {u}".strip())
            cells = [f"[{COLORS[r.verdict]}]{r.verdict_text()}[/]"]
            cells.append(escape(r.test if "benchmark" in shared else f"{r.benchmark}/{r.test}"))
            cells += [getattr(r, name) for name in ("mode", "device") if name not in shared]
            cells += [value(r.base_median), value(r.head_median), pct(r.change), ci_text(r.ci), fmt_p(r.p_value)]
            t.add_row(*cells)
        con.print(t)
    failures = [("base", f) for f in doc.base.failures] + [("head", f) for f in doc.head.failures]
    for side, f in failures:
        tail = f.stderr_tail.strip().splitlines()[-1] if f.stderr_tail.strip() else f"exit {f.returncode}"
        con.print(f"[red]failed on {side}[/red] {escape(f.benchmark)}: {escape(tail)}", soft_wrap=False)
    for name, info in (("base", doc.base), ("head", doc.head)):
        con.print(escape(f"{name}: ref {info.ref or '-'}, torch {info.torch_version or '-'}, {info.host or '-'}, "
                         f"{info.status.value}, {info.samples} samples"))
    differ = env_differences(doc)
    if differ:
        con.print("[bold]environment differs[/bold] (base -> head):")
        for key, b, h in differ:
            if key == "torch_config":
                con.print("  torch_config: the torch build configs differ (--format markdown shows the diff)")
            else:
                note = " (changes from minute to minute)" if key in VOLATILE_ENV else ""
                con.print(escape(f"  {key}: {b} -> {h}{note}"))


def print_trends(con: Console, benchmark: str, trends: Sequence[Trend], what: str) -> None:
    """One row per test: its runs, a sparkline of the run medians, the last value and the steps found."""
    runs = {(p.label, p.side, p.started_at) for t in trends for p in t.points}
    dates = sorted(p.started_at for t in trends for p in t.points if p.started_at)
    span = f", {dates[0][:10]} .. {dates[-1][:10]}" if dates else ""
    stepped = sum(1 for t in trends if t.steps)
    con.print(escape(f"perfq history {benchmark}: {len(trends)} test(s) over {len(runs)} run(s){what}{span}; "
                     f"{stepped} with a step"))
    shared = constant_columns(trends, ("mode", "device", "metric", "unit")) if trends else {}
    facts = [f"{k} {v}" for k, v in shared.items() if v]
    if facts:
        con.print(escape("all tests: " + ", ".join(facts)), style="dim")
    unit = shared.get("unit", "")
    t = table(("test", "f"), *[(name, "l") for name in ("mode", "device", "metric") if name not in shared],
              ("runs", "r"), ("trend", "l"), (f"last ({unit})" if unit else "last", "r"), ("steps", "f"))
    for tr in trends:
        values = [p.median for p in tr.points]
        steps = "; ".join(f"{pct(s.change)} at {s.label}" + (f" ({s.ref[:10]})" if s.ref else "") for s in tr.steps)
        last = num(values[-1]) if unit else f"{num(values[-1])} {tr.unit}".strip()
        cells = [escape(tr.test), *[getattr(tr, n) for n in ("mode", "device", "metric") if n not in shared],
                 str(len(values)), sparkline(values, 16), last, escape(steps or "-")]
        t.add_row(*cells)
    con.print(t)
