"""CLI for ``perfq index`` and ``perfq stats``."""

from __future__ import annotations

from pathlib import Path

import typer

from perfq.common.render import print_json
from perfq.options import DbOption, Format, RepoOption, resolve_db, resolve_repo
from perfq.terminal import console


class BuildLines:
    """One plain line per build phase and per traced file (readable in CI logs too)."""

    def __init__(self, out) -> None:
        self.out = out

    def phase(self, name: str, detail: str = "") -> None:
        self.out.print(f"[perfq] {name}: {detail}" if detail else f"[perfq] {name}", markup=False, soft_wrap=True)

    def traced(self, result, done: int, total: int) -> None:
        reason = result.reason or (result.errors[0] if result.errors else "")
        why = f" ({reason})" if result.status.value != "ok" and reason else ""
        self.out.print(
            f"[perfq] traced {done}/{total} {result.path}: {result.status.value}, {len(result.tests)} tests,"
            f" {result.seconds:.1f} s{why}",
            markup=False,
            soft_wrap=True,
        )


def _native_line(native: dict) -> str:
    """``perfq stats``'s line on native sampling."""
    if not native["tests"]:
        return "native samples: none (perfq index --native samples benchmark tests under perf)"
    return (f"native samples: {native['tests']} tests sampled ({native['failed']} failed); frames of libtorch_cpu.so"
            f" mapped to index functions {native['frames_mapped']}/{native['frames']}, samples"
            f" {native['samples_mapped']}/{native['samples']}")


