"""Renderers for the affected document: rich table (and chain trees), markdown, GHA matrix."""

from __future__ import annotations

from dataclasses import replace

from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from common.render import md_code, md_text, plain
from perfq.run.plan import RunShape, TestPlan, split
from perfq.run.plan_view import markdown_lines, print_plan
from perfq.terminal import Name, console
from query.document import AffectedDoc, SelectedBenchmark
from query.model import ChainStep, StepKind

_LIST_SHOWN = 40


def gha_matrix(doc: AffectedDoc) -> dict:
    """A GitHub Actions matrix: one entry per benchmark x mode x device."""
    include = [
        {
            "benchmark": b.name,
            "file": b.file,
            "mode": mode,
            "device": device,
            "operators": ",".join(b.modules),
            "tests": " ".join(b.tests),
        }
        for b in doc.all_benchmarks()
        for mode in b.modes
        for device in b.devices
    ]
    return {"include": include}


def shard_matrix(plan: TestPlan) -> dict:
    """A GitHub Actions matrix of the plan's shards: one entry per shard (``perfq run --shards N --shard K``)."""
    shape = RunShape(rounds=plan.rounds, sides=plan.sides, shards=plan.shards)
    return {"include": [{"shard": s.index, "shards": plan.shards, "benchmarks": " ".join(s.benchmarks),
                         "tests": len(s.tests), "estimated_seconds": round(s.estimated_seconds, 1)}
                        for s in split(plan, shape)]}


def _shared_headline(doc: AffectedDoc) -> str:
    """Shared infrastructure, first: what made it so and the canary set that stands in for the full selection."""
    canaries = list(dict.fromkeys(b.name for hit in doc.canary for b in hit.benchmarks))
    why = "; ".join(hit.trigger for hit in doc.canary) or "its operators run in most benchmarks"
    return (f"Shared infrastructure ({why}): {len(doc.benchmarks)} benchmarks, "
            f"{sum(len(b.tests) for b in doc.benchmarks)} tests execute it. Canary set ({len(canaries)}): "
            + (", ".join(canaries) or "none indexed"))


def _base_name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _short(step: ChainStep) -> str:
    """A chain step without how it was reached and without file paths: ``softmax_lastdim_kernel_impl``,
    ``benchmark file add_test.py imports benchmark_core.py, which changed``; a canary set or a note
    by what follows its last colon (the trigger, the observation)."""
    if step.kind == StepKind.BENCHMARK_FILE:
        return replace(step, name=_base_name(step.name), detail=_base_name(step.detail)).label
    if step.kind == StepKind.FUNCTION and step.file:
        return step.name.rsplit("::", 1)[-1] if "::" in step.name else step.name.rsplit(":", 1)[-1]
    if step.kind in (StepKind.OP, StepKind.STUB, StepKind.BENCHMARK) or ":" not in step.label:
        return step.label
    return step.label.rsplit("::", 1)[-1] if "::" in step.label else step.label.rsplit(":", 1)[-1]


def _why(b: SelectedBenchmark) -> str:
    """The first reason as 'changed function -> ... -> op'."""
    if not b.reasons:
        return ""
    # the benchmark node itself ends a chain; a changed benchmark file (or module it imports) is the reason
    steps = [_short(s) for s in b.reasons[0].chain if s.kind != StepKind.BENCHMARK]
    if len(steps) > 4:
        steps = [steps[0], "…", *steps[-2:]]
    return " → ".join(steps)


def _tests(b: SelectedBenchmark) -> str:
    if b.modules:
        shown = ", ".join(b.modules[:6]) + (" …" if len(b.modules) > 6 else "")
        return f"{len(b.tests)} tests: {shown}" if b.tests else shown
    if b.tests:
        return f"{len(b.tests)} tests"
    return ", ".join(b.ops[:4]) or "all"


def _shown(items: tuple[str, ...], limit: int = _LIST_SHOWN) -> str:
    return ", ".join(items[:limit]) + (f" … (+{len(items) - limit})" if len(items) > limit else "")


def _tree_label(step: ChainStep) -> str:
    """A chain step for the tree: a function's file as its base name (the JSON keeps the path)."""
    if step.kind == StepKind.FUNCTION and step.file:
        return replace(step, file=_base_name(step.file)).text
    return step.text


