"""CLI for ``perfq index`` and ``perfq stats``."""

from __future__ import annotations

from pathlib import Path

import typer

from perfq.common.cli import DbOption, Format, RepoOption, resolve_db, resolve_repo
from perfq.common.render import console, print_json


def register(app: typer.Typer) -> None:
    """Add ``index`` and ``stats`` to ``app``."""

    @app.command()
    def index(
        repo: Path = RepoOption,
        db: Path = DbOption,
        jobs: int = typer.Option(0, "--jobs", "-j", help="Worker processes (default: all cores)."),
        source_root: list[str] = typer.Option(None, "--source-root", help="C++ source roots (repeatable)."),
        native_functions: list[str] = typer.Option(None, "--native-functions", help="native_functions.yaml path(s)."),
        python_root: list[str] = typer.Option(None, "--python-root", help="Python roots (repeatable)."),
        benchmark_root: list[str] = typer.Option(None, "--benchmark-root", help="Benchmark roots (repeatable)."),
        canaries: str = typer.Option(None, "--canaries", help="Canary sets YAML (repo-relative)."),
        compile_commands: str = typer.Option(
            None, "--compile-commands", help="compile_commands.json: parse with real flags, resolve calls exactly."
        ),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
        full: bool = typer.Option(False, "--full", help="Re-link everything (no in-place patch)."),
        trace_benchmarks: bool = typer.Option(
            False, "--trace-benchmarks", help="Profile each operator benchmark once (needs torch) for traced links."
        ),
        fmt: Format = typer.Option(Format.table, "--format"),
    ) -> None:
        """Build or refresh the call-graph index of a PyTorch-style tree (incremental, atomic)."""
        from perfq.config import load_config
        from perfq.indexer.build import build_index

        root = resolve_repo(repo)
        cfg = load_config(
            root,
            {
                "source_roots": source_root,
                "native_functions": native_functions,
                "python_roots": python_root,
                "benchmark_roots": benchmark_root,
                "canaries": canaries,
                "compile_commands": compile_commands,
            },
        )
        target = resolve_db(root, db)
        report = build_index(root, cfg, target, jobs=jobs or None, quiet=quiet, full=full, trace=trace_benchmarks)
        if fmt == Format.json:
            print_json(
                {
                    "db": str(target),
                    "counts": report.counts,
                    "timings": report.timings,
                    "reparsed": report.reparsed,
                    "mode": report.mode,
                    "reused": report.reused,
                }
            )
            return
        c = console(stderr=True)
        c.print(f"indexed {root} -> {target}")
        c.print(
            f"  {report.mode}: files re-parsed {report.reparsed}, reused {report.reused}; "
            + ", ".join(
                f"{k} {v}"
                for k, v in report.counts.items()
                if k in ("files", "functions", "call_edges", "ops", "benchmarks", "reach_edges")
            )
        )
        c.print("  " + ", ".join(f"{k} {v:.1f}s" for k, v in report.timings.items()))

    @app.command()
    def stats(
        repo: Path = RepoOption, db: Path = DbOption, fmt: Format = typer.Option(Format.table, "--format")
    ) -> None:
        """Counts per table, unresolved items and per-phase timings of the index."""
        from perfq.query.index_stats import index_stats
        from perfq.schema.reader import open_index

        root = resolve_repo(repo)
        with open_index(resolve_db(root, db)) as con:
            data = index_stats(con)
        if fmt == Format.json:
            print_json(data)
            return
        from rich.table import Table

        c = console()
        table = Table("table", "rows", title="perfq index")
        for name, n in data["counts"].items():
            table.add_row(name, str(n))
        c.print(table)
        for name, value in data["resolution"].items():
            c.print(f"{name}: {value}")
        c.print("timings: " + ", ".join(f"{k} {v}s" for k, v in data["timings"].items()))
