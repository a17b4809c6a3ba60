"""CLI for `perfq ir`: collect / capture / harvest Triton IR, list labels, diff two labels."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from common.errors import PerfqError
from common.render import print_json
from perfq.ir.pipeline import (
    CaptureRequest,
    Collected,
    CollectRequest,
    Destination,
    HarvestRequest,
    capture_ir,
    collect_ir,
    harvest_ir,
    stages_of,
)
from perfq.options import EXIT_ERROR, EXIT_GATE, Format, HistoryOpt, RepoOpt, resolve_history, resolve_repo
from perfq.terminal import console, print_unified_diff

ir_app = typer.Typer(
    name="ir",
    help="Triton IR: collect it per ref, normalize it, and report which kernels changed.",
    no_args_is_help=True,
)

_STORE, _COMPILE, _FILTER, _OUT = "What to store", "What to compile", "Which IRs", "Output"
LabelOpt = Annotated[str, typer.Option("--label", "-l", rich_help_panel=_STORE,
                                       help="Name of this collection (e.g. a ref or commit).")]
TargetOpt = Annotated[list[str] | None, typer.Option(
    "--target", "-t", rich_help_panel=_COMPILE, help="Compile target backend:arch, repeatable (cuda:90, hip:gfx942).")]
StageOpt = Annotated[list[str] | None, typer.Option(
    "--stage", "-s", rich_help_panel=_FILTER, help="IR stages, comma-separated (default ttir,ttgir,llir).")]
ManifestOpt = Annotated[Path | None, typer.Option("--manifest", "-m", rich_help_panel=_COMPILE,
                                                  help="Manifest file (default perfq-ir.yaml).")]
KernelFilterOpt = Annotated[list[str] | None, typer.Option("--kernel", "-k", rich_help_panel=_FILTER,
                                                           help="Only kernels whose name contains this.")]
TargetFilterOpt = Annotated[list[str] | None, typer.Option("--target", "-t", rich_help_panel=_FILTER,
                                                           help="Only these targets.")]
CacheOpt = Annotated[bool, typer.Option(
    "--triton-cache", rich_help_panel=_COMPILE,
    help="Reuse Triton's cache instead of a fresh temporary TRITON_CACHE_DIR.")]
CommitOpt = Annotated[str | None, typer.Option("--commit", rich_help_panel=_STORE,
                                               help="Commit to record (default: HEAD of --repo).")]
FormatOpt = Annotated[Format, typer.Option("--format", "-f", metavar="FORMAT", rich_help_panel=_OUT,
                                           help="table, json or markdown.")]


def _report_collect(collected: Collected, fmt: Format) -> None:
    """The stored collection: its document as JSON, or a line (and its errors as warnings)."""
    result, doc = collected.result, collected.document
    if fmt == Format.json:
        print_json(doc.to_json())
    else:
        err = console(stderr=True)
        for e in result.errors:
            err.print(f"[yellow]warning:[/] {e}", markup=True, highlight=False)
        console().print(
            f"{doc.label}: stored {doc.stored} IRs from {result.compiles} compiles in {result.seconds:.1f}s "
            f"(triton {result.triton_version}, {len(result.errors)} errors)"
        )
    if doc.stored == 0:
        raise typer.Exit(EXIT_ERROR)


def _destination(repo: Path | None, history: Path | None, label: str, commit: str | None) -> Destination:
    root = resolve_repo(repo)
    return Destination(root, resolve_history(root, history), label, commit)


@ir_app.command()
def collect(
    label: LabelOpt,
    target: TargetOpt = None,
    stage: StageOpt = None,
    manifest: ManifestOpt = None,
    kernel: KernelFilterOpt = None,
    triton_cache: CacheOpt = False,
    commit: CommitOpt = None,
    fmt: FormatOpt = Format.table,
    repo: RepoOpt = None,
    history: HistoryOpt = None,
) -> None:
    """Compile the manifest's kernels for each target and store every IR under LABEL.

    Examples:

        perfq ir collect --label base --target cuda:90 --target hip:gfx942

        perfq ir collect -l head -m perfq-ir.yaml -k softmax --stage ttir,ttgir
    """
    request = CollectRequest(_destination(repo, history, label, commit), tuple(target or ()), tuple(stage or ()),
                             manifest, tuple(kernel or ()), fresh_cache=not triton_cache)
    _report_collect(collect_ir(request), fmt)


@ir_app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def capture(
    ctx: typer.Context,
    label: LabelOpt,
    target: TargetOpt = None,
    stage: StageOpt = None,
    triton_cache: CacheOpt = False,
    commit: CommitOpt = None,
    fmt: FormatOpt = Format.table,
    repo: RepoOpt = None,
    history: HistoryOpt = None,
) -> None:
    """Run `-- COMMAND...` (a benchmark), record every Triton specialization it compiles or
    launches (TRITON_INTERPRET=1 works on CPU), then compile them for each target.

    Examples:

        perfq ir capture --label head --target cuda:90 -- python bench.py --size 4096

        TRITON_INTERPRET=1 perfq ir capture -l base -t hip:gfx942 -- python -m pt.softmax_test
    """
    request = CaptureRequest(_destination(repo, history, label, commit), tuple(ctx.args), Path.cwd(),
                             tuple(target or ()), tuple(stage or ()), fresh_cache=not triton_cache)
    _report_collect(capture_ir(request), fmt)


@ir_app.command()
def harvest(
    label: LabelOpt,
    directory: Annotated[
        Path | None, typer.Argument(help="Cache/dump dir (default $TRITON_DUMP_DIR, $TRITON_CACHE_DIR, "
                                         "~/.triton/cache).")
    ] = None,
    stage: StageOpt = None,
    commit: CommitOpt = None,
    fmt: FormatOpt = Format.table,
    repo: RepoOpt = None,
    history: HistoryOpt = None,
) -> None:
    """Import the IR files a run left in a Triton cache or dump directory.

    Examples:

        perfq ir harvest ~/.triton/cache --label base

        TRITON_DUMP_DIR=dump python bench.py && perfq ir harvest dump --label head
    """
    request = HarvestRequest(_destination(repo, history, label, commit), directory, tuple(stage or ()))
    _report_collect(harvest_ir(request), fmt)


@ir_app.command("list")
def list_labels(
    fmt: FormatOpt = Format.table,
    repo: RepoOpt = None,
    history: HistoryOpt = None,
) -> None:
    """List the stored IR collections (label, number of IRs, Triton versions).

    Examples:

        perfq ir list

        perfq ir list --format json
    """
    from perfq.ir.store import labels, open_for_reading

    con = open_for_reading(resolve_history(resolve_repo(repo), history))
    try:
        rows = labels(con)
    finally:
        con.close()
    if fmt == Format.json:
        print_json([row._asdict() for row in rows])
        return
    for row in rows:
        print(f"{row.label}\t{row.irs} IRs\ttriton {row.triton_version}")


def _render_terminal(diffs, raw: bool, no_diff: bool) -> None:
    from rich.markup import escape

    from perfq.ir.diff import IDENTICAL, buckets, format_delta
    from perfq.ir.report import summary_line

    con = console()
    colors = {"structural": "red", "attributes-only": "yellow", "added": "cyan", "removed": "magenta"}
    con.print(summary_line(diffs), soft_wrap=True)
    groups = buckets(diffs)
    if groups:
        con.print("[bold]triage:[/]")
        for bucket, group in groups:
            con.print(f"  {len(group):3d} x {escape(bucket)}", soft_wrap=True)
        con.print("[bold]changed:[/]")
        width = max(len(d.kernel) for d in diffs if d.status != IDENTICAL)
        several = len({d.specialization for d in diffs}) > 1
        for d in diffs:
            if d.status == IDENTICAL:
                continue
            spec = f"  [dim]{escape(d.specialization)}[/]" if several else ""
            con.print(
                f"  [{colors[d.status]}]{d.status:<15}[/] {escape(d.kernel):<{width}}  {d.target:<11}"
                f" {d.stage:<6} {escape(format_delta(d.op_delta, 6))}{spec}",
                soft_wrap=True,
            )
    if no_diff:
        return
    for d in diffs:
        if d.status == IDENTICAL and not (raw and d.raw_diff):
            continue
        con.print(f"\n[bold]{escape(d.kernel)}[/] {d.target} {d.stage}: {d.status}"
                  f"  ({escape(d.specialization)})", soft_wrap=True)
        print_unified_diff(d.diff)
        if raw and d.raw_diff:
            con.print("[bold]raw diff:[/]")
            print_unified_diff(d.raw_diff)


@ir_app.command()
def diff(
    a: Annotated[str, typer.Argument(help="Label of the base collection.")],
    b: Annotated[str, typer.Argument(help="Label of the new collection.")],
    fmt: FormatOpt = Format.table,
    raw: Annotated[bool, typer.Option("--raw", rich_help_panel=_OUT,
                                      help="Show the diff of the raw (unnormalized) IR too.")] = False,
    no_diff: Annotated[bool, typer.Option("--no-diff", rich_help_panel=_OUT,
                                          help="Table only (no unified diffs).")] = False,
    kernel: KernelFilterOpt = None,
    target: TargetFilterOpt = None,
    stage: StageOpt = None,
    context: Annotated[int, typer.Option("--context", "-U", rich_help_panel=_OUT,
                                         help="Lines of context in diffs.")] = 3,
    fail_on_change: Annotated[bool, typer.Option("--fail-on-change", rich_help_panel=_OUT,
                                                 help=f"Exit {EXIT_GATE} when any IR changed.")] = False,
    repo: RepoOpt = None,
    history: HistoryOpt = None,
) -> None:
    """Per kernel/target/stage: identical, attributes-only or structural, with op-count deltas
    and diffs of the normalized IR. Exits 0 whatever changed (unless --fail-on-change).

    Examples:

        perfq ir diff base head

        perfq ir diff base head -k softmax --stage ttgir --format markdown > ir.md

        perfq ir diff base head --no-diff --fail-on-change
    """
    from perfq.ir.diff import IDENTICAL, diff_collections, load_collection
    from perfq.ir.report import to_json, to_markdown
    from perfq.ir.store import labels, open_for_reading

    con = open_for_reading(resolve_history(resolve_repo(repo), history))
    try:
        known = [row.label for row in labels(con)]
        for lbl in (a, b):
            if lbl not in known:
                raise PerfqError(f"no IR collection labelled {lbl!r}; known: {', '.join(known) or 'none'}")
        col_a, col_b = load_collection(con, a), load_collection(con, b)
    finally:
        con.close()
    stages = set(stages_of(stage, ())) if stage else None
    targets = {t.strip() for v in target for t in v.split(",")} if target else None

    def keep(key) -> bool:
        return ((not kernel or any(k in key.kernel for k in kernel)) and (targets is None or key.target in targets)
                and (stages is None or key.stage in stages))

    col_a = {k: v for k, v in col_a.items() if keep(k)}
    col_b = {k: v for k, v in col_b.items() if keep(k)}
    diffs = diff_collections(col_a, col_b, a, b, with_raw=raw, context=context)
    changed = any(d.status != IDENTICAL for d in diffs)
    if fmt == Format.json:
        print_json(to_json(a, b, diffs))
    elif fmt == Format.markdown:
        sys.stdout.write(to_markdown(a, b, diffs, raw=raw))
    else:
        _render_terminal(diffs, raw, no_diff)
    if fail_on_change and changed:
        raise typer.Exit(EXIT_GATE)


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    app.add_typer(ir_app, name="ir")
