"""CLI for `perfq run`, `perfq compare`, `perfq history` and `perfq import`."""

from __future__ import annotations

import os
import shlex
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from perfq.common.cli import (
    EXIT_GATE,
    EXIT_INTERRUPTED,
    Format,
    HistoryOption,
    RepoOption,
    resolve_history,
    resolve_repo,
)
from perfq.common.render import console, print_json, wide_console
from perfq.config import load_config
from perfq.errors import PerfqError

if TYPE_CHECKING:  # the statistics (scipy) and the history (duckdb) load only when a command runs
    from perfq.run.report import ComparisonDocument


class SideName(str, Enum):
    base = "base"
    head = "head"


class Mode(str, Enum):
    eager = "eager"
    compile = "compile"
    both = "both"


def _interactive() -> bool:
    return sys.stderr.isatty() and os.environ.get("CI", "").lower() not in ("true", "1")


def _settings(repo: Path, alpha: float | None = None, min_effect: float | None = None):
    from perfq.run.compare import settings_from_config

    try:
        return settings_from_config(load_config(repo).extra, alpha=alpha, min_effect=min_effect)
    except (ValueError, TypeError) as exc:
        raise PerfqError(f"bad [tool.perfq.compare] config: {exc}") from None


def _render_comparison(doc: ComparisonDocument, fmt: Format) -> None:
    from perfq.run.report import Verdict, fmt_change, fmt_ci, fmt_p, fmt_value, render_markdown, summary_line

    if fmt == Format.json:
        print_json(doc.to_json())
        return
    if fmt == Format.markdown:
        sys.stdout.write(render_markdown(doc))
        return
    from rich.table import Table

    con = wide_console()
    con.print(summary_line(doc).replace("**", ""))
    table = Table(show_lines=False)
    for col in ("verdict", "benchmark", "test", "mode", "device", "base", "head", "change", "CI", "q"):
        table.add_column(col, justify="right" if col in ("base", "head", "change", "q") else "left")
    colors = {Verdict.regression: "red", Verdict.improvement: "green", Verdict.same: "dim", Verdict.unknown: "yellow"}
    for t in doc.tests:
        table.add_row(
            f"[{colors[t.verdict]}]{t.verdict.value}[/]", t.benchmark, t.test, t.mode, t.device,
            fmt_value(t.base_median, t.unit), fmt_value(t.head_median, t.unit), fmt_change(t.change), fmt_ci(t.ci),
            fmt_p(t.p_value),
        )
    con.print(table)
    for name, info in (("base", doc.base), ("head", doc.head)):
        con.print(
            f"{name}: ref {info.ref or '-'}  torch {info.torch_version or '-'}  "
            f"{info.host or '-'}  {info.status.value}  {info.samples} samples"
        )