def explain_tree(b: SelectedBenchmark) -> Tree:
    """The benchmark's reasons as one tree: chains that start alike share their first steps."""
    tree = Tree(f"[bold]{escape(b.name)}[/bold] ({b.source.value}, {b.confidence.value})")
    children: dict[int, dict[str, Tree]] = {}
    for r in b.reasons:
        node = tree
        for step in r.chain:
            label = _tree_label(step)
            known = children.setdefault(id(node), {})
            if label not in known:
                known[label] = node.add(escape(label))
            node = known[label]
    return tree


def table(doc: AffectedDoc, explain: bool = False, plan: TestPlan | None = None) -> None:
    """The terminal view: folds long names instead of cutting them, legible at 80 columns. Shared
    infrastructure puts its canary set and the plan first, ahead of the long lists."""
    c = console()
    head = doc.head[:12] if doc.head not in ("WORKTREE", "PATCH") else doc.head
    span = escape(plain(f"{doc.base[:12]}..{head}"))
    c.print(
        f"[bold]perfq affected[/bold] {span}: {len(doc.changed_functions)} changed "
        f"function(s), {len(doc.ops)} operator(s) reached"
        + (f", {len(doc.no_op_changes)} no-op change(s)" if doc.no_op_changes else "")
    )
    if doc.shared_infrastructure:
        c.print(f"[bold magenta]{escape(_shared_headline(doc))}[/bold magenta]")
        if plan is not None:
            print_plan(c, plan, c.is_terminal)
    for w in doc.warnings:
        c.print(f"[yellow]warning:[/yellow] {escape(plain(w))}")
    benches = doc.all_benchmarks()
    if benches:
        t = Table(title="Benchmarks to run", title_justify="left", expand=False)
        t.add_column("benchmark", overflow="fold", no_wrap=False, ratio=2)
        t.add_column("tests", overflow="fold", ratio=3)
        t.add_column("conf.", overflow="fold")
        t.add_column("why", overflow="fold", ratio=4)
        devices = {b.devices for b in benches}
        modes = {b.modes for b in benches}
        for b in benches:
            extra = []
            if len(devices) > 1:
                extra.append(",".join(b.devices))
            if len(modes) > 1:
                extra.append(",".join(b.modes))
            name = Name(b.name + (" IR changed" if b.ir_changed else "") + (f" ({'; '.join(extra)})" if extra else ""),
                        style="bold yellow" if b.ir_changed else "")
            t.add_row(name, Name(_tests(b)), b.confidence.value, Name(_why(b)))
        c.print(t)
        if len(devices) == 1 or len(modes) == 1:
            c.print(
                "  on "
                + ", ".join(sorted({d for b in benches for d in b.devices}))
                + " in "
                + ", ".join(sorted({m for b in benches for m in b.modes}))
                + " mode"
            )
    elif doc.unreached_functions:
        c.print(f"No benchmark found, and perfq cannot tell what runs {len(doc.unreached_functions)} changed "
                "function(s) (reaches nothing, below): not an answer that nothing is affected.")
    else:
        c.print("No benchmark to run.")
    if explain:
        for b in doc.benchmarks:
            c.print(explain_tree(b))
    if doc.no_benchmark_ops:
        c.print(f"[bold red]NO BENCHMARK[/bold red] ({len(doc.no_benchmark_ops)}): "
                f"{escape(plain(_shown(doc.no_benchmark_ops)))}")
    for gap in doc.no_benchmark_gaps:
        c.print(f"  [red]{escape(plain(gap.text))}[/red]")
    for hit in doc.canary:
        members = ", ".join(b.name for b in hit.benchmarks) or "no indexed benchmark"
        c.print(f"[bold magenta]canary[/bold magenta] {escape(plain(f'{hit.set}: {hit.trigger} -> {members}'))}")
    for n in doc.no_op_changes:
        where = n.qualname or "outside functions"
        why = n.why or "same code tokens (comments, whitespace or formatting)"
        c.print(f"[dim]no-op[/dim] {escape(plain(f'{n.path} {where}'))}: {escape(plain(why))}")
    for u in doc.unmapped_changes:
        where = escape(plain(f"{u.file} {u.function or ''}"))
        c.print(f"[yellow]unmapped[/yellow] {where} lines {list(u.lines[:6])}: {escape(plain(u.reason))}")
    for r in doc.unreached_functions:
        where = escape(plain(f"{r.file} {r.function}"))
        c.print(f"[yellow]reaches nothing[/yellow] {where}: {escape(plain(r.reason))}")
    if plan is not None and not doc.shared_infrastructure:
        print_plan(c, plan, c.is_terminal)


