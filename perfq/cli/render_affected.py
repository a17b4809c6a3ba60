"""Renderers for the affected document: rich table, markdown, GHA matrix, names."""

from __future__ import annotations

from rich.table import Table

from perfq.common.render import console
from perfq.query.affected import all_benchmarks


def gha_matrix(doc: dict) -> dict:
    """A GitHub Actions matrix: one entry per benchmark x mode x device."""
    include = [
        {"benchmark": b["name"], "file": b["file"], "mode": mode, "device": device, "tests": " ".join(b["tests"])}
        for b in all_benchmarks(doc)
        for mode in b["modes"]
        for device in b["devices"]
    ]
    return {"include": include}


def _reason(b: dict) -> str:
    if not b["reasons"]:
        return ""
    chain = b["reasons"][0]["chain"]
    steps = [s.split(" [")[0] for s in chain]
    return " -> ".join(s.rsplit(":", 1)[-1] if ":" in s and not s.startswith(("op ", "stub ")) else s for s in steps)


def table(doc: dict, explain: bool = False) -> None:
    c = console()
    c.print(
        f"[bold]perfq affected[/bold] {doc['base'][:12]}..{doc['head'][:12]}: "
        f"{len(doc['changed_functions'])} changed functions, {len(doc['ops'])} operators reached"
    )
    for w in doc.get("warnings", []):
        c.print(f"[yellow]warning:[/yellow] {w}")
    t = Table("benchmark", "tests / ops", "modes", "devices", "confidence", "why", title="Benchmarks to run")
    for b in all_benchmarks(doc):
        t.add_row(
            b["name"] + (" [bold yellow]IR changed[/]" if b.get("ir_changed") else ""),
            ", ".join(b["tests"] or b["ops"][:4]),
            ",".join(b["modes"]),
            ",".join(b["devices"]),
            b["confidence"],
            _reason(b),
        )
    c.print(t)
    if explain:
        for b in doc["benchmarks"]:
            c.print(f"[bold]{b['name']}[/bold]")
            for r in b["reasons"]:
                for i, step in enumerate(r["chain"]):
                    c.print(f"  {'  ' * i}{'-> ' if i else ''}{step}")
    if doc["no_benchmark_ops"]:
        c.print(
            f"[bold red]NO BENCHMARK[/bold red] ({len(doc['no_benchmark_ops'])}): "
            + ", ".join(doc["no_benchmark_ops"][:40])
            + (" ..." if len(doc["no_benchmark_ops"]) > 40 else "")
        )
    for cs in doc["canary"]:
        c.print(
            f"[bold magenta]canary[/bold magenta] {cs['set']}: {cs['trigger']} -> "
            + ", ".join(b["name"] for b in cs["benchmarks"])
        )
    for u in doc["unmapped_changes"]:
        c.print(
            f"[yellow]unmapped[/yellow] {u['file']} {u.get('function') or ''} lines {u['lines'][:6]}: {u['reason']}"
        )


def markdown(doc: dict) -> str:
    """A PR comment: summary first, then the benchmarks, NO BENCHMARK ops, canaries."""
    benches = all_benchmarks(doc)
    lines = [
        f"**perfq**: {len(benches)} benchmark(s) selected for {len(doc['changed_functions'])} changed "
        f"function(s); {len(doc['no_benchmark_ops'])} affected operator(s) with NO BENCHMARK."
        + (" Compile mode (`--use-compile`) too." if doc["compile_mode"] else ""),
        "",
    ]
    if benches:
        lines += ["| benchmark | tests / ops | modes | devices | confidence | why |", "|---|---|---|---|---|---|"]
        for b in benches:
            lines.append(
                f"| `{b['name']}` | {', '.join(b['tests'] or b['ops'][:4])} | {', '.join(b['modes'])} | "
                f"{', '.join(b['devices'])} | {b['confidence']} | {_reason(b)} |"
            )
        lines.append("")
    if doc["no_benchmark_ops"]:
        ops = ", ".join(f"`{o}`" for o in doc["no_benchmark_ops"][:60])
        lines += [
            f"<details><summary>NO BENCHMARK: {len(doc['no_benchmark_ops'])} operator(s)</summary>",
            "",
            ops,
            "",
            "</details>",
            "",
        ]
    for c in doc["canary"]:
        lines.append(f"- canary set **{c['set']}**: {c['trigger']}")
    if doc["unmapped_changes"]:
        lines += ["", "<details><summary>Unmapped changes</summary>", ""]
        lines += [f"- `{u['file']}` {u.get('function') or ''}: {u['reason']}" for u in doc["unmapped_changes"]]
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