def register(app: typer.Typer) -> None:
    """Add run, compare, history and import to ``app``."""

    @app.command()
    def run(
        label: Annotated[str, typer.Option("--label", "-l",
            rich_help_panel="Output", help="Comparison label shared by base and head.")],
        side: Annotated[SideName | None, typer.Option("--side",
            rich_help_panel="Sides", help="Which side this checkout is.")] = None,
        ab: Annotated[bool, typer.Option("--ab",
            rich_help_panel="Sides", help="Run both sides interleaved (A B A B ...).")] = False,
        base_python: Annotated[str | None, typer.Option("--base-python",
            rich_help_panel="Sides", help="Interpreter of the base side.")] = None,
        head_python: Annotated[str | None, typer.Option("--head-python",
            rich_help_panel="Sides", help="Interpreter of the head side.")] = None,
        affected: Annotated[
            str | None, typer.Option("--affected",
                rich_help_panel="What to run", help="Run what `perfq affected REF` selects.")
        ] = None,
        bench: Annotated[
            list[str] | None, typer.Option("--bench",
                rich_help_panel="What to run", help="Benchmark to run (file stem or script name).")
        ] = None,
        test: Annotated[list[str] | None, typer.Option("--test",
            rich_help_panel="What to run", help="Only these test names (with --bench).")] = None,
        operators: Annotated[
            str | None, typer.Option("--operators",
                rich_help_panel="What to run", help="Comma list for the runner's --operators.")
        ] = None,
        python: Annotated[str | None, typer.Option("--python",
            rich_help_panel="Sides", help="Interpreter (default: this one).")] = None,
        mode: Annotated[Mode | None, typer.Option("--mode",
            rich_help_panel="What to run", help="eager, compile or both (default eager).")] = None,
        device: Annotated[str, typer.Option("--device", rich_help_panel="What to run",
            help="Runner --device (cpu, cuda).")] = "cpu",
        repeat: Annotated[int, typer.Option("--repeat",
            rich_help_panel="Repeats", min=1, help="Samples per test and side.")] = 5,
        tag_filter: Annotated[str, typer.Option("--tag-filter", rich_help_panel="What to run",
            help="Runner --tag-filter (short, long, all).")] = "short",
        iterations: Annotated[
            int | None, typer.Option("--iterations",
                rich_help_panel="Runner settings", help="Runner --iterations (fixed count).")
        ] = None,
        num_runs: Annotated[int | None, typer.Option("--num-runs", rich_help_panel="Runner settings",
            help="Runner --num-runs per invocation.")] = None,
        warmup: Annotated[int | None, typer.Option("--warmup-iterations", rich_help_panel="Runner settings",
            help="Runner --warmup-iterations.")] = None,
        omp: Annotated[int | None, typer.Option("--omp-num-threads", rich_help_panel="Runner settings",
            help="OMP threads, both sides.")] = None,
        mkl: Annotated[int | None, typer.Option("--mkl-num-threads", rich_help_panel="Runner settings",
            help="MKL threads, both sides.")] = None,
        base_omp: Annotated[
            int | None, typer.Option("--base-omp-num-threads",
                rich_help_panel="Sides", help="OMP threads, base side only.")
        ] = None,
        head_omp: Annotated[
            int | None, typer.Option("--head-omp-num-threads",
                rich_help_panel="Sides", help="OMP threads, head side only.")
        ] = None,
        base_env: Annotated[
            list[str] | None, typer.Option("--base-env",
                rich_help_panel="Sides", help="KEY=VALUE set for the base side only.")
        ] = None,
        head_env: Annotated[
            list[str] | None, typer.Option("--head-env",
                rich_help_panel="Sides", help="KEY=VALUE set for the head side only.")
        ] = None,
        adaptive: Annotated[
            bool, typer.Option("--adaptive",
                rich_help_panel="Repeats", help="Add repeats to unknown tests (needs --ab).")
        ] = False,
        max_repeat: Annotated[int, typer.Option("--max-repeat",
            rich_help_panel="Repeats", help="Adaptive ceiling (default 3 x --repeat).")] = 0,
        budget: Annotated[float | None, typer.Option("--budget",
            rich_help_panel="Repeats", help="Adaptive time budget in seconds.")] = None,
        batch: Annotated[
            bool, typer.Option("--batch",
                rich_help_panel="Runner settings", help="Run benchmark files with equal flags in one process each.")
        ] = False,
        bench_root: Annotated[Path | None, typer.Option("--bench-root",
            rich_help_panel="What to run", help="operator_benchmark root.")] = None,
        ref: Annotated[str | None, typer.Option("--ref",
            rich_help_panel="Sides", help="Ref recorded for this side.")] = None,
        base_ref: Annotated[str | None, typer.Option("--base-ref", rich_help_panel="Sides",
            help="Ref recorded for the base side (--ab).")] = None,
        head_ref: Annotated[str | None, typer.Option("--head-ref", rich_help_panel="Sides",
            help="Ref recorded for the head side (--ab).")] = None,
        out: Annotated[
            Path | None, typer.Option("--out",
                rich_help_panel="Output", help="Also write a portable result file (perfq import).")
        ] = None,
        timeout: Annotated[float, typer.Option("--timeout",
            rich_help_panel="Runner settings", help="Seconds per benchmark invocation.")] = 900.0,
        repo: Path | None = RepoOption,
        history: Path | None = HistoryOption,
    ) -> None:
        """Run the selected benchmarks as one side (or both, --ab) of a comparison."""
        from perfq.run import execute as runner
        from perfq.run import jobs as select
        from perfq.run.comparisons import comparison_for_label
        from perfq.run.opbench import OpBenchSpec
        from perfq.run.results import export_runs

        if ab == (side is not None):
            raise PerfqError("give exactly one of --side base|head or --ab")
        if bool(affected) == bool(bench):
            raise PerfqError("give --affected REF or at least one --bench NAME")
        if adaptive and not ab:
            raise PerfqError("--adaptive needs --ab (both sides in one run)")
        repo_path = resolve_repo(repo)
        cfg = load_config(repo_path)
        root = select.benchmark_root(repo_path, cfg, bench_root)
        base_spec = OpBenchSpec(name="", device=device, tag_filter=tag_filter, iterations=iterations,
                                num_runs=num_runs, warmup_iterations=warmup, omp_num_threads=omp, mkl_num_threads=mkl)
        selection = select.Selection(affected, tuple(bench or ()), tuple(test or ()),
                                     tuple(o for o in (operators or "").split(",") if o), mode.value if mode else None)
        jobs, notes = select.select_jobs(repo_path, cfg, root, selection, base_spec,
                                         python or base_python or select.default_python())
        err = console(stderr=True)
        for note in notes:
            err.print(f"note: {note}")
        if not jobs:
            # e.g. a compile-mode matrix entry on a runner without --use-compile: not an error in CI
            err.print("nothing to run: no benchmark selected")
            if out is not None:
                export_runs([], out)
            return
        sides = select.make_sides(ab, side.value if side else None, select.SideOptions(
            python, base_python, head_python, select.parse_env(base_env), select.parse_env(head_env), base_omp,
            head_omp, ref, base_ref, head_ref))
        plan = runner.Plan(
            label=label,
            jobs=jobs,
            sides=sides,
            repeat=repeat,
            bench_root=root,
            repo=repo_path,
            history=resolve_history(repo_path, history),
            out=out,
            adaptive=adaptive,
            max_repeat=max_repeat,
            budget_seconds=budget,
            batch=batch,
            timeout=timeout,
            settings=_settings(repo_path),
            command=shlex.join(["perfq", *sys.argv[1:]]),
            notes=notes,
        )
        runs = _execute(plan, jobs, sides, repeat)
        for r in runs:
            err.print(
                f"{r.side}: {len(r.samples)} samples, {len(r.failures)} failed invocation(s), "
                f"torch {r.torch_version or '?'}, run {r.id}"
            )
            for f in r.failures:
                tail = f.stderr_tail.splitlines()[-1] if f.stderr_tail else ""
                err.print(f"  [red]failed[/red] {f.benchmark}: {tail}")
        if ab:
            _render_comparison(comparison_for_label(plan.history, label, plan.settings), Format.table)

    @app.command()
    def compare(
        label: Annotated[str, typer.Argument(help="Label given to perfq run.")],
        fmt: Annotated[Format, typer.Option("--format", "-f")] = Format.table,
        alpha: Annotated[float | None, typer.Option("--alpha", help="False discovery rate (default 0.05).")] = None,
        min_effect: Annotated[
            float | None, typer.Option("--min-effect", help="Minimum relative change (0.05).")
        ] = None,
        fail_on_regression: Annotated[
            bool, typer.Option("--fail-on-regression", help=f"Exit {EXIT_GATE} on a regression.")
        ] = False,
        repo: Path | None = RepoOption,
        history: Path | None = HistoryOption,
    ) -> None:
        """Compare the head side of LABEL against its base side."""
        from perfq.run.comparisons import comparison_for_label

        repo_path = resolve_repo(repo)
        doc = comparison_for_label(resolve_history(repo_path, history), label, _settings(repo_path, alpha, min_effect))
        _render_comparison(doc, fmt)
        if fail_on_regression and doc.summary.regression:
            raise typer.Exit(EXIT_GATE)

    @app.command("history")
    def history_cmd(
        bench: Annotated[str, typer.Argument(help="Benchmark (file stem) to show.")],
        test: Annotated[str | None, typer.Option("--test", help="Only this test.")] = None,
        fmt: Annotated[Format, typer.Option("--format", "-f")] = Format.table,
        repo: Path | None = RepoOption,
        history: Path | None = HistoryOption,
    ) -> None:
        """Show a benchmark's results across stored runs."""
        from perfq.common.render import md_table
        from perfq.run.opbench import normalize_name
        from perfq.run.report import HistoryDocument
        from perfq.schema.results_store import history_rows

        bench = normalize_name(bench)
        rows = history_rows(resolve_history(resolve_repo(repo), history), bench, test)
        if not rows:
            raise PerfqError(f"no stored results for {bench}" + (f" test {test}" if test else ""))
        if fmt == Format.json:
            print_json(HistoryDocument(bench, tuple(rows)).to_json())
            return
        if fmt == Format.markdown:
            print("\n".join(md_table(
                ("test", "mode", "label", "side", "ref", "torch", "started", "median", "n"), "lllllllrr",
                ((f"`{r.test}`", r.mode, r.label, r.side, r.ref, r.torch_version, r.started_at,
                  f"{r.median:.4g} {r.unit}", r.n) for r in rows),
            )))
            return
        from rich.table import Table

        table = Table()
        for col in ("test", "mode", "label", "side", "ref", "torch", "started", "median", "n", "status"):
            table.add_column(col, justify="right" if col in ("median", "n") else "left")
        for r in rows:
            table.add_row(r.test, r.mode, r.label, r.side, r.ref or "", r.torch_version or "", r.started_at or "",
                          f"{r.median:.4g} {r.unit}", str(r.n), r.status)
        wide_console().print(table)

    @app.command("import")
    def import_cmd(
        files: Annotated[list[Path], typer.Argument(help="Result files (perfq run --out, or history DuckDB files).")],
        repo: Path | None = RepoOption,
        history: Path | None = HistoryOption,
    ) -> None:
        """Merge result files from other machines into the history (idempotent)."""
        from perfq.run.results import import_files

        target = resolve_history(resolve_repo(repo), history)
        counts = import_files(target, files)
        print(
            f"imported {counts['files']} file(s): {counts['runs_added']} new run(s) of "
            f"{counts['runs_seen']}, {counts['samples_added']} new sample(s), "
            f"{counts['failures_added']} new failure(s) into {target}"
        )


