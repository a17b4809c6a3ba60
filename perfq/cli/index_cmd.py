"""CLI for ``perfq index`` and ``perfq stats``: ``index``'s options become an ``IndexRequest`` that
``perfq.cli.index_pipeline.index`` builds; the answer is printed as a summary or JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from common.render import print_json
from perfq.cli.index_pipeline import IndexAnswer, IndexRequest
from perfq.cli.index_pipeline import index as build_requested
from perfq.options import DbOpt, Format, RepoOpt, resolve_db, resolve_repo
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


_HOW, _WHAT, _OUT = "How", "What to index", "Output"


def register(app: typer.Typer) -> None:
    """Add ``index`` and ``stats`` to ``app``."""
    app.command()(index)
    app.command()(stats)


def index(
    repo: RepoOpt = None,
    db: DbOpt = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=0,
        rich_help_panel=_HOW, help="Worker processes (default: all cores).")] = 0,
    source_root: Annotated[list[str] | None, typer.Option("--source-root",
        rich_help_panel=_WHAT, help="C++ source roots (repeatable).")] = None,
    native_functions: Annotated[list[str] | None, typer.Option("--native-functions",
        rich_help_panel=_WHAT, help="native_functions.yaml path(s).")] = None,
    python_root: Annotated[list[str] | None, typer.Option("--python-root",
        rich_help_panel=_WHAT, help="Python roots (repeatable).")] = None,
    benchmark_root: Annotated[list[str] | None, typer.Option("--benchmark-root",
        rich_help_panel=_WHAT, help="Benchmark roots (repeatable).")] = None,
    script_benchmark_root: Annotated[list[str] | None, typer.Option("--script-benchmark-root",
        rich_help_panel=_WHAT, help="Plain benchmark script dirs (repeatable).")] = None,
    upstream: Annotated[str | None, typer.Option("--upstream", rich_help_panel=_WHAT,
        help="An out-of-tree backend's PyTorch: 'torch' (installed) or a source tree.")] = None,
    canaries: Annotated[str | None, typer.Option("--canaries",
        rich_help_panel=_WHAT, help="Canary sets YAML (repo-relative).")] = None,
    compile_commands: Annotated[str | None, typer.Option("--compile-commands", rich_help_panel=_WHAT,
        help="compile_commands.json: parse with real flags, resolve calls exactly.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", rich_help_panel=_OUT, help="No progress bar.")] = False,
    full: Annotated[bool, typer.Option("--full",
        rich_help_panel=_HOW, help="Re-link everything (no in-place patch).")] = False,
    trace: Annotated[bool | None, typer.Option("--trace/--no-trace", rich_help_panel=_HOW,
        help="Trace what each benchmark test executes: runs the checkout's benchmark code, contained "
        "(default: the config's trace = auto|on|off; auto traces when torch is importable; cached).")] = None,
    native: Annotated[bool, typer.Option("--native", rich_help_panel=_HOW,
        help="Also sample benchmark tests under perf (cpu-clock, call stacks) and map the frames of "
        "libtorch_cpu.so to index functions (native_samples; needs perf; opt-in, minutes).")] = False,
    native_shard: Annotated[str | None, typer.Option("--native-shard", metavar="I/N", rich_help_panel=_HOW,
        help="With --native: sample only shard I of N of the chosen tests (one runner of a CI matrix).")] = None,
    native_out: Annotated[Path | None, typer.Option("--native-out", metavar="FILE", rich_help_panel=_HOW,
        help="With --native: also write the samples to FILE (a shard file for --native-from).")] = None,
    native_from: Annotated[list[Path] | None, typer.Option("--native-from", metavar="FILE", rich_help_panel=_HOW,
        help="Instead of sampling, merge these shard files (--native-out) into the index's native_samples.")
        ] = None,
    trace_benchmarks: Annotated[bool, typer.Option("--trace-benchmarks", hidden=True,
        rich_help_panel=_HOW, help="Same as --trace.")] = False,
    fmt: Annotated[Format, typer.Option("--format", metavar="FORMAT",
        rich_help_panel=_OUT, help="table for people, json for machines.")] = Format.table,
) -> None:
    """Build or refresh the call-graph index of a PyTorch-style tree (incremental, atomic).

    Examples:

        perfq index                      # at the root of a PyTorch checkout

        perfq index --full --trace       # re-link everything, trace what each benchmark runs

        perfq index --repo ../xpu-ops --upstream ~/pytorch    # an out-of-tree backend

        perfq index --native --native-shard 2/4 --native-out native-2.json   # one shard (CI)

        perfq index --native-from native-1.json --native-from native-2.json  # merge the shards
    """
    request = IndexRequest(
        repo=resolve_repo(repo), db=db, jobs=jobs or None, source_roots=tuple(source_root or ()),
        native_functions=tuple(native_functions or ()), python_roots=tuple(python_root or ()),
        benchmark_roots=tuple(benchmark_root or ()), script_benchmark_roots=tuple(script_benchmark_root or ()),
        upstream=upstream, canaries=canaries, compile_commands=compile_commands, quiet=quiet, full=full,
        trace=True if trace_benchmarks else trace, native=native, native_shard=native_shard,
        native_out=native_out, native_from=tuple(native_from or ()),
    )
    err = console(stderr=True)
    answer = build_requested(request, None if quiet else BuildLines(err), lambda line: err.print(line, markup=False))
    if fmt == Format.json:
        print_json(_index_json(answer))
    else:
        _print_summary(request, answer)


def _index_json(answer: IndexAnswer) -> dict:
    """``perfq index --format json``: the build's report."""
    report = answer.report
    return {
        "db": str(answer.db),
        "skipped": [{"file": path, "reason": why} for path, why in report.skipped],
        "counts": report.counts,
        "timings": report.timings,
        "reparsed": report.reparsed,
        "mode": report.mode,
        "reused": report.reused,
        "trace_failures": report.trace_failures,
        "trace_sandbox": report.trace_sandbox,
    }


_SUMMARY_COUNTS = ("files", "functions", "call_edges", "ops", "benchmarks", "reach_edges")


def _print_summary(request: IndexRequest, answer: IndexAnswer) -> None:
    """The build in a few lines on stderr: counts, timings, what was not traced or indexed."""
    report, skipped = answer.report, answer.report.skipped
    c = console(stderr=True)
    c.print(f"indexed {request.repo} -> {answer.db}")
    c.print(
        f"  {report.mode}: files re-parsed {report.reparsed}, reused {report.reused}; "
        + ", ".join(f"{k} {v}" for k, v in report.counts.items() if k in _SUMMARY_COUNTS)
    )
    c.print("  " + ", ".join(f"{k} {v:.1f}s" for k, v in report.timings.items()))
    if report.trace_sandbox.startswith("NOT") and request.quiet:  # the trace phase's line said it otherwise
        c.print(f"  tracing was {report.trace_sandbox}", markup=False, soft_wrap=True)
    for path, reason in sorted(report.trace_failures.items()):
        c.print(f"  not fully traced: {path}: {reason}")
    for path, why in skipped[:10]:
        c.print(f"  not indexed: {path}: {why}", markup=False)
    if len(skipped) > 10:
        c.print(f"  not indexed: {len(skipped) - 10} more files (perfq stats lists them)")


def stats(
    repo: RepoOpt = None,
    db: DbOpt = None,
    fmt: Annotated[Format, typer.Option("--format", metavar="FORMAT",
                                        help="table for people, json for machines.")] = Format.table,
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
