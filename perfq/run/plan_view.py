"""The budgeted plan for people: a rich table on a terminal, plain lines in CI logs, markdown for PR comments."""

from __future__ import annotations

from collections.abc import Iterator

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from perfq.run.plan import FILE_OP, LeftOut, Pick, TestPlan, format_duration

_REASONS = {
    LeftOut.canary_stands_in: "canary set stands in for them",
    LeftOut.over_budget: "over budget (would add operators or configs)",
    LeftOut.redundant: "redundant (their operators and configs run already)",
    LeftOut.other_device: "configured for another device",
}
_SHOWN = 6


def headline(plan: TestPlan) -> str:
    """One line: what runs, in how long, and the coverage of reached operators."""
    budget = "no budget (--all)" if plan.budget_seconds is None else f"budget {format_duration(plan.budget_seconds)}"
    shards = f" per shard ({plan.shards} shards)" if plan.shards > 1 else ""
    text = (f"plan: {len(plan.tests)} of {plan.selected_tests} candidate tests ({len(plan.benchmarks)} benchmarks), "
            f"~{format_duration(plan.estimated_seconds)}{shards} for {plan.rounds} round(s) x {plan.sides} side(s), "
            f"{budget}; covers {_covered(plan)}")
    if plan.canary_stand_in:
        text += f"; the canary set ({len(plan.canary_benchmarks)} benchmarks) stands in for the full set"
    return text


def _covered(plan: TestPlan) -> str:
    """What the plan covers, in (operator, dispatch key, dtype) pairs when the traces have dtypes."""
    ops = f"{plan.ops_covered}/{plan.ops_executable}"
    if plan.pairs_executable:
        return (f"{plan.pairs_covered}/{plan.pairs_executable} ({plan.coverage:.0%}) of the (operator, dispatch key, "
                f"dtype) pairs some benchmark executes ({ops} operators, {plan.ops_reached} reached)")
    return f"{ops} ({plan.coverage:.0%}) of the reached operators some benchmark executes ({plan.ops_reached} reached)"


def _rows(plan: TestPlan) -> Iterator[tuple[str, str, str, str]]:
    """(benchmark, tests, seconds per round and side, why) per benchmark of the plan."""
    for bench in plan.benchmarks:
        tests = [t for t in plan.tests if t.benchmark == bench]
        covers = [t for t in tests if t.pick == Pick.covers]
        ops = {op for t in tests for op in t.ops if not op.startswith(FILE_OP)}
        why = []
        if covers:
            why.append(f"{len(covers)} cover {len(ops)} op(s)")
        if spread := [t for t in tests if t.pick == Pick.spread]:
            why.append(f"{len(spread)} add configs")
        if any(t.pick == Pick.all for t in tests):
            why.append("--all")
        named = [t.test for t in tests if t.test]
        shown = ", ".join(named[:2]) + (f" (+{len(named) - 2})" if len(named) > 2 else "") if named else "whole file"
        yield bench, shown, f"{sum(t.cost_seconds for t in tests):.1f}", "; ".join(why)


def left_out_lines(plan: TestPlan) -> Iterator[str]:
    """One line per reason a test is left out, with the benchmarks it hits most."""
    by_reason: dict[LeftOut, list[tuple[str, int]]] = {}
    for g in plan.left_out:
        by_reason.setdefault(g.reason, []).append((g.benchmark, g.tests))
    for reason, groups in by_reason.items():
        groups.sort(key=lambda bt: (-bt[1], bt[0]))
        shown = ", ".join(f"{b} {n}" for b, n in groups[:_SHOWN]) + (" …" if len(groups) > _SHOWN else "")
        yield f"left out, {_REASONS[reason]}: {sum(n for _, n in groups)} tests ({shown})"
    if plan.uncovered_ops:
        more = f" … (+{len(plan.uncovered_ops) - 12})" if len(plan.uncovered_ops) > 12 else ""
        yield f"operators not run (over budget): {', '.join(plan.uncovered_ops[:12])}{more}"
    if plan.uncovered_pairs:
        more = f" … (+{len(plan.uncovered_pairs) - 12})" if len(plan.uncovered_pairs) > 12 else ""
        yield f"pairs not run (over budget): {', '.join(plan.uncovered_pairs[:12])}{more}"


def plain_lines(plan: TestPlan) -> Iterator[str]:
    """The plan for CI logs: the headline, one line per benchmark, what is left out, notes."""
    yield headline(plan)
    for bench, tests, seconds, why in _rows(plan):
        yield f"  run {bench}: {tests}; {seconds} s per round and side; {why}"
    yield from (f"  {line}" for line in left_out_lines(plan))
    yield from (f"  note: {n}" for n in plan.notes)


def print_plan(con: Console, plan: TestPlan, interactive: bool) -> None:
    """A rich table on a terminal, plain lines anywhere else."""
    if not interactive:
        for line in plain_lines(plan):
            con.print(line, markup=False, highlight=False, soft_wrap=True)
        return
    con.print(f"[bold]{escape(headline(plan))}[/bold]")
    t = Table(title="Tests to run", title_justify="left", expand=False)
    t.add_column("benchmark", overflow="fold", ratio=2)
    t.add_column("tests", overflow="fold", ratio=3)
    t.add_column("s/round", justify="right")
    t.add_column("why", overflow="fold", ratio=2)
    for row in _rows(plan):
        t.add_row(*(escape(x) for x in row))
    con.print(t)
    for line in left_out_lines(plan):
        con.print(f"[dim]{escape(line)}[/dim]")
    for n in plan.notes:
        con.print(f"[yellow]note:[/yellow] {escape(n)}")


def markdown_lines(plan: TestPlan) -> list[str]:
    """The plan in a PR comment: headline, a table of what runs, what is left out and why."""
    lines = [f"**{headline(plan)}**", "", "| benchmark | tests | s per round and side | why |", "|---|---|---:|---|"]
    lines += [f"| `{b}` | {tests} | {s} | {why} |" for b, tests, s, why in _rows(plan)]
    lines.append("")
    lines += [f"- {line}" for line in left_out_lines(plan)]
    lines += [f"- note: {n}" for n in plan.notes]
    return lines