def _execute(plan, jobs, sides, repeat):
    """Run the plan with a rich progress bar on a terminal; Ctrl-C -> one-line error, runs kept."""
    from perfq.run import execute as runner

    progress_cb = runner._quiet
    bar = None
    if _interactive():
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console(stderr=True),
            transient=False,
        )
        tasks: dict[str, object] = {}
        phase = {"adaptive": False}

        def progress_cb(event, job, advance):
            if event == "adaptive":
                phase["adaptive"] = True
                return
            if job is None:
                return
            name = job.benchmark + (" (adaptive)" if phase["adaptive"] else "")
            if name not in tasks:  # one bar per job (benchmark file or batch), created on first use
                total = None if phase["adaptive"] else repeat * len(sides)
                tasks[name] = bar.add_task(job.title + (" (adaptive)" if phase["adaptive"] else ""), total=total)
            if event == "advance":
                bar.advance(tasks[name], advance)
            elif event == "failed":
                bar.update(tasks[name], description=f"[red]{job.title} (a file failed)[/red]")

        bar.start()
    try:
        return runner.execute(plan, progress_cb)
    except KeyboardInterrupt:
        raise PerfqError(
            f"interrupted: finished samples kept in {plan.history}, runs of label {plan.label!r} marked incomplete",
            exit_code=EXIT_INTERRUPTED,
        ) from None
    finally:
        if bar is not None:
            bar.stop()