def register(app: typer.Typer) -> None:
    """Add ``index`` and ``stats`` to ``app``."""

    @app.command()
    def index(
        repo: Path = RepoOption,
        db: Path = DbOption,
        jobs: int = typer.Option(0, "--jobs", "-j", min=0,
            rich_help_panel="How", help="Worker processes (default: all cores)."),
        source_root: list[str] = typer.Option(None, "--source-root",
            rich_help_panel="What to index", help="C++ source roots (repeatable)."),
        native_functions: list[str] = typer.Option(None, "--native-functions",
            rich_help_panel="What to index", help="native_functions.yaml path(s)."),
        python_root: list[str] = typer.Option(None, "--python-root",
            rich_help_panel="What to index", help="Python roots (repeatable)."),
        benchmark_root: list[str] = typer.Option(None, "--benchmark-root",
            rich_help_panel="What to index", help="Benchmark roots (repeatable)."),
        script_benchmark_root: list[str] = typer.Option(
            None, "--script-benchmark-root",
            rich_help_panel="What to index", help="Plain benchmark script dirs (repeatable)."
        ),
        upstream: str = typer.Option(
            None, "--upstream",
            rich_help_panel="What to index",
            help="An out-of-tree backend's PyTorch: 'torch' (installed) or a source tree."
        ),
        canaries: str = typer.Option(None, "--canaries",
            rich_help_panel="What to index", help="Canary sets YAML (repo-relative)."),
        compile_commands: str = typer.Option(
            None, "--compile-commands",
            rich_help_panel="What to index",
            help="compile_commands.json: parse with real flags, resolve calls exactly."
        ),
        quiet: bool = typer.Option(False, "--quiet", "-q", rich_help_panel="Output", help="No progress bar."),
        full: bool = typer.Option(False, "--full",
            rich_help_panel="How", help="Re-link everything (no in-place patch)."),
        trace: bool = typer.Option(
            None,
            "--trace/--no-trace",
            rich_help_panel="How",
            help="Trace what each benchmark test executes: runs the checkout's benchmark code, contained "
            "(default: the config's trace = auto|on|off; auto traces when torch is importable; cached).",
        ),
        native: bool = typer.Option(
            False, "--native",
            rich_help_panel="How",
            help="Also sample benchmark tests under perf (cpu-clock, call stacks) and map the frames of "
            "libtorch_cpu.so to index functions (native_samples; needs perf; opt-in, minutes).",
        ),
        native_shard: str = typer.Option(None, "--native-shard", metavar="I/N", rich_help_panel="How",
            help="With --native: sample only shard I of N of the chosen tests (one runner of a CI matrix)."),
        native_out: Path = typer.Option(None, "--native-out", metavar="FILE", rich_help_panel="How",
            help="With --native: also write the samples to FILE (a shard file for --native-from)."),
        native_from: list[Path] = typer.Option(None, "--native-from", metavar="FILE", rich_help_panel="How",
            help="Instead of sampling, merge these shard files (--native-out) into the index's native_samples."),
        trace_benchmarks: bool = typer.Option(False, "--trace-benchmarks", hidden=True,
            rich_help_panel="How", help="Same as --trace."),
        fmt: Format = typer.Option(Format.table, "--format", metavar="FORMAT",
            rich_help_panel="Output", help="table for people, json for machines."),
    ) -> None:
        """Build or refresh the call-graph index of a PyTorch-style tree (incremental, atomic).

        Examples:

            perfq index                      # at the root of a PyTorch checkout

            perfq index --full --trace       # re-link everything, trace what each benchmark runs

            perfq index --repo ../xpu-ops --upstream ~/pytorch    # an out-of-tree backend

            perfq index --native --native-shard 2/4 --native-out native-2.json   # one shard (CI)

            perfq index --native-from native-1.json --native-from native-2.json  # merge the shards
        """
        from indexer.build import build_index
        from indexer.native import NativeRun, Shard
        from perfq.config import load_config

        root = resolve_repo(repo)
        cfg = load_config(
            root,
            {
                "source_roots": source_root,
                "native_functions": native_functions,
                "python_roots": python_root,
                "benchmark_roots": benchmark_root,
                "script_benchmark_roots": script_benchmark_root,
                "upstream": upstream,
                "canaries": canaries,
                "compile_commands": compile_commands,
            },
        )
        for key in cfg.unknown_keys():
            console(stderr=True).print(f"warning: unknown config key {key!r} is ignored", markup=False)
        target = resolve_db(root, db)
        report = build_index(
            root,
            cfg,
            target,
            jobs=jobs or None,
            quiet=quiet,
            full=full,
            trace=True if trace_benchmarks else trace,
            events=None if quiet else BuildLines(console(stderr=True)),
            native=native,
            native_run=NativeRun(Shard.parse(native_shard) if native_shard else None, native_out,
                                 tuple(native_from or ())),
        )
        skipped = report.skipped
        if fmt == Format.json:
            print_json(
                {
                    "db": str(target),
                    "skipped": [{"file": path, "reason": why} for path, why in skipped],
                    "counts": report.counts,
                    "timings": report.timings,
                    "reparsed": report.reparsed,
                    "mode": report.mode,
                    "reused": report.reused,
                    "trace_failures": report.trace_failures,
                    "trace_sandbox": report.trace_sandbox,
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
        if report.trace_sandbox.startswith("NOT") and quiet:  # the trace phase's line said it otherwise
            c.print(f"  tracing was {report.trace_sandbox}", markup=False, soft_wrap=True)
        for path, reason in sorted(report.trace_failures.items()):
            c.print(f"  not fully traced: {path}: {reason}")
        for path, why in skipped[:10]:
            c.print(f"  not indexed: {path}: {why}", markup=False)
        if len(skipped) > 10:
            c.print(f"  not indexed: {len(skipped) - 10} more files (perfq stats lists them)")

    @app.command()
    def stats(
        repo: Path = RepoOption, db: Path = DbOption,
        fmt: Format = typer.Option(Format.table, "--format", metavar="FORMAT",
                                   help="table for people, json for machines."),
    ) -> None:
        """Counts per table, unresolved items and per-phase timings of the index.

        Examples:

            perfq stats

            perfq stats --format json | jq .resolution
        """
        from query.index_stats import index_stats
        from schema.reader import open_index

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
        tr = data["traces"]
        modes = ", ".join(f"{k} {v}" for k, v in tr["by_mode"].items())
        if tr["files"]:
            c.print(f"traced benchmark files: {tr['ok']}/{tr['files']} ok; {tr['tests']} tests ({modes})")
        else:
            c.print("traced benchmark files: none (indexed with --no-trace, or without torch)")
        for f in tr["failed"]:
            c.print(f"  {f['status']}: {f['file']}: {f['reason']}")
        c.print(_native_line(data["native"]), markup=False)
        if data["skipped_files"]:
            c.print(f"files not indexed: {len(data['skipped_files'])}")
            for f in data["skipped_files"]:
                c.print(f"  {f['file']}: {f['reason']}", markup=False)
        c.print("timings: " + ", ".join(f"{k} {v}s" for k, v in data["timings"].items()))
