"""Terminal views of `perfq compare` and `perfq history`: legible at 80 columns.

Identifiers fold instead of being cut, columns whose value is the same in every row are
dropped (and said once above the table), units move into the header when shared, and
large changes are written compactly (``+1226%``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from functools import partial

from rich.console import Console
from rich.markup import escape

from common.render import fixed, md_code, md_table, md_text, plain, print_json
from perfq.options import Format
from perfq.run.compare import Verdict
from perfq.run.report import (
    CENTER_NOTE,
    VOLATILE_ENV,
    ComparisonDocument,
    HistoryDocument,
    env_differences,
    fmt_p,
    only_in_one,
    render_markdown,
    summary_line,
)
from perfq.run.trend import Trend, sparkline
from perfq.terminal import Name, folded_table, wide_console

COLORS = {Verdict.regression: "red", Verdict.improvement: "green", Verdict.same: "dim", Verdict.unknown: "yellow",
          Verdict.failed: "bold red", Verdict.unstable: "magenta"}


def pct(change: float | None) -> str:
    """``+12.3%``, ``+1226%`` (no decimals from 100%), ``n/a``."""
    if change is None:
        return "n/a"
    return f"{change:+.0%}" if abs(change) >= 1 else f"{change:+.1%}"


def ci_text(ci: Sequence[float] | None) -> str:
    return "n/a" if not ci else f"{pct(ci[0])}..{pct(ci[1])}"


def num(value: float | None) -> str:
    """A measurement in fixed notation: ``63,130``, ``181.2`` (never ``6.313e+04``)."""
    return fixed(value)


def safe(text: object) -> str:
    """An untrusted string for a rich table: no escape sequence or control character, no markup."""
    return escape(plain(text))


table = folded_table


def constant_columns(rows: Sequence[object], fields: Sequence[str]) -> dict[str, str]:
    """The fields whose value is the same in every row (with that value)."""
    out = {}
    for f in fields:
        values = {plain(getattr(r, f)) for r in rows}
        if len(values) == 1:
            out[f] = values.pop()
    return out


def print_comparison(con: Console, doc: ComparisonDocument) -> None:
    """The comparison as a summary line, the shared facts, one table, failures and environment differences."""
    con.print(safe(summary_line(doc).replace("**", "")))
    for problem in doc.problems:
        con.print(f"[red]{safe(problem)}[/red]")
    for warning in doc.warnings:
        con.print(f"[yellow]warning:[/yellow] {safe(warning)}")
    rows = list(doc.tests)
    shared = constant_columns(rows, ("benchmark", "mode", "device", "unit")) if rows else {}
    if rows:
        facts = [f"{k} {v}" for k, v in shared.items() if k != "unit" and v]
        if facts:
            con.print(safe("all tests: " + ", ".join(facts)), style="dim")
        unit = f" ({shared['unit']})" if shared.get("unit") else ""
        cols: list[tuple[str, str]] = [("verdict", "l"), ("test" if "benchmark" in shared else "benchmark/test", "f")]
        cols += [(name, "l") for name in ("mode", "device") if name not in shared]
        cols += [(f"base{unit}", "r"), (f"head{unit}", "r"), ("change", "r"), ("95% CI", "r"), ("q", "r")]
        con.print(safe(CENTER_NOTE), style="dim")
        t = table(*cols)
        for r in rows:
            value: Callable[[float | None], str] = num if unit else partial(fixed, unit=plain(r.unit))
            cells = [f"[{COLORS[r.verdict]}]{r.verdict_text()}[/]"]
            cells.append(Name(r.test if "benchmark" in shared else f"{r.benchmark}/{r.test}"))
            cells += [safe(getattr(r, name)) for name in ("mode", "device") if name not in shared]
            cells += [value(r.base_center), value(r.head_center), pct(r.change), ci_text(r.ci), fmt_p(r.p_value)]
            t.add_row(*cells)
        con.print(t)
    failures = [("base", f) for f in doc.base.failures] + [("head", f) for f in doc.head.failures]
    for side, f in failures:
        tail = f.stderr_tail.strip().splitlines()[-1] if f.stderr_tail.strip() else f"exit {f.returncode}"
        con.print(f"[red]failed on {side}[/red] {safe(f.benchmark)}: {safe(tail)}", soft_wrap=False)
    for heading, tests in only_in_one(doc):
        con.print(safe(f"not compared, {heading} ({len(tests)}): {', '.join(tests)}"))
    for name, info in (("base", doc.base), ("head", doc.head)):
        con.print(safe(f"{name}: ref {info.ref or '-'}, torch {info.torch_version or '-'}, {info.host or '-'}, "
                       f"{info.status.value}, {info.samples} samples"
                       + (f", contended {info.contended}" if info.contended else "")))
    differ = env_differences(doc)
    if differ:
        con.print("[bold]environment differs[/bold] (base -> head):")
        for key, b, h in differ:
            if key == "torch_config":
                con.print("  torch_config: the torch build configs differ (--format markdown shows the diff)")
            else:
                note = " (changes from minute to minute)" if key in VOLATILE_ENV else ""
                con.print(safe(f"  {key}: {b} -> {h}{note}"))


def print_trends(con: Console, benchmark: str, trends: Sequence[Trend], what: str) -> None:
    """One row per test: its runs, a sparkline of the run medians, the last value and the steps found."""
    runs = {(p.label, p.side, p.started_at) for t in trends for p in t.points}
    dates = sorted(p.started_at for t in trends for p in t.points if p.started_at)
    span = f", {dates[0][:10]} .. {dates[-1][:10]}" if dates else ""
    stepped = sum(1 for t in trends if t.steps)
    con.print(safe(f"perfq history {benchmark}: {len(trends)} test(s) over {len(runs)} run(s){what}{span}; "
                     f"{stepped} with a step"))
    fields = ("mode", "device", "metric", "side")
    shared = constant_columns(trends, (*fields, "unit")) if trends else {}
    facts = [f"{k} {v}" for k, v in shared.items() if v]
    if facts:
        con.print(safe("all tests: " + ", ".join(facts)), style="dim")
    unit = shared.get("unit", "")
    t = table(("test", "f"), *[(name, "l") for name in fields if name not in shared],
              ("runs", "r"), ("trend", "l"), (f"last ({unit})" if unit else "last", "r"), ("steps", "f"))
    for tr in trends:
        values = [p.median for p in tr.points]
        steps = "; ".join(f"{pct(s.change)} at {s.label}" + (f" ({s.ref[:10]})" if s.ref else "") for s in tr.steps)
        last = num(values[-1]) if unit else fixed(values[-1], plain(tr.unit))
        cells = [Name(tr.test), *[safe(getattr(tr, n)) for n in fields if n not in shared],
                 str(len(values)), sparkline(values, 16), last, Name(steps or "-")]
        t.add_row(*cells)
    con.print(t)


def print_history_runs(con: Console, doc: HistoryDocument) -> None:
    """``perfq history --runs``: one row per run and test; columns equal in every row said once above."""
    names = ("test", "mode", "device", "label", "side", "ref", "torch_version", "host", "started_at", "status")
    shared = constant_columns(doc.rows, (*names, "unit")) if len(doc.rows) > 1 else {}
    cols = [(c, "f" if c in ("test", "label") else "l") for c in names if c not in shared]
    t = table(*cols, ("median" + (f" ({shared['unit']})" if "unit" in shared else ""), "r"), ("n", "r"))
    for r in doc.rows:
        median = num(r.median) if "unit" in shared else fixed(r.median, plain(r.unit))
        t.add_row(*[Name(getattr(r, c) or "") if kind == "f" else safe(getattr(r, c) or "") for c, kind in cols],
                  median, str(r.n))
    facts = ", ".join(f"{k} {v}" for k, v in shared.items() if v and k != "unit")
    con.print(safe(f"perfq history {doc.benchmark}: {len(doc.rows)} run row(s)" + (f"; all: {facts}" if facts else "")))
    con.print(t)


def history_markdown(doc: HistoryDocument, runs: bool) -> str:
    """``perfq history --format markdown``: a trend per test and side, or (``runs``) a row per run and test."""
    if runs:
        return "\n".join(md_table(
            ("test", "mode", "label", "side", "ref", "torch", "started", "median", "n"), "lllllllrr",
            ((md_code(r.test), md_text(r.mode), md_code(r.label), r.side, md_text(r.ref), md_text(r.torch_version),
              md_text(r.started_at), md_text(fixed(r.median, r.unit)), r.n) for r in doc.rows))) + "\n"
    return "\n".join(md_table(("test", "mode", "device", "side", "runs", "trend", "last", "steps"), "llllrlrl", (
        (md_code(t.test), md_text(t.mode), md_text(t.device), t.side, len(t.points),
         sparkline([p.median for p in t.points]), md_text(fixed(t.points[-1].median, t.unit)),
         "; ".join(f"{s.change:+.1%} at {md_code(s.label)}" for s in t.steps) or "-") for t in doc.trends))) + "\n"


def print_comparison_as(doc: ComparisonDocument, fmt: Format) -> None:
    """A comparison on stdout: JSON, markdown, or the terminal's table."""
    if fmt == Format.json:
        print_json(doc.to_json())
    elif fmt == Format.markdown:
        sys.stdout.write(render_markdown(doc))
    else:
        print_comparison(wide_console(), doc)