def markdown(doc: AffectedDoc, plan: TestPlan | None = None) -> str:
    """A PR comment: summary first (for shared infrastructure: its canary set and the plan), then the
    plan, the benchmarks, NO BENCHMARK ops, canaries, chains."""
    benches = doc.all_benchmarks()
    summary = (
        f"**perfq**: {len(benches)} benchmark(s) selected for {len(doc.changed_functions)} changed "
        f"function(s); {len(doc.no_benchmark_ops)} affected operator(s) with NO BENCHMARK."
    )
    if doc.compile_mode:
        summary += " Compile mode (`--use-compile`) too."
    if doc.no_op_changes:
        summary += f" {len(doc.no_op_changes)} change(s) alter no behaviour (no-op)."
    if doc.unreached_functions:
        summary += (f" {len(doc.unreached_functions)} changed function(s) reach no operator and no benchmark:"
                    " perfq cannot tell what runs them.")
    lines = [summary, ""]
    if doc.shared_infrastructure:
        lines += [f"**{_shared_headline(doc)}**", ""]
    if plan is not None:
        lines += [*markdown_lines(plan), ""]
    if benches and len(benches) > 10:
        lines += [f"<details><summary>Benchmarks selected: {len(benches)}</summary>", ""]
    if benches:
        lines += ["| benchmark | tests | confidence | why |", "|---|---|---|---|"]
        for b in benches:
            lines.append(f"| {md_code(b.name)} | {md_text(_tests(b))} | {b.confidence.value} | {md_text(_why(b))} |")
        lines.append("")
        if len(benches) > 10:
            lines += ["</details>", ""]
    if doc.no_benchmark_ops:
        ops = ", ".join(md_code(o) for o in doc.no_benchmark_ops[:60])
        more = f" … (+{len(doc.no_benchmark_ops) - 60})" if len(doc.no_benchmark_ops) > 60 else ""
        lines += [
            f"<details><summary>NO BENCHMARK: {len(doc.no_benchmark_ops)} operator(s)</summary>",
            "",
            ops + more,
            "",
            "</details>",
            "",
        ]
    lines += [f"- {md_text(gap.text)}" for gap in doc.no_benchmark_gaps]
    lines += [f"- reaches nothing: {md_code(r.file)} {md_text(r.function)}: {md_text(r.reason)}"
              for r in doc.unreached_functions]
    for hit in doc.canary:
        members = ", ".join(md_code(b.name) for b in hit.benchmarks)
        lines.append(f"- canary set **{md_text(hit.set)}**: {md_text(hit.trigger)}"
                     + (f" ({members})" if members else ""))
    if doc.benchmarks:
        lines += ["", "<details><summary>Why each benchmark</summary>", ""]
        for b in doc.benchmarks:
            lines.append(f"- {md_code(b.name)} ({b.source.value})")
            for r in b.reasons[:1]:
                lines += [f"  {'  ' * i}- {md_text(step.text)}" for i, step in enumerate(r.chain)]
        lines += ["", "</details>"]
    if doc.unmapped_changes:
        lines += ["", "<details><summary>Unmapped changes</summary>", ""]
        lines += [f"- {md_code(u.file)} {md_text(u.function or '')}: {md_text(u.reason)}" for u in doc.unmapped_changes]
        lines += ["", "</details>"]
    return "\n".join(lines)


def backtest_table(report: dict) -> None:
    c = console()
    t = Table("commit", "subject", "selected", "share", "canary", "unmapped", "seconds", title="perfq backtest")
    for row in report["commits"]:
        t.add_row(
            row["commit"][:10],
            row["subject"][:50],
            str(row["selected"]),
            f"{row['share']:.0%}",
            ",".join(row["canary"]),
            str(row["unmapped"]),
            f"{row['seconds']:.2f}",
        )
    c.print(t)
    s = report["summary"]
    c.print(
        f"{s['commits']} commits, mean selected {s['mean_selected']:.1f} of {s['suite']} "
        f"({s['mean_share']:.0%}), canary escalations {s['canary_escalations']}, "
        f"unmapped {s['unmapped']}, mean {s['mean_seconds']:.2f}s per query"
    )
